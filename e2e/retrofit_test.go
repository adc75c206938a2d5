package e2e

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// A retrofitted file goes on to be stripped, split for debug info and
// patched (issue 10). TestRetrofitSurvivesTools converts programs and
// libraries of every kind and machine, runs each tool a distribution runs
// on them, and counts a result intact only if the tool succeeds, the
// program prints what it printed before, and verify (CFI and layout)
// passes. A tool that breaks the unconverted file too is not counted.

// retrofitInput is one file to convert, with the program that exercises it.
type retrofitInput struct {
	name   string
	file   string   // the file the tools are applied to
	run    []string // command whose output must not change (file, or a program using it)
	env    []string
	arch   string // "x86_64", "aarch64", "aarch64_be"
	interp string // PT_INTERP, for patchelf --set-interpreter ("" if none)
	ldpath string // where run finds the library (lib inputs)
}

// retrofitTool is one tool invocation on file f (in its own directory).
type retrofitTool struct {
	name string
	run  func(t *testing.T, in retrofitInput, f string) error
}

func TestRetrofitSurvivesTools(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("builds and runs x86-64 Linux programs")
	}
	if testing.Short() {
		t.Skip("converts and strips a dozen files many times")
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	inputs := retrofitInputs(t, tmp)
	tools := retrofitTools(t)

	type tally struct{ intact, total int }
	tallies := map[string]*tally{}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			dir := filepath.Join(tmp, "conv", in.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			conv := filepath.Join(dir, filepath.Base(in.file))
			b, err := exec.Command(c2s, in.file, "-o", conv).CombinedOutput()
			if err != nil {
				t.Fatalf("convert: %v\n%s", err, b)
			}
			overhead(t, in.file, conv)
			want := runInput(t, in, in.file)
			if got := runInput(t, in, conv); got != want {
				t.Fatalf("converted program prints %q, the original %q", got, want)
			}
			for _, tool := range tools {
				res := applyTool(t, c2s, tmp, in, conv, want, tool)
				if res == toolNA {
					continue
				}
				tl := tallies[tool.name]
				if tl == nil {
					tl = &tally{}
					tallies[tool.name] = tl
				}
				tl.total++
				if res == toolIntact {
					tl.intact++
				}
			}
		})
	}
	names := make([]string, 0, len(tallies))
	for n := range tallies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("%-44s intact %d/%d", n, tallies[n].intact, tallies[n].total)
	}
}

// toolResult is what a tool did to a converted file.
type toolResult int

const (
	toolNA     toolResult = iota // the tool fails on, or breaks, the unconverted file too
	toolIntact                   // it ran, and the result runs the same and passes verify
	toolBroke                    // it broke the converted file (reported with t.Errorf)
)

// applyTool runs tool on a copy of in.file (the control) and on a copy of
// conv, each in its own directory under work, and says whether the
// converted file came through intact: the tool succeeds, the program
// prints want (the original's output), and verify (CFI and layout) and
// verify --for kernel pass. A tool that fails on or breaks the original
// too is n/a and logged.
func applyTool(t *testing.T, c2s, work string, in retrofitInput, conv, want string, tool retrofitTool) toolResult {
	t.Helper()
	orig := filepath.Join(work, "orig", in.name, tool.name, filepath.Base(in.file))
	os.MkdirAll(filepath.Dir(orig), 0o755)
	copyFile(t, in.file, orig)
	if err := tool.run(t, in, orig); err != nil {
		t.Logf("%s: n/a (%v on the original)", tool.name, err)
		return toolNA
	}
	if got := runInput(t, in, orig); got != want {
		t.Logf("%s: n/a (breaks the original too)", tool.name)
		return toolNA
	}
	f := filepath.Join(work, "tool", in.name, tool.name, filepath.Base(in.file))
	os.MkdirAll(filepath.Dir(f), 0o755)
	copyFile(t, conv, f)
	if err := tool.run(t, in, f); err != nil {
		t.Errorf("%s: fails on the converted file: %v", tool.name, err)
		return toolBroke
	}
	if got := runInput(t, in, f); got != want {
		t.Errorf("%s: the program now prints %q, before %q", tool.name, got, want)
		return toolBroke
	}
	if b, err := exec.Command(c2s, "verify", "-q", f).CombinedOutput(); err != nil {
		t.Errorf("%s: verify fails: %v\n%s", tool.name, err, b)
		return toolBroke
	}
	if b, err := exec.Command(c2s, "verify", "--for", "kernel", f).CombinedOutput(); err != nil {
		t.Errorf("%s: the kernel's rules no longer hold: %v\n%s", tool.name, err, b)
		return toolBroke
	}
	return toolIntact
}

