// Package e2e builds small C and C++ programs twice with the reference GNU
// toolchain — once with as --gsframe, once without — converts the second
// with cfi2sframe, and checks the result: the same SFrame rules as GNU's at
// every PC, a program that still runs and prints the same, an output sid
// objdump decodes and readelf shows with GNU_SFRAME inside a LOAD, and
// verify finding no disagreement.
package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/libsframecheck"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/sfcompare"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// variant is one build of one program.
type variant struct {
	name  string
	arch  string // "x86_64", "aarch64" or "s390x"
	src   string // file in testdata
	flags []string
	lib   string // variant name of the shared library it links, or ""
	so    bool   // build a shared library
}

var variants = []variant{
	{name: "lib-lazy", arch: "x86_64", src: "lib.c", flags: []string{"-O2", "-fPIC"}, so: true},
	{name: "lib-now", arch: "x86_64", src: "lib.c", flags: []string{"-O2", "-fPIC", "-Wl,-z,now"}, so: true},
	{name: "lib-ibt", arch: "x86_64", src: "lib.c", flags: []string{"-O2", "-fPIC", "-fcf-protection", "-Wl,-z,ibtplt"}, so: true},
	{name: "O0", arch: "x86_64", src: "prog.c", flags: []string{"-O0"}, lib: "lib-lazy"},
	{name: "O2", arch: "x86_64", src: "prog.c", flags: []string{"-O2"}, lib: "lib-now"},
	{name: "Os-fp", arch: "x86_64", src: "prog.c", flags: []string{"-Os", "-fno-omit-frame-pointer"}, lib: "lib-lazy"},
	{name: "O2-drap", arch: "x86_64", src: "prog.c", flags: []string{"-O2", "-mstackrealign"}, lib: "lib-lazy"},
	{name: "O2-nopie-ibt", arch: "x86_64", src: "prog.c", flags: []string{"-O2", "-no-pie", "-fcf-protection", "-Wl,-z,ibtplt"}, lib: "lib-ibt"},
	{name: "cxx-O2", arch: "x86_64", src: "exc.cc", flags: []string{"-O2"}},
	{name: "lib", arch: "aarch64", src: "lib.c", flags: []string{"-O2", "-fPIC", "-mbranch-protection=standard"}, so: true},
	{name: "O0", arch: "aarch64", src: "prog.c", flags: []string{"-O0"}, lib: "lib"},
	{name: "O2-pac", arch: "aarch64", src: "prog.c", flags: []string{"-O2", "-mbranch-protection=standard"}, lib: "lib"},
	{name: "O2-pac-bkey", arch: "aarch64", src: "prog.c", flags: []string{"-O2", "-mbranch-protection=pac-ret+b-key"}, lib: "lib"},
	{name: "cxx-O2-pac", arch: "aarch64", src: "exc.cc", flags: []string{"-O2", "-mbranch-protection=standard"}},
	// s390x: gcc keeps RA, FP and SP in floating-point registers in
	// leaves at -O2 and -Os (flexible FDEs), frames on r11 with
	// -fno-omit-frame-pointer and at -O0 around alloca; ld's PLT.
	{name: "lib", arch: "s390x", src: "lib.c", flags: []string{"-O2", "-fPIC"}, so: true},
	{name: "O0", arch: "s390x", src: "prog.c", flags: []string{"-O0"}, lib: "lib"},
	{name: "O2", arch: "s390x", src: "prog.c", flags: []string{"-O2"}, lib: "lib"},
	{name: "Os", arch: "s390x", src: "prog.c", flags: []string{"-Os"}, lib: "lib"},
	{name: "O2-fp", arch: "s390x", src: "prog.c", flags: []string{"-O2", "-fno-omit-frame-pointer"}, lib: "lib"},
	{name: "cxx-O2", arch: "s390x", src: "exc.cc", flags: []string{"-O2"}},
}

