package e2e

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
)

// TestProducerMatrix (issue 21) builds one program with every compiler,
// linker and link mode a distribution ships — gcc and clang with GNU ld,
// gold, lld and mold (PIE, non-PIE, static, static-pie), musl, a shared
// library from each linker, Go, Rust, and AArch64 with GNU ld and gold —
// converts each output, and requires the converted file to run as the
// original did, to pass verify and verify --for kernel, and to come
// through strip, eu-strip, objcopy 2.40/2.44/2.47 and patchelf intact (as
// TestRetrofitSurvivesTools counts it). A producer whose output cannot be
// converted fails its subtest with the refusal, except the one known limit
// (GNU ld's and gold's static AArch64 executables; docs/layout.md), which
// must be refused with its reason.
//
// The builds run in the background, a few at a time, while the subtests
// check the producers one after another in the order listed, so the log
// reads in that order.

// matrixArg is the program's argument; every producer's program prints
// matrixWant for it.
const matrixArg = "12"

const matrixWant = "fib(12) = 144\ncallback: 650 156\nunwound: 42\n[exit 3]"

// matrixC is the program's body: recursion, callbacks through function
// pointers (one from the caller, which for the library producers lives in
// another object), malloc, and a longjmp out of a deep recursion.
const matrixC = `#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

static jmp_buf env;

static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static int twice(int x) { return 2 * x; }

static int apply(int (*f)(int), const int *v, int n) {
	int s = 0;
	for (int i = 0; i < n; i++)
		s += f(v[i]);
	return s;
}

static void dive(int depth) {
	if (depth == 0)
		longjmp(env, 42);
	dive(depth - 1);
	puts("not reached");
}

int matrix(int n, int (*square)(int)) {
	int *v = malloc(n * sizeof *v);
	if (!v)
		return 1;
	for (int i = 0; i < n; i++)
		v[i] = i + 1;
	printf("fib(%d) = %d\n", n, fib(n));
	printf("callback: %d %d\n", apply(square, v, n), apply(twice, v, n));
	switch (setjmp(env)) {
	case 0:
		dive(n);
		break;
	case 42:
		puts("unwound: 42");
		break;
	default:
		puts("longjmp: wrong value");
	}
	free(v);
	return 3;
}
`

const matrixMainC = `#include <stdlib.h>

int matrix(int n, int (*square)(int));

static int square(int x) { return x * x; }

int main(int argc, char **argv) { return matrix(argc > 1 ? atoi(argv[1]) : 20, square); }
`

const matrixGo = `package main

import (
	"fmt"
	"os"
	"strconv"
)

func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

func apply(f func(int) int, v []int) int {
	s := 0
	for _, x := range v {
		s += f(x)
	}
	return s
}

func dive(depth int) {
	if depth == 0 {
		panic(42)
	}
	dive(depth - 1)
	fmt.Println("not reached")
}

func unwound(n int) (r any) {
	defer func() { r = recover() }()
	dive(n)
	return nil
}

func main() {
	n := 20
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	v := make([]int, 0, n)
	for i := 1; i <= n; i++ {
		v = append(v, i)
	}
	fs := []func(int) int{func(x int) int { return x * x }, func(x int) int { return 2 * x }}
	fmt.Printf("fib(%d) = %d\n", n, fib(n))
	fmt.Printf("callback: %d %d\n", apply(fs[0], v), apply(fs[1], v))
	fmt.Printf("unwound: %v\n", unwound(n))
	os.Exit(3)
}
`

// matrixRust keeps to Rust 1.63 (Debian bookworm's rustc).
const matrixRust = `use std::panic;

fn fib(n: u32) -> u32 {
    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }
}

fn square(x: u32) -> u32 { x * x }

fn twice(x: u32) -> u32 { 2 * x }

#[inline(never)]
fn apply(f: fn(u32) -> u32, v: &[u32]) -> u32 {
    v.iter().map(|&x| f(x)).sum()
}

fn dive(depth: u32) {
    if depth == 0 {
        panic::panic_any(42u32);
    }
    dive(depth - 1);
    println!("not reached");
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let v: Vec<u32> = (1..=n).collect();
    let fs: [fn(u32) -> u32; 2] = [square, twice];
    println!("fib({}) = {}", n, fib(n));
    println!("callback: {} {}", apply(fs[0], &v), apply(fs[1], &v));
    panic::set_hook(Box::new(|_| {}));
    let r = panic::catch_unwind(|| dive(n)).unwrap_err();
    println!("unwound: {}", r.downcast_ref::<u32>().unwrap());
    std::process::exit(3);
}
`