// overhead logs what the conversion added beyond the .sframe bytes, and
// returns it.
func overhead(t *testing.T, in, out string) int64 {
	t.Helper()
	a, _ := os.Stat(in)
	b, _ := os.Stat(out)
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var sf uint64
	for _, p := range f.Progs {
		if p.Type == elf.ProgType(elfread.PTGNUSFrame) {
			sf = p.Filesz
		}
	}
	extra := b.Size() - a.Size() - int64(sf)
	t.Logf("%s: %d -> %d bytes: .sframe %d, headers, moved sections and padding %d", filepath.Base(in), a.Size(), b.Size(), sf, extra)
	return extra
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// runInput runs in's command with f in place of in.file and returns its
// output (with the exit status, which must not change either).
func runInput(t *testing.T, in retrofitInput, f string) string {
	t.Helper()
	args := append([]string(nil), in.run...)
	env := append([]string(nil), in.env...)
	for i, a := range args {
		if a == in.file {
			args[i] = f
		}
	}
	if in.ldpath != "" { // a library: run the program against f's directory
		for i, e := range env {
			env[i] = strings.ReplaceAll(e, in.ldpath, filepath.Dir(f))
		}
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, in.ldpath, filepath.Dir(f))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "timed out"
	}
	status := 0
	if ee, ok := err.(*exec.ExitError); ok {
		status = ee.ExitCode()
	} else if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%s[exit %d]", out, status)
}

// sh runs a tool and returns an error with its output when it fails.
func sh(name string, args ...string) error {
	if b, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}