// crossArch is how the tests build and run programs of another
// architecture: Debian's cross compilers (assembling and linking with the
// reference toolchain's binutils, -B) and qemu-user with the cross libc.
type crossArch struct {
	cc, cxx, qemu, sysroot string
}

var crossArchs = map[string]crossArch{
	"aarch64": {"aarch64-linux-gnu-gcc", "aarch64-linux-gnu-g++", "qemu-aarch64-static", "/usr/aarch64-linux-gnu"},
	"s390x":   {"s390x-linux-gnu-gcc", "s390x-linux-gnu-g++", "qemu-s390x-static", "/usr/s390x-linux-gnu"},
}

// buildCommand builds cfi2sframe into dir and returns its path.
func buildCommand(t *testing.T, dir string) string {
	t.Helper()
	c2s := filepath.Join(dir, "cfi2sframe")
	if out, err := exec.Command("go", "build", "-o", c2s, "../cmd/cfi2sframe").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return c2s
}

func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") != "" {
			t.Fatalf("%s not found (CI installs it)", prog)
		}
		t.Skipf("%s not found", prog)
	}
	return p
}

func run(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestConvertedProgramsAgreeWithGNU(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("builds and runs x86-64 Linux programs")
	}
	objdump := toolchain.Tool(t, "sid", "x86_64-objdump")
	readelf := toolchain.Tool(t, "sid", "x86_64-readelf")
	root := filepath.Dir(filepath.Dir(objdump))
	need(t, "gcc")
	need(t, "g++")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata")
	totals := map[string]*counts{}
	gnuFindings := 0
	// libsframe 2.47.50, a reader of its own, must read our V3 output as
	// we do at every PC (internal/testing/libsframecheck).
	var libsframe *libsframecheck.Reader
	if m := libsframecheck.Missing(toolchain.Root()); len(m) == 0 {
		rs, err := libsframecheck.Build(need(t, "gcc"), toolchain.Root(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for i := range rs {
			if !rs[i].Is244() {
				libsframe = &rs[i]
			}
		}
	} else if toolchain.Required() {
		t.Fatalf("libsframe not found: %v", m)
	} else {
		t.Logf("libsframe not found (%v): its reading is not compared", m)
	}
	libTotals := map[string]*libsframecheck.Result{}
	for _, v := range variants {
		v := v
		t.Run(v.arch+"/"+v.name, func(t *testing.T) {
			cc, cxx, qemu, sysroot := "gcc", "g++", "", ""
			if x, ok := crossArchs[v.arch]; ok {
				cc, cxx = need(t, x.cc), need(t, x.cxx)
				qemu, sysroot = need(t, x.qemu), x.sysroot
			}
			if strings.HasSuffix(v.src, ".cc") {
				cc = cxx
			}
			dir := filepath.Join(tmp, v.arch)
			os.MkdirAll(filepath.Join(dir, "gnu"), 0o755)
			os.MkdirAll(filepath.Join(dir, "plain"), 0o755)
			os.MkdirAll(filepath.Join(dir, "ours"), 0o755)
			out := v.name
			if v.so {
				out = "lib" + v.name + ".so"
			}
			build := func(kind string, extra ...string) string {
				o := filepath.Join(dir, kind, out)
				args := append([]string{"-B" + filepath.Join(root, "gcc-"+v.arch) + "/", "-o", o, filepath.Join(src, v.src)}, v.flags...)
				if v.so {
					args = append(args, "-shared")
				}
				if v.lib != "" {
					args = append(args, "-L"+filepath.Join(dir, kind), "-l"+v.lib)
				}
				args = append(args, extra...)
				if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
				}
				return o
			}
			gnu := build("gnu", "-Wa,--gsframe")
			plain := build("plain")
			ours := filepath.Join(dir, "ours", out)
			if b, err := exec.Command(c2s, plain, "-o", ours).CombinedOutput(); err != nil {
				t.Fatalf("cfi2sframe: %v\n%s", err, b)
			} else {
				t.Logf("cfi2sframe: %s", strings.TrimSpace(string(b)))
			}

			// (a) the same rules as GNU at every PC GNU describes.
			c := compare(t, gnu, ours)
			key := v.arch
			if totals[key] == nil {
				totals[key] = &counts{}
			}
			totals[key].Add(c)
			t.Logf("agreement with GNU: %s", c)
			if c.Differ > 0 || c.Missing > 0 {
				t.Errorf("%d PCs differ from GNU, %d GNU functions missing: %v", c.Differ, c.Missing, c.Examples)
			}

			// (a') libsframe 2.47.50 reads it as we do at every PC.
			if libsframe != nil {
				s, _, _ := load(t, ours)
				raw, err := os.ReadFile(ours)
				if err != nil {
					t.Fatal(err)
				}
				sec := sframeBytes(t, raw)
				res, err := libsframecheck.Check(*libsframe, sec, s.Addr, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s", res)
				if res.DecodeErr != "" || res.Other != 0 || res.Agree != res.PCs || res.PCs == 0 {
					t.Errorf("libsframe 2.47.50 reads our section otherwise: %s %v", res, res.Examples)
				}
				if libTotals[v.arch] == nil {
					libTotals[v.arch] = &libsframecheck.Result{Reader: libsframe.Name}
				}
				libTotals[v.arch].Add(res)
			}

			// (b) sid objdump decodes it; readelf shows GNU_SFRAME in a LOAD.
			if b, err := exec.Command(objdump, "--sframe", ours).CombinedOutput(); err != nil || !bytes.Contains(b, []byte("SFRAME_VERSION_3")) || bytes.Contains(b, []byte("rror")) {
				t.Errorf("objdump --sframe: %v\n%s", err, b)
			}
			checkSegments(t, readelf, ours)

			// eu-elflint reports nothing for ours that it did not report
			// for the input, besides not knowing the SFrame types (it says
			// the same of GNU's own output).
			if elflint, err := exec.LookPath("eu-elflint"); err == nil {
				before := lintLines(elflint, plain)
				for l := range lintLines(elflint, ours) {
					if !before[l] && !strings.Contains(l, "0x6474e554") && !strings.Contains(l, "unsupported type 1879048180") {
						t.Errorf("eu-elflint --gnu-ld: new complaint: %s", l)
					}
				}
			} else if os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") != "" {
				t.Error("eu-elflint not found (CI installs elfutils)")
			}

			// verify on GNU's own output: the only disagreement it may
			// find is ld's .plt.got description (a GNU bug, DESIGN.md).
			if b, err := exec.Command(c2s, "verify", "-q", gnu).CombinedOutput(); err != nil {
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, "sframe says") && !strings.Contains(l, "(.plt.got)") {
						t.Errorf("verify on GNU's output: %s", l)
					}
				}
				gnuFindings += strings.Count(string(b), "sframe says")
			}

			// (c) verify finds no disagreement, and our V3 keeps the
			// kernel's acceptance rules; GNU's own V3 is checked by the
			// same rules, and anything found there is reported (logged).
			if b, err := exec.Command(c2s, "verify", "-q", ours).CombinedOutput(); err != nil {
				t.Errorf("verify: %v\n%s", err, b)
			}
			kernelRules(t, c2s, ours)
			if b, err := exec.Command(c2s, "verify", "--for", "kernel", gnu).CombinedOutput(); err != nil {
				t.Logf("GNU's output breaks the kernel's rules: %s", b)
			}

			// (e) SFrame V2 (with the PCREL flag, and without): objdump
			// decodes it, and it says what V3 says wherever V3 needs no
			// flexible FDE; flex functions are skipped with a reason.
			for _, pcrel := range []bool{false, true} {
				v2 := ours + ".v2"
				args := []string{plain, "-o", v2, "--sframe-version", "2", "--diagnostics", "json"}
				if pcrel {
					args = append(args, "--pcrel")
				}
				b, err := exec.Command(c2s, args...).Output()
				if err != nil {
					t.Fatalf("cfi2sframe %v: %v", args, err)
				}
				if !bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")) {
					t.Errorf("--diagnostics json printed %q", b)
				}
				if b, err := exec.Command(objdump, "--sframe", v2).CombinedOutput(); err != nil || !bytes.Contains(b, []byte("SFRAME_VERSION_2")) {
					t.Errorf("objdump --sframe on V2: %v\n%s", err, b)
				} else if pcrel != bytes.Contains(b, []byte("SFRAME_F_FDE_FUNC_START_PCREL")) {
					t.Errorf("V2 pcrel=%v: flags wrong\n%s", pcrel, b)
				}
				s3, t3, _ := load(t, ours)
				_, t2, _ := load(t, v2)
				for i := range s3.FDEs {
					d := &s3.FDEs[i]
					if d.Flex {
						// s390x V2 has its own form for RA and FP in a
						// register: only a CFA on another register needs V3.
						if _, ok := sfcompare.Row(t2, d.Start); ok && (v.arch != "s390x" || !s390xV2Carries(t3, d)) {
							t.Errorf("V2 describes flex function at %#x", d.Start)
						}
						if v.arch != "s390x" || !s390xV2Carries(t3, d) {
							continue
						}
					}
					for pc := d.Start; pc < d.Start+uint64(d.Size); pc++ {
						a, _ := sfcompare.Row(t3, pc)
						b, ok := sfcompare.Row(t2, pc)
						a.Signal = false // V2 has no signal bit
						if a.Flex && v.arch == "s390x" {
							// RA/FP in a register in a default FDE; a
							// flexible FDE's RA padding (RA in r14) is
							// V2's RA not saved.
							a.Flex = false
							if a.RA.Kind == sframe.LocDefault {
								a.RA = sframe.Loc{Kind: sframe.LocUnsaved}
							}
						}
						if !ok || !same(a, b) {
							t.Fatalf("V2 differs from V3 at %#x: %+v / %+v", pc, b, a)
						}
					}
				}
			}

			// (d) the converted program runs and prints the same.
			if !v.so {
				runBoth(t, qemu, sysroot, dir, out)
			}
		})
	}
	for arch, c := range totals {
		t.Logf("%s total: %s", arch, c)
	}
	for arch, r := range libTotals {
		t.Logf("%s total, our V3 read by %s", arch, r)
	}
	t.Logf("verify on GNU's builds: %d disagreements, all in GNU ld's .plt.got description", gnuFindings)
}

