package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/libsframecheck"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// TestFromCodeTrace: a library with no unwind data at all (C built
// without unwind tables or frame pointers, hand-written loops without
// .cfi_* directives: testdata/fromcode), its hot loops three calls deep.
// Converted as it is, it has no SFrame and a walk stops in it; converted
// with --from-code, trace walks every sample to _start, verify checks
// its rules against its instructions (and the kernel's rules), libsframe
// reads the section as we do, and the program still runs.
func TestFromCodeTrace(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("traces x86-64 Linux processes")
	}
	need(t, "gcc")
	tmp := t.TempDir()
	os.Chmod(tmp, 0o755)
	c2s := buildCommand(t, tmp)
	skipWithoutPtrace(t, c2s)
	src, _ := filepath.Abs("testdata/fromcode")
	plain := filepath.Join(tmp, "plain")
	os.MkdirAll(plain, 0o755)
	gcc := func(args ...string) {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	gcc("-O2", "-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-fPIC", "-shared",
		"-o", filepath.Join(plain, "libfc.so"), filepath.Join(src, "lib.c"), filepath.Join(src, "hot.S"))
	gcc("-O2", "-o", filepath.Join(plain, "prog"), filepath.Join(src, "prog.c"), "-L"+plain, "-lfc")
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no x86-64 libc.so.6")
	}
	c2sRun := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(c2s, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("cfi2sframe %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	// The library has nothing to convert without --from-code.
	if b, err := exec.Command(c2s, filepath.Join(plain, "libfc.so"), "-o", filepath.Join(tmp, "none.so")).CombinedOutput(); err == nil {
		t.Errorf("the library without CFI converted without --from-code:\n%s", b)
	}
	before, after := filepath.Join(tmp, "before"), filepath.Join(tmp, "after")
	for _, d := range []string{before, after} {
		os.MkdirAll(d, 0o755)
		c2sRun("-q", "--force", filepath.Join(plain, "prog"), "-o", filepath.Join(d, "prog"))
		c2sRun("-q", "--force", libc, "-o", filepath.Join(d, "libc.so.6"))
	}
	if b, err := os.ReadFile(filepath.Join(plain, "libfc.so")); err != nil || os.WriteFile(filepath.Join(before, "libfc.so"), b, 0o755) != nil {
		t.Fatal("copying the library")
	}
	lib := filepath.Join(after, "libfc.so")
	diags := c2sRun("--from-code", "--diagnostics", "text", filepath.Join(plain, "libfc.so"), "-o", lib)
	for _, fn := range []string{"asm_realign", "asm_pushes", "asm_leaf", "lib_inner", "lib_work"} {
		if !strings.Contains(diags, fn+" [") || !strings.Contains(diags, "from-code") {
			t.Errorf("%s is not described from its instructions:\n%s", fn, diags)
		}
	}
	v := c2sRun("verify", lib)
	if !strings.Contains(v, "checked against their instructions (0 rules that do not follow)") {
		t.Errorf("verify does not check the rules against the instructions:\n%s", v)
	}
	c2sRun("verify", "--for", "kernel", lib)
	if objdump, ok := toolchain.Path("sid", "x86_64-objdump"); ok {
		if b, err := exec.Command(objdump, "--sframe", lib).CombinedOutput(); err != nil || !strings.Contains(string(b), "asm_realign") && !strings.Contains(string(b), "func idx") {
			t.Errorf("GNU objdump --sframe: %v\n%.2000s", err, b)
		}
	}
	fromCodeLibsframe(t, lib)

	share := map[string]float64{}
	for _, d := range []string{before, after} {
		cmd := exec.Command(c2s, "trace", "-F", "499", "--", filepath.Join(d, "prog"), "2")
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+d)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("trace: %v\n%s", err, b)
		}
		s := parseTraceSummary(t, string(b))
		if s.samples < 100 {
			t.Fatalf("%d samples:\n%s", s.samples, b)
		}
		share[filepath.Base(d)] = 100 * float64(s.outermost) / float64(s.samples)
		t.Logf("%s: %d of %d samples walked to the outermost frame (%.2f%%)", filepath.Base(d), s.outermost, s.samples, share[filepath.Base(d)])
	}
	if share["after"] < 99 {
		t.Errorf("with --from-code, %.2f%% of the samples reach the outermost frame, want >= 99%%", share["after"])
	}
	if share["before"] > 50 {
		t.Errorf("without SFrame for the library, %.2f%% of the samples reach the outermost frame: the test does not stop walks", share["before"])
	}
}

// fromCodeLibsframe: libsframe 2.47.50 reads the section made from code
// as we do at every PC.
func fromCodeLibsframe(t *testing.T, file string) {
	t.Helper()
	if m := libsframecheck.Missing(toolchain.Root()); len(m) > 0 {
		if toolchain.Required() {
			t.Fatalf("libsframe not found: %v", m)
		}
		t.Logf("libsframe not found (%v): its reading is not compared", m)
		return
	}
	rs, err := libsframecheck.Build(need(t, "gcc"), toolchain.Root(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := load(t, file)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, rd := range rs {
		if rd.Is244() {
			continue
		}
		res, err := libsframecheck.Check(rd, sframeBytes(t, raw), s.Addr, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s", res)
		if res.DecodeErr != "" || res.Other != 0 || res.Agree != res.PCs || res.PCs == 0 {
			t.Errorf("libsframe reads the section made from code otherwise: %s %v", res, res.Examples)
		}
	}
}

// TestFromCodeCorpus: the hand-written functions of testdata/fromcode
// (../testdata/fromcode: every shape the analysis must describe or leave
// out), assembled without their CFI, converted with --from-code: the
// programs still run (AArch64 under qemu), verify checks every rule
// against the instructions (none fails; jump_table_far's jump, whose
// bound the straight-line check does not see, is counted as not
// re-derivable), and realign_nofp, whose CFA is held only in a general
// register, is left out with its reason.
func TestFromCodeCorpus(t *testing.T) {
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	for _, tc := range []struct{ arch, qemu, leftOut string }{
		{"x86_64", "", "realign_nofp"},
		{"aarch64", "qemu-aarch64-static", ""},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			in, _ := filepath.Abs(filepath.Join("..", "testdata", "fromcode", tc.arch+"-nocfi"))
			out := filepath.Join(tmp, tc.arch)
			b, err := exec.Command(c2s, "--from-code", "--diagnostics", "text", in, "-o", out).CombinedOutput()
			if err != nil {
				t.Fatalf("cfi2sframe: %v\n%s", err, b)
			}
			if tc.leftOut != "" && !strings.Contains(string(b), tc.leftOut+" [") {
				t.Errorf("%s is not reported left out:\n%s", tc.leftOut, b)
			}
			if v, err := exec.Command(c2s, "verify", out).CombinedOutput(); err != nil || !strings.Contains(string(v), "(0 rules that do not follow") {
				t.Errorf("verify: %v\n%s", err, v)
			}
			var run *exec.Cmd
			switch {
			case tc.qemu != "":
				run = exec.Command(need(t, tc.qemu), "-L", "/usr/aarch64-linux-gnu", out)
			case runtime.GOARCH == "amd64":
				run = exec.Command(out)
			default:
				t.Skip("runs x86-64 programs natively")
			}
			if r, err := run.CombinedOutput(); err != nil {
				t.Errorf("the converted program: %v\n%s", err, r)
			}
		})
	}
}