// producer is one way of building the program.
type producer struct {
	name   string
	arch   string   // "x86_64" or "aarch64"
	linker string   // "bfd", "gold", "lld" or "mold", checked in the output; "" if not checked
	needs  []string // programs the build and run need (need() in the subtest)
	// refusal, when set, is the reason conversion is refused, which the
	// test requires instead of a conversion: a known limit, so that the
	// matrix fails when it moves either way.
	refusal string
	// build builds into its own directory dir from the sources in src and
	// returns the file to convert and how to run it. It runs on a
	// background goroutine, so it reports by error, not through t.
	build func(src, dir string) (retrofitInput, error)
}

// buildResult is a producer's build, handed from the builders to its subtest.
type buildResult struct {
	in  retrofitInput
	err error
}

// qemuA64 runs AArch64 programs, with the cross sysroot for the loader and libraries.
var qemuA64 = []string{"qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu"}

// cProducers lists the C builds: executables for each compiler, linker
// and link mode, and a shared library for each linker.
func cProducers() []producer {
	type mode struct {
		name  string
		flags []string
	}
	modes := []mode{
		{"pie", []string{"-fPIE", "-pie"}},
		{"nopie", []string{"-fno-PIE", "-no-pie"}},
		{"static", []string{"-static", "-no-pie"}},
		{"static-pie", []string{"-fPIE", "-static-pie"}},
	}
	linkerProg := map[string]string{"bfd": "ld.bfd", "gold": "ld.gold", "lld": "ld.lld", "mold": "mold"}
	var ps []producer
	for _, cc := range []string{"gcc", "clang"} {
		for _, ld := range []string{"bfd", "gold", "lld", "mold"} {
			for _, m := range modes {
				if ld == "gold" && m.name == "static-pie" {
					// gold cannot link a static PIE (it has no
					// --no-dynamic-linker, which -static-pie passes).
					continue
				}
				ps = append(ps, cExe(cc+"-"+ld+"-"+m.name, "x86_64", ld, cc, []string{cc, linkerProg[ld]}, append([]string{"-fuse-ld=" + ld}, m.flags...)))
			}
		}
	}
	ps = append(ps,
		cExe("musl-gcc-dynamic", "x86_64", "", "musl-gcc", []string{"musl-gcc"}, nil),
		cExe("musl-gcc-static", "x86_64", "", "musl-gcc", []string{"musl-gcc"}, []string{"-static"}),
	)
	for _, ld := range []string{"bfd", "gold", "lld", "mold"} {
		ps = append(ps, cLib("lib-gcc-"+ld, "x86_64", ld, "gcc", []string{"gcc", linkerProg[ld]}))
	}
	return ps
}

// a64Producers lists the AArch64 builds: GNU ld and gold, PIE, non-PIE,
// static and a shared library.
func a64Producers() []producer {
	cc := "aarch64-linux-gnu-gcc"
	var ps []producer
	for _, ld := range []string{"bfd", "gold"} {
		needs := []string{cc, "aarch64-linux-gnu-ld." + ld, qemuA64[0]}
		for _, m := range []struct {
			name  string
			flags []string
		}{
			{"pie", []string{"-fPIE", "-pie"}},
			{"nopie", []string{"-fno-PIE", "-no-pie"}},
			{"static", []string{"-static", "-no-pie"}},
		} {
			p := cExe("aarch64-gcc-"+ld+"-"+m.name, "aarch64", ld, cc, needs, append([]string{"-fuse-ld=" + ld}, m.flags...))
			if m.name == "static" {
				// Between the program header table and the IRELATIVE
				// relocations that glibc's startup finds through
				// __rela_iplt_start lie only the notes: room for one
				// program header, and these files have neither a
				// PT_PHDR nor a second PT_NOTE to give up (docs/layout.md).
				p.refusal = `section ".rela.plt" at 0x1d8 follows the program header table and cannot move`
			}
			ps = append(ps, p)
		}
		ps = append(ps, cLib("aarch64-lib-gcc-"+ld, "aarch64", ld, cc, needs))
	}
	return ps
}