func lintLines(elflint, file string) map[string]bool {
	out, _ := exec.Command(elflint, "--gnu-ld", file).CombinedOutput()
	m := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(strings.ReplaceAll(l, file, "FILE")); l != "" && l != "No errors" {
			// Section and program-header numbers shift by the added entries.
			m[l] = true
		}
	}
	return m
}

// s390xV2Carries says whether SFrame V2 can say what a V3 flexible FDE
// of an s390x section says: every row's CFA is on r15 or r11 (RA and FP in
// a register have V2's register-number form).
func s390xV2Carries(t *sframe.Table, d *sframe.FDE) bool {
	for i := range d.FREs {
		r := t.Interpret(d, &d.FREs[i])
		if !r.RAUndefined && (r.CFA.Kind != sframe.LocReg || (r.CFA.Reg != arch.S390X.SP() && r.CFA.Reg != arch.S390X.FP())) {
			return false
		}
	}
	return true
}

func runBoth(t *testing.T, qemu, sysroot, dir, out string) {
	t.Helper()
	var outs [2]string
	for i, kind := range []string{"plain", "ours"} {
		bin := filepath.Join(dir, kind, out)
		env := []string{"LD_LIBRARY_PATH=" + filepath.Join(dir, kind)}
		var s string
		var err error
		if qemu != "" {
			s, err = run(t, env, qemu, "-L", sysroot, bin, "x")
		} else {
			s, err = run(t, env, bin, "x")
		}
		if err != nil {
			t.Fatalf("running %s: %v\n%s", bin, err, s)
		}
		outs[i] = s
	}
	if outs[0] != outs[1] || outs[0] == "" {
		t.Errorf("output differs: before %q, after %q", outs[0], outs[1])
	}
}