func retrofitTools(t *testing.T) []retrofitTool {
	eu := need(t, "eu-strip")
	patchelf := need(t, "patchelf")
	objcopy240 := toolchain.Tool(t, "bookworm", "x86_64-objcopy")
	objcopy244 := toolchain.Tool(t, "trixie", "x86_64-objcopy")
	objcopy247 := toolchain.Tool(t, "sid", "x86_64-objcopy")
	a64objcopy247 := toolchain.Tool(t, "sid", "aarch64-objcopy")
	// The system's binutils (2.40 on bookworm) for each machine, found
	// here, on the calling test's goroutine, rather than in the subtests
	// that run the tools.
	sys := map[string]string{}
	for _, tool := range []string{"strip", "objcopy"} {
		sys["x86_64-"+tool] = need(t, tool)
		sys["aarch64-"+tool] = need(t, "aarch64-linux-gnu-"+tool)
	}
	gnu := func(in retrofitInput, tool string) string {
		if in.arch == "x86_64" {
			return sys["x86_64-"+tool]
		}
		return sys["aarch64-"+tool]
	}
	return []retrofitTool{
		{"strip", func(t *testing.T, in retrofitInput, f string) error { return sh(gnu(in, "strip"), f) }},
		{"strip --strip-debug", func(t *testing.T, in retrofitInput, f string) error {
			return sh(gnu(in, "strip"), "--strip-debug", f)
		}},
		{"strip --strip-unneeded", func(t *testing.T, in retrofitInput, f string) error {
			return sh(gnu(in, "strip"), "--strip-unneeded", f)
		}},
		{"objcopy --strip-all (2.40)", func(t *testing.T, in retrofitInput, f string) error {
			if in.arch != "x86_64" {
				return sh(gnu(in, "objcopy"), "--strip-all", f) // bookworm's cross binutils
			}
			return sh(objcopy240, "--strip-all", f)
		}},
		{"dh_strip (only-keep-debug, strip-unneeded, debuglink)", func(t *testing.T, in retrofitInput, f string) error {
			objcopy := gnu(in, "objcopy")
			dbg := f + ".debug"
			if err := sh(objcopy, "--only-keep-debug", "--compress-debug-sections", f, dbg); err != nil {
				return err
			}
			if err := sh(gnu(in, "strip"), "--remove-section=.comment", "--remove-section=.note", "--strip-unneeded", f); err != nil {
				return err
			}
			return sh(objcopy, "--add-gnu-debuglink", dbg, f)
		}},
		{"objcopy --strip-all (2.44)", func(t *testing.T, in retrofitInput, f string) error {
			if in.arch != "x86_64" {
				return sh(a64objcopy247, "--strip-all", f) // no 2.44 aarch64 build here
			}
			return sh(objcopy244, "--strip-all", f)
		}},
		{"objcopy --strip-all (2.47)", func(t *testing.T, in retrofitInput, f string) error {
			if in.arch != "x86_64" {
				return sh(a64objcopy247, "--strip-all", f)
			}
			return sh(objcopy247, "--strip-all", f)
		}},
		{"eu-strip", func(t *testing.T, in retrofitInput, f string) error { return sh(eu, f) }},
		{"eu-strip -f (debug file)", func(t *testing.T, in retrofitInput, f string) error { return sh(eu, "-f", f+".debug", f) }},
		{"patchelf --set-rpath (longer)", func(t *testing.T, in retrofitInput, f string) error {
			return sh(patchelf, "--set-rpath", "/opt/cfi2sframe-test/a/rather/long/runpath/to/grow/dynstr:$ORIGIN", f)
		}},
		{"patchelf --set-interpreter (longer)", func(t *testing.T, in retrofitInput, f string) error {
			if in.interp == "" {
				return fmt.Errorf("no interpreter")
			}
			dir, base := filepath.Split(in.interp)
			return sh(patchelf, "--set-interpreter", filepath.Clean(dir)+"/../"+filepath.Base(filepath.Clean(dir))+"/"+base, f)
		}},
	}
}

const retrofitLib = `int answer(int x) { return x * 6 + 0; }
`

const retrofitMain = `#include <stdio.h>
#include <stdlib.h>
int answer(int);
int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 7;
	printf("answer(%d) = %d\n", n, answer(n));
	return 0;
}
`

