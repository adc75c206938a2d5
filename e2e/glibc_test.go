package e2e

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/toolchain"
)

// glibcChecks are the check lines scripts/glibc-acceptance.sh prints, each
// of which must be there and say "ok": a run that skipped or lost a check
// fails rather than passing with fewer.
var glibcChecks = []string{
	"reference: glibc's DWARF fallback, chain",
	"reference: glibc's DWARF fallback, signal",
	"ours --for glibc, chain, full depth",
	"ours --for glibc + our libc, chain, full depth",
	"ours V2, chain, array of the DWARF length",
	"ours V2 --pcrel, chain, array of the DWARF length",
	"ours V2 --pcrel, chain, full depth (RA-undefined FRE)",
	"control: no .sframe, chain",
	"control: GNU as 2.44 --gsframe, chain, full",
	"ours --for glibc, signal, full depth",
	"ours --for glibc + our libc, signal, full depth",
	"ours V2, signal, array of the DWARF length",
	"ours V2 --pcrel, signal, array of the DWARF length",
	"ours V2 --pcrel, signal, full depth (RA-undefined FRE)",
	"control: no .sframe, signal",
	"control: GNU as 2.44 --gsframe, signal, full",
	"control: damaged FRE, verify",
	"control: damaged FRE, chain",
	"control: damaged FRE, signal",
}

// TestGlibcAcceptance runs scripts/glibc-acceptance.sh's checks: glibc's
// SFrame backtrace() (glibc built with --enable-sframe, libgcc_s out of
// reach) on our V2 output gives the same full-depth traces as the DWARF
// unwinder, with the built libc and with a libc we converted, plus the
// controls (no .sframe: 0 frames; GNU as 2.44 --gsframe: full traces; a
// damaged FRE: caught by verify, no wrong trace).
//
// It needs the glibc that `scripts/glibc-acceptance.sh build` builds into
// its cache (30-60 minutes on 2 cores), which is outside the default test
// run and CI: without that cache the test skips, even under
// CFI2SFRAME_REQUIRE_TOOLCHAIN=1.
func TestGlibcAcceptance(t *testing.T) {
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
	cmd := exec.Command("bash", "../scripts/glibc-acceptance.sh", "check")
	cmd.Env = append(cmd.Environ(), "CFI2SFRAME="+c2s)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("scripts/glibc-acceptance.sh check:\n%s", out)
	if err != nil {
		t.Errorf("scripts/glibc-acceptance.sh check: %v", err)
	}
	lines := requireChecks(t, out, glibcChecks)
	// The full-depth traces go down to _start through the whole chain:
	// main, 4 fp_level, 4 nofp_level, alloca_level, 3 lib_level, the
	// callback, qsort, compare and leaf are 17 frames before libc's start
	// code and _start.
	re := regexp.MustCompile(`^(\d+) SFrame frames = DWARF, last (\S+)`)
	for _, c := range []string{"ours --for glibc, chain, full depth", "ours --for glibc + our libc, signal, full depth"} {
		m := re.FindStringSubmatch(strings.TrimPrefix(lines[c], "ok "))
		if m == nil {
			continue // reported above
		}
		if n, _ := strconv.Atoi(m[1]); n < 20 || m[2] != "_start" {
			t.Errorf("check %q: %s frames ending in %s, want at least 20 ending in _start", c, m[1], m[2])
		}
	}
}

// requireChecks reads the "STATUS name | text" lines an acceptance script
// prints (STATUS ok, FAIL or info) and fails the test for each of checks
// that is missing or not ok. It returns every line's "STATUS text" by
// name.
func requireChecks(t *testing.T, out string, checks []string) map[string]string {
	t.Helper()
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		status, rest, ok := strings.Cut(l, " ")
		name, text, ok2 := strings.Cut(strings.TrimSpace(rest), " | ")
		if ok && ok2 && (status == "ok" || status == "FAIL" || status == "info") {
			lines[name] = status + " " + text
		}
	}
	for _, c := range checks {
		got, ok := lines[c]
		switch {
		case !ok:
			t.Errorf("check %q missing from the output", c)
		case !strings.HasPrefix(got, "ok "):
			t.Errorf("check %q: %s", c, got)
		}
	}
	return lines
}