// checkSegments asserts that readelf lists GNU_SFRAME and that the
// segment lies inside a PT_LOAD.
func checkSegments(t *testing.T, readelf, file string) {
	t.Helper()
	b, err := exec.Command(readelf, "-lW", file).CombinedOutput()
	if err != nil || !bytes.Contains(b, []byte("GNU_SFRAME")) {
		t.Errorf("readelf -lW: %v, no GNU_SFRAME\n%s", err, b)
	}
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.ProgType(elfread.PTGNUSFrame) {
			continue
		}
		for _, l := range f.Progs {
			if l.Type == elf.PT_LOAD && p.Vaddr >= l.Vaddr && p.Vaddr+p.Memsz <= l.Vaddr+l.Memsz && p.Off >= l.Off && p.Off+p.Filesz <= l.Off+l.Filesz {
				return
			}
		}
		t.Errorf("PT_GNU_SFRAME [%#x,+%#x) is not inside a PT_LOAD", p.Vaddr, p.Memsz)
		return
	}
	t.Errorf("no PT_GNU_SFRAME")
}

type counts = sfcompare.Counts

func load(t *testing.T, file string) (*sfsection.Section, *sframe.Table, *elf.File) {
	t.Helper()
	s, tb, f, err := sfcompare.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return s, tb, f
}