// retrofitInputs builds the files: for x86-64 and AArch64, a PIE, a
// non-PIE executable and a shared library; for big-endian AArch64 (no
// libc here) a freestanding executable and a shared library linked by GNU
// ld.
func retrofitInputs(t *testing.T, tmp string) []retrofitInput {
	dir := filepath.Join(tmp, "src")
	os.MkdirAll(dir, 0o755)
	for name, src := range map[string]string{"lib.c": retrofitLib, "main.c": retrofitMain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hello, _ := filepath.Abs("../testdata/example/hello.c")
	var out []retrofitInput
	for _, arch := range []string{"x86_64", "aarch64"} {
		cc, runner := "gcc", []string(nil)
		interp := "/lib64/ld-linux-x86-64.so.2"
		if arch == "aarch64" {
			cc = need(t, "aarch64-linux-gnu-gcc")
			runner = []string{need(t, "qemu-aarch64-static"), "-L", "/usr/aarch64-linux-gnu"}
			interp = "/lib/ld-linux-aarch64.so.1"
		}
		d := filepath.Join(dir, arch)
		os.MkdirAll(d, 0o755)
		build := func(out string, args ...string) string {
			o := filepath.Join(d, out)
			if b, err := exec.Command(cc, append([]string{"-O2", "-g", "-o", o}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cc, err, b)
			}
			return o
		}
		pie := build("hello-pie", "-fPIE", "-pie", hello)
		nopie := build("hello-nopie", "-fno-PIE", "-no-pie", hello)
		lib := build("libanswer.so", "-fPIC", "-shared", filepath.Join(dir, "lib.c"))
		// The program lives apart from the library: runInput swaps the
		// library's directory.
		os.MkdirAll(filepath.Join(dir, "progs", arch), 0o755)
		prog := build("../progs/"+arch+"/answer", filepath.Join(dir, "main.c"), "-L"+d, "-lanswer")
		run := func(args ...string) []string { return append(append([]string(nil), runner...), args...) }
		env := []string{"LD_LIBRARY_PATH=" + d}
		if arch == "aarch64" {
			env = nil
			runner = append(runner, "-E", "LD_LIBRARY_PATH="+d)
		}
		out = append(out,
			retrofitInput{name: arch + "-pie", file: pie, run: run(pie, "9"), arch: arch, interp: interp},
			retrofitInput{name: arch + "-nopie", file: nopie, run: run(nopie, "9"), arch: arch, interp: interp},
			retrofitInput{name: arch + "-lib", file: lib, run: run(prog, "5"), env: env, arch: arch, ldpath: d},
		)
	}
	return append(out, bigEndianInputs(t, dir)...)
}

const beStart = `	.text
	.globl	_start
	.type	_start, %function
_start:
	.cfi_startproc
	stp	x29, x30, [sp, -16]!
	.cfi_def_cfa_offset 16
	.cfi_offset 29, -16
	.cfi_offset 30, -8
	mov	x29, sp
	bl	say
	ldp	x29, x30, [sp], 16
	.cfi_restore 30
	.cfi_restore 29
	.cfi_def_cfa_offset 0
	mov	x0, 0
	mov	x8, 93
	svc	0
	.cfi_endproc
	.globl	say
	.type	say, %function
say:
	.cfi_startproc
	mov	x0, 1
	adr	x1, msg
	mov	x2, 3
	mov	x8, 64
	svc	0
	ret
	.cfi_endproc
	.section .rodata
msg:	.ascii	"be\n"
`

// bigEndianInputs links a freestanding big-endian AArch64 program (run
// under qemu-aarch64_be) and a shared library with sid's GNU as and ld.
func bigEndianInputs(t *testing.T, dir string) []retrofitInput {
	as := toolchain.Tool(t, "sid", "aarch64-as")
	ld := toolchain.Tool(t, "sid", "aarch64-ld")
	qemu := need(t, "qemu-aarch64_be-static")
	d := filepath.Join(dir, "aarch64_be")
	os.MkdirAll(d, 0o755)
	src := filepath.Join(d, "start.s")
	if err := os.WriteFile(src, []byte(beStart), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(d, "start.o")
	if err := sh(as, "-EB", "-o", obj, src); err != nil {
		t.Fatal(err)
	}
	exe, lib := filepath.Join(d, "be-exe"), filepath.Join(d, "libbe.so")
	if err := sh(ld, "-EB", "--build-id", "-z", "separate-code", "-o", exe, obj); err != nil {
		t.Fatal(err)
	}
	if err := sh(ld, "-EB", "--build-id", "-shared", "-o", lib, obj); err != nil {
		t.Fatal(err)
	}
	return []retrofitInput{
		{name: "aarch64_be-exe", file: exe, run: []string{qemu, exe}, arch: "aarch64_be"},
		// No big-endian loader here: the library is checked by verify and
		// by nm through the tools (run prints its dynamic symbols).
		{name: "aarch64_be-lib", file: lib, run: []string{toolchain.Tool(t, "sid", "aarch64-nm"), "-D", lib}, arch: "aarch64_be"},
	}
}