// runner returns the command that runs a program of arch.
func runner(arch string, args ...string) []string {
	if arch == "aarch64" {
		return append(append([]string(nil), qemuA64...), args...)
	}
	return args
}

// cExe builds the program as one executable.
func cExe(name, arch, linker, cc string, needs, flags []string) producer {
	return producer{name: name, arch: arch, linker: linker, needs: needs,
		build: func(src, dir string) (retrofitInput, error) {
			exe := filepath.Join(dir, "matrix")
			args := append([]string{"-O2", "-g", "-o", exe}, flags...)
			args = append(args, filepath.Join(src, "matrix.c"), filepath.Join(src, "main.c"))
			if err := sh(cc, args...); err != nil {
				return retrofitInput{}, err
			}
			return retrofitInput{name: name, file: exe, run: runner(arch, exe, matrixArg), arch: arch}, nil
		}}
}

// cLib builds the program's body as a shared library linked by linker,
// and main apart from it (with the default linker), as
// TestRetrofitSurvivesTools does: runInput points the program at the
// directory of the library under test.
func cLib(name, arch, linker, cc string, needs []string) producer {
	return producer{name: name, arch: arch, linker: linker, needs: needs,
		build: func(src, dir string) (retrofitInput, error) {
			libdir, progdir := filepath.Join(dir, "lib"), filepath.Join(dir, "prog")
			for _, d := range []string{libdir, progdir} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return retrofitInput{}, err
				}
			}
			lib, prog := filepath.Join(libdir, "libmatrix.so"), filepath.Join(progdir, "matrix")
			if err := sh(cc, "-O2", "-g", "-fPIC", "-shared", "-fuse-ld="+linker, "-o", lib, filepath.Join(src, "matrix.c")); err != nil {
				return retrofitInput{}, err
			}
			if err := sh(cc, "-O2", "-g", "-o", prog, filepath.Join(src, "main.c"), "-L"+libdir, "-lmatrix"); err != nil {
				return retrofitInput{}, err
			}
			in := retrofitInput{name: name, file: lib, arch: arch, ldpath: libdir}
			if arch == "aarch64" {
				in.run = runner(arch, "-E", "LD_LIBRARY_PATH="+libdir, prog, matrixArg)
			} else {
				in.run = []string{prog, matrixArg}
				in.env = []string{"LD_LIBRARY_PATH=" + libdir}
			}
			return in, nil
		}}
}

// goProducer builds the Go version of the program with the Go running
// the tests, in a module of its own that needs no network, with the
// linker flags given: "-s -w" leaves no CFI at all, only the function
// table (.gopclntab) the conversion reads.
func goProducer(name string, ldflags ...string) producer {
	return producer{name: name, arch: "x86_64",
		build: func(src, dir string) (retrofitInput, error) {
			mod := filepath.Join(dir, "mod")
			if err := os.MkdirAll(mod, 0o755); err != nil {
				return retrofitInput{}, err
			}
			for name, text := range map[string]string{"go.mod": "module matrix\n\ngo 1.21\n", "main.go": matrixGo} {
				if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
					return retrofitInput{}, err
				}
			}
			exe := filepath.Join(dir, "matrix")
			// The test binary runs where go test built it, so the root
			// it was built with is the Go running the tests (which the
			// go on PATH need not be).
			//lint:ignore SA1019 see above
			goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
			args := []string{"build", "-o", exe}
			if len(ldflags) > 0 {
				args = append(args, "-ldflags="+strings.Join(ldflags, " "))
			}
			cmd := exec.Command(goCmd, append(args, ".")...)
			cmd.Dir = mod
			cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off")
			if b, err := cmd.CombinedOutput(); err != nil {
				return retrofitInput{}, fmt.Errorf("go build: %v: %s", err, strings.TrimSpace(string(b)))
			}
			return retrofitInput{name: name, file: exe, run: []string{exe, matrixArg}, arch: "x86_64"}, nil
		}}
}

// rustProducer builds the Rust version with whatever rustc is on PATH.
func rustProducer() producer {
	return producer{name: "rust", arch: "x86_64", needs: []string{"rustc"},
		build: func(src, dir string) (retrofitInput, error) {
			exe := filepath.Join(dir, "matrix")
			if err := sh("rustc", "-C", "opt-level=2", "-g", "-o", exe, filepath.Join(src, "matrix.rs")); err != nil {
				return retrofitInput{}, err
			}
			return retrofitInput{name: "rust", file: exe, run: []string{exe, matrixArg}, arch: "x86_64"}, nil
		}}
}