func compare(t *testing.T, gnuFile, oursFile string) *counts {
	t.Helper()
	c, err := sfcompare.Files(gnuFile, oursFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func same(a, b sframe.Rule) bool { return sfcompare.Same(a, b) }

// sframeBytes returns the .sframe a loader finds in an ELF file's bytes.
func sframeBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	f, err := elfread.NewFileBytes(b, "ours")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

// TestRefusals runs the command on inputs it must refuse: a one-line
// error naming the file, a non-zero exit, no output file, no panic.
func TestRefusals(t *testing.T) {
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	exe, err := os.ReadFile("../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		t.Fatal(err)
	}
	// A machine cfi2sframe does not convert: RISC-V in the ELF header.
	riscv := append([]byte(nil), exe...)
	binary.LittleEndian.PutUint16(riscv[18:], uint16(elf.EM_RISCV))
	write := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, file string
		args       []string
		want       string
	}{
		{"existing sframe", write("has-sframe", exe), nil, "already has SFrame data"},
		{"truncated", write("truncated", exe[:200]), []string{"--force"}, "truncated"},
		{"not ELF", write("script.sh", []byte("#!/bin/sh\necho hi\n")), nil, "not an ELF file"},
		{"unsupported machine", write("riscv", riscv), []string{"--force"}, "unsupported machine"},
		{"garbage CFI", write("garbage", corruptEHFrame(t, exe)), []string{"--force"}, ""},
		{"missing file", filepath.Join(tmp, "nope"), nil, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(tmp, tc.name+".out")
			args := append([]string{tc.file, "-o", out}, tc.args...)
			b, err := exec.Command(c2s, args...).CombinedOutput()
			msg := strings.TrimSpace(string(b))
			if strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine") {
				t.Fatalf("panic:\n%s", msg)
			}
			if tc.want == "" {
				// Garbage CFI: bad records are skipped and reported; the
				// rest converts.
				if err != nil {
					t.Fatalf("exit %v: %s", err, msg)
				}
				return
			}
			if err == nil {
				t.Fatalf("exit 0, want an error containing %q; output %q", tc.want, msg)
			}
			if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, filepath.Base(tc.file)) {
				t.Errorf("message %q: want one line naming the file and saying %q", msg, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("an output file was left behind")
			}
			left, _ := filepath.Glob(filepath.Join(tmp, ".*"))
			if len(left) > 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

// corruptEHFrame overwrites the middle of .eh_frame with garbage.
func corruptEHFrame(t *testing.T, b []byte) []byte {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Section(".eh_frame")
	if s == nil {
		t.Fatal("no .eh_frame")
	}
	out := append([]byte(nil), b...)
	for i := s.Offset + s.Size/3; i < s.Offset+s.Size/2; i++ {
		out[i] = byte(i*7 + 3)
	}
	return out
}

// TestStrippedAndInPlace converts a program whose section headers were
// stripped (found through PT_GNU_EH_FRAME; the PLT known from its CFI)
// and converts a copy in place, keeping its mode.
func TestStrippedAndInPlace(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("runs an x86-64 program")
	}
	objcopy := toolchain.Tool(t, "sid", "x86_64-objcopy")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	stripped := filepath.Join(tmp, "hello-stripped")
	if b, err := exec.Command(objcopy, "--strip-section-headers", "../testdata/example/hello", stripped).CombinedOutput(); err != nil {
		t.Fatalf("objcopy: %v\n%s", err, b)
	}
	out := filepath.Join(tmp, "hello-stripped.sframe")
	// Without section headers the dynamic tables after the program header
	// table cannot be sized, so cannot move: refused, unless the fragile
	// layout is asked for.
	b, err := exec.Command(c2s, stripped, "-o", out).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "no layout that strip, objcopy, eu-strip and patchelf keep") || strings.Count(string(b), "\n") != 1 {
		t.Errorf("convert stripped without --fragile-layout: %v\n%s", err, b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("refused conversion wrote %s", out)
	}
	b, err = exec.Command(c2s, "--fragile-layout", stripped, "-o", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "0 skipped") || !strings.Contains(string(b), "warning: fragile layout") {
		t.Fatalf("convert stripped: %v\n%s", err, b)
	}
	// verify agrees with the CFI but reports the fragile layout: PT_PHDR
	// moved out of the first PT_LOAD.
	if b, err := exec.Command(c2s, "verify", out).CombinedOutput(); err == nil || strings.Contains(string(b), "described by CFI, not by .sframe") ||
		!strings.Contains(string(b), "0 disagreements") || !strings.Contains(string(b), "layout: PT_PHDR") || !strings.Contains(string(b), "1 layout problems") {
		t.Errorf("verify stripped: %v\n%s", err, b)
	}
	if b, err := exec.Command(out, "7").CombinedOutput(); err != nil || string(b) != "fib(7) = 13\n" {
		t.Errorf("run: %v %q", err, b)
	}

	inplace := filepath.Join(tmp, "hello")
	orig, _ := os.ReadFile("../testdata/example/hello")
	if err := os.WriteFile(inplace, orig, 0o751); err != nil {
		t.Fatal(err)
	}
	os.Chmod(inplace, 0o751)
	if b, err := exec.Command(c2s, "-q", "--in-place", inplace).CombinedOutput(); err != nil || len(b) != 0 {
		t.Fatalf("--in-place -q: %v %q", err, b)
	}
	if st, err := os.Stat(inplace); err != nil || st.Mode().Perm() != 0o751 {
		t.Errorf("mode after --in-place: %v %v", st.Mode(), err)
	}
	if b, err := exec.Command(inplace).CombinedOutput(); err != nil || string(b) != "fib(20) = 6765\n" {
		t.Errorf("run: %v %q", err, b)
	}
}

// kernelRules requires a converted file to keep the Linux kernel SFrame
// unwinder's acceptance rules (verify --for kernel, package acceptance).
func kernelRules(t *testing.T, c2s, file string) {
	t.Helper()
	b, err := exec.Command(c2s, "verify", "--for", "kernel", file).CombinedOutput()
	if err != nil || !bytes.Contains(b, []byte("kernel: ok (")) {
		t.Errorf("verify --for kernel %s: %v\n%s", file, err, b)
	}
}
