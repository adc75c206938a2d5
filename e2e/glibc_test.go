package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/judge"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// TestGlibcAcceptance runs scripts/glibc-acceptance.sh check and judges its
// runs (internal/testing/judge): glibc's SFrame backtrace() (glibc built with
// --enable-sframe, libgcc_s out of reach) on our V2 output gives the same
// full-depth traces as the DWARF unwinder, with the built libc and with a
// libc we converted, plus the controls (no .sframe: 0 frames; GNU as 2.44
// --gsframe: full traces; a damaged FRE: caught by verify, no wrong
// trace).
//
// It needs the glibc that `scripts/glibc-acceptance.sh build` builds into
// its cache (30-60 minutes on 2 cores), which is outside the default test
// run and CI: without that cache the test skips, even under
// CFI2SFRAME_REQUIRE_TOOLCHAIN=1. CFI2SFRAME_GLIBC_RUN names the outputs of
// an earlier `scripts/glibc-acceptance.sh check --out DIR` to judge
// instead.
//
// With CFI2SFRAME_GLIBC_PATCH=FILE (a glibc patch the user gives, e.g.
// glibc's SFrame V3 reader as posted to libc-alpha; not shipped) the
// script runs against the glibc built with FILE applied, in its own cache,
// and records V3 runs too; the test then requires judge.GlibcV3Checks as
// well: our V3 output's full-depth traces equal to DWARF's.
func TestGlibcAcceptance(t *testing.T) {
	out := os.Getenv("CFI2SFRAME_GLIBC_RUN")
	if out == "" {
		out = glibcRun(t)
	}
	report, checks, err := judge.Glibc(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the checks of the runs in %s:\n%s", out, report)
	want := judge.GlibcChecks
	if r := judge.GlibcReader(out); r != "" {
		t.Logf("glibc: %s", r)
		want = append(append([]string(nil), want...), judge.GlibcV3Checks...)
	}
	lines := requireChecks(t, checks, want)
	// The full-depth traces go down to _start through the whole chain:
	// main, 4 fp_level, 4 nofp_level, alloca_level, 3 lib_level, the
	// callback, qsort, compare and leaf are 17 frames before libc's start
	// code and _start.
	re := regexp.MustCompile(`^(\d+) SFrame frames = DWARF, last (\S+)`)
	for _, c := range []string{"ours --for glibc, chain, full depth", "ours --for glibc + our libc, signal, full depth",
		"ours V3, chain, full depth", "ours V3 + our V3 libc, signal, full depth"} {
		m := re.FindStringSubmatch(lines[c].Text)
		if m == nil || lines[c].Status != "ok" {
			continue // reported above, or no V3 runs
		}
		if n, _ := strconv.Atoi(m[1]); n < 20 || m[2] != "_start" {
			t.Errorf("check %q: %s frames ending in %s, want at least 20 ending in _start", c, m[1], m[2])
		}
	}
}

// glibcRun runs scripts/glibc-acceptance.sh check into a new directory,
// which it returns, or skips t when there is no glibc to run it with.
func glibcRun(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the glibc checks build and run some 40 programs")
	}
	if out, err := exec.Command("bash", "../scripts/glibc-acceptance.sh", "--print").CombinedOutput(); err != nil {
		t.Skipf("no glibc built with --enable-sframe (run scripts/glibc-acceptance.sh build; 30-60 min, not part of CI): %s",
			strings.TrimSpace(string(out)))
	}
	toolchain.Tool(t, "trixie", "x86_64-as")
	dir := t.TempDir()
	c2s := buildCommand(t, dir)
	out := filepath.Join(dir, "out")
	cmd := exec.Command("bash", "../scripts/glibc-acceptance.sh", "check", "--out", out)
	cmd.Env = append(cmd.Environ(), "CFI2SFRAME="+c2s)
	outb, err := cmd.CombinedOutput()
	t.Logf("scripts/glibc-acceptance.sh check:\n%s", outb)
	if err != nil {
		t.Fatalf("scripts/glibc-acceptance.sh check: %v", err)
	}
	return out
}

// requireChecks fails the test for each of want that is missing from
// checks or not ok. It returns the checks by name.
func requireChecks(t *testing.T, checks []judge.Check, want []string) map[string]judge.Check {
	t.Helper()
	byName := map[string]judge.Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	for _, name := range want {
		c, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("check %q missing", name)
		case c.Status != "ok":
			t.Errorf("check %q: %s %s", name, c.Status, c.Text)
		}
	}
	return byName
}