// linkedBy names the linker that linked file, from the marks each leaves:
// gold a .note.gnu.gold-version section, lld and mold their names in
// .comment; GNU ld leaves none.
func linkedBy(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if f.Section(".note.gnu.gold-version") != nil {
		return "gold", nil
	}
	if s := f.Section(".comment"); s != nil {
		b, err := s.Data()
		if err != nil {
			return "", err
		}
		switch {
		case bytes.Contains(b, []byte("Linker: ")) && bytes.Contains(b, []byte("LLD")):
			return "lld", nil
		case bytes.Contains(b, []byte("mold ")):
			return "mold", nil
		}
	}
	return "bfd", nil
}

// interpOf returns file's PT_INTERP ("" for a static program or a library).
func interpOf(file string) (string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", err
			}
			return string(bytes.TrimRight(b, "\x00")), nil
		}
	}
	return "", nil
}

// matrixRow is a producer's line in the summary.
type matrixRow struct {
	name      string
	converted string // "yes", or why not
	checks    string // the converted file runs the same and passes verify: "ok" or "FAIL"
	overhead  string
	tools     map[string]string // tool column: "ok", "BROKE", "n/a" or "-" (not applied)
}

func TestProducerMatrix(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("builds and runs x86-64 Linux programs")
	}
	if testing.Short() {
		t.Skip("-short: builds, converts and strips some fifty programs")
	}
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"matrix.c": matrixC, "main.c": matrixMainC, "matrix.rs": matrixRust} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	producers := append(cProducers(), goProducer("go"), goProducer("go -s -w", "-s", "-w"), rustProducer())
	producers = append(producers, a64Producers()...)

	// Build in the background, in the order listed, one per CPU; the
	// cleanup waits for the builders before the directory is removed.
	results := make([]chan buildResult, len(producers))
	queue := make(chan int, len(producers))
	for i := range producers {
		results[i] = make(chan buildResult, 1)
		queue <- i
	}
	close(queue)
	var builders sync.WaitGroup
	for w := 0; w < runtime.NumCPU(); w++ {
		builders.Add(1)
		go func() {
			defer builders.Done()
			for i := range queue {
				p := producers[i]
				dir := filepath.Join(tmp, "build", p.name)
				var r buildResult
				if r.err = os.MkdirAll(dir, 0o755); r.err == nil {
					r.in, r.err = p.build(src, dir)
				}
				results[i] <- r
			}
		}()
	}
	t.Cleanup(builders.Wait)

	c2s := buildCommand(t, tmp)
	tools := matrixTools(t)
	rows := make([]*matrixRow, len(producers))
	for i, p := range producers {
		row := &matrixRow{name: p.name, converted: "NO: not run (a tool it needs is missing)", tools: map[string]string{}}
		rows[i] = row
		t.Run(p.name, func(t *testing.T) {
			for _, prog := range p.needs {
				need(t, prog)
			}
			r := <-results[i]
			if r.err != nil {
				row.converted = "NO: the build failed"
				t.Fatalf("build: %v", r.err)
			}
			row.converted = "NO: the unconverted program is wrong"
			in := r.in
			if p.linker != "" {
				got, err := linkedBy(in.file)
				if err != nil {
					t.Fatal(err)
				}
				if got != p.linker {
					t.Fatalf("%s was linked by %s, not %s", in.file, got, p.linker)
				}
			}
			interp, err := interpOf(in.file)
			if err != nil {
				t.Fatal(err)
			}
			in.interp = interp
			want := runInput(t, in, in.file)
			if want != matrixWant {
				t.Fatalf("the unconverted program prints %q, want %q", want, matrixWant)
			}

			// 1. Convert.
			dir := filepath.Join(tmp, "conv", p.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			conv := filepath.Join(dir, filepath.Base(in.file))
			b, err := exec.Command(c2s, in.file, "-o", conv).CombinedOutput()
			if err != nil {
				line := strings.TrimSpace(string(b))
				if j := strings.IndexByte(line, '\n'); j >= 0 {
					line = line[:j]
				}
				row.converted = "NO: " + strings.TrimPrefix(line, "cfi2sframe: "+in.file+": ")
				if p.refusal != "" && strings.Contains(line, p.refusal) {
					row.converted = "NO (known limit): " + strings.TrimPrefix(line, "cfi2sframe: "+in.file+": ")
					return
				}
				t.Fatalf("convert: %v\n%s", err, b)
			}
			if p.refusal != "" {
				t.Errorf("converted, where the known refusal %q was expected: update the test and docs/layout.md", p.refusal)
			}
			row.converted = "yes"
			row.overhead = fmt.Sprint(overhead(t, in.file, conv))

			// 2. It runs the same; 3. verify and the kernel's rules pass.
			row.checks = "FAIL"
			if got := runInput(t, in, conv); got != want {
				t.Errorf("converted program prints %q, the original %q", got, want)
			}
			if b, err := exec.Command(c2s, "verify", "-q", conv).CombinedOutput(); err != nil {
				t.Errorf("verify: %v\n%s", err, b)
			}
			kernelRules(t, c2s, conv)
			if !t.Failed() {
				row.checks = "ok"
			}

			// 4. It survives the tools (patchelf only where there is a
			// dynamic section to patch: not on static executables).
			for _, tool := range tools {
				if tool.col == "patchelf" && in.interp == "" && in.ldpath == "" {
					row.tools[tool.col] = "-"
					continue
				}
				switch applyTool(t, c2s, tmp, in, conv, want, tool.retrofitTool) {
				case toolNA:
					row.tools[tool.col] = "n/a"
				case toolIntact:
					row.tools[tool.col] = "ok"
				default:
					row.tools[tool.col] = "BROKE"
				}
			}
		})
	}
	t.Log("summary\n" + matrixSummary(rows, tools))
}

// matrixTool is one of TestRetrofitSurvivesTools's tools, under a short
// name for the summary's column.
type matrixTool struct {
	col string
	retrofitTool
}

// matrixTools picks from retrofitTools the tools the matrix applies.
func matrixTools(t *testing.T) []matrixTool {
	all := map[string]retrofitTool{}
	for _, tool := range retrofitTools(t) {
		all[tool.name] = tool
	}
	var out []matrixTool
	for _, c := range []struct{ short, name string }{
		{"strip", "strip"},
		{"eu-strip", "eu-strip"},
		{"objcopy-2.40", "objcopy --strip-all (2.40)"},
		{"objcopy-2.44", "objcopy --strip-all (2.44)"},
		{"objcopy-2.47", "objcopy --strip-all (2.47)"},
		{"patchelf", "patchelf --set-rpath (longer)"},
	} {
		tool, ok := all[c.name]
		if !ok {
			t.Fatalf("retrofitTools has no %q", c.name)
		}
		out = append(out, matrixTool{c.short, tool})
	}
	return out
}

// matrixSummary formats the rows as a table: for a converted producer
// its added bytes, the checks of steps 2 and 3 and a column per tool; for
// one that did not convert, the refusal after the columns. The foot counts
// the intact results per tool (n/a not counted).
func matrixSummary(rows []*matrixRow, tools []matrixTool) string {
	var buf strings.Builder
	w := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "producer\tconverted\tadded\tchecks\t")
	for _, tool := range tools {
		fmt.Fprint(w, tool.col+"\t")
	}
	fmt.Fprintln(w)
	intact, total := map[string]int{}, map[string]int{}
	converted := 0
	for _, r := range rows {
		if r.converted != "yes" {
			fmt.Fprintf(w, "%s\tNO\t\t\t%s%s\n", r.name, strings.Repeat("\t", len(tools)), strings.TrimPrefix(r.converted, "NO: "))
			continue
		}
		converted++
		fmt.Fprintf(w, "%s\tyes\t%s\t%s\t", r.name, r.overhead, r.checks)
		for _, tool := range tools {
			c := r.tools[tool.col]
			if c == "" {
				c = "?" // the subtest stopped before this tool
			}
			switch c {
			case "ok":
				intact[tool.col]++
				total[tool.col]++
			case "BROKE":
				total[tool.col]++
			}
			fmt.Fprint(w, c+"\t")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "total\t%d/%d\t\tintact\t", converted, len(rows))
	for _, tool := range tools {
		fmt.Fprintf(w, "%d/%d\t", intact[tool.col], total[tool.col])
	}
	fmt.Fprintln(w)
	if err := w.Flush(); err != nil {
		return err.Error()
	}
	lines := strings.Split(buf.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
