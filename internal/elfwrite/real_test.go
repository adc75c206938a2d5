package elfwrite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// These tests retrofit a minimal SFrame section into real binaries built
// by the system compilers and check that they still run and that GNU
// readelf/objdump and elfutils' elflint accept the result. Each skips when
// a tool it needs is missing.

const helloC = `#include <stdio.h>
extern int lib_answer(void);
int main(int argc, char **argv) {
	printf("hello %d %s\n", lib_answer(), argc > 1 ? argv[1] : "-");
	return 0;
}
`

const libC = `int lib_answer(void) { return 42; }
`

// minimalSFrame returns a valid SFrame V3 section with no FDEs.
func minimalSFrame(bo binary.ByteOrder, abi byte, raOff int8) []byte {
	b := make([]byte, 28)
	bo.PutUint16(b[0:], 0xdee2)
	b[2] = 3   // SFRAME_VERSION_3
	b[3] = 0x5 // SFRAME_F_FDE_SORTED | SFRAME_F_FDE_FUNC_START_PCREL
	b[4] = abi // 1 aarch64 BE, 2 aarch64 LE, 3 amd64 LE
	b[5] = 0   // cfa fixed FP offset
	b[6] = byte(raOff)
	return b // auxhdr_len, counts and offsets are all zero
}

func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

// sidTool returns the reference binutils tool, or "" when not installed.
func sidTool(tool string) string {
	if p, ok := toolchain.Path("sid", tool); ok {
		return p
	}
	p := filepath.Join("/tmp/oracle/sid/bin", tool)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after 2 minutes (hung)\n%s", name, strings.Join(args, " "), out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

type realCase struct {
	name   string
	cflags []string
	shared bool // link against a shared library built alongside
	// refused: the linker-like layout is refused with a LayoutError and
	// the opt-in fragile layout is checked instead. GNU ld's static
	// AArch64 executables: between the program header table and the
	// IRELATIVE relocations (found through __rela_iplt_start, an address
	// in code) lie only the notes, room for one more program header,
	// and the file has no PT_PHDR or second PT_NOTE to give up.
	refused bool
}

func TestRealX86_64(t *testing.T) {
	gcc := lookTool(t, "gcc")
	if out, err := exec.Command(gcc, "-dumpmachine").Output(); err != nil || !strings.HasPrefix(string(out), "x86_64") {
		t.Skip("system gcc does not target x86-64")
	}
	cases := []realCase{
		{name: "pie", cflags: []string{"-pie", "-fPIE"}, shared: true},
		{name: "nopie", cflags: []string{"-no-pie"}, shared: true},
		{name: "static", cflags: []string{"-static"}},
		{name: "static-pie", cflags: []string{"-static-pie", "-fPIE"}},
		{name: "separate-code", cflags: []string{"-Wl,-z,separate-code"}, shared: true},
		{name: "noseparate-code", cflags: []string{"-Wl,-z,noseparate-code"}, shared: true},
	}
	sf := minimalSFrame(binary.LittleEndian, 3, -8)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, lib := buildHello(t, dir, gcc, tc)
			checkReal(t, bin, lib, sf, nil, "x86_64", false)
		})
	}
	t.Run("system-ls", func(t *testing.T) {
		ls, err := exec.LookPath("ls")
		if err != nil {
			t.Skip("no ls")
		}
		dir := t.TempDir()
		bin := filepath.Join(dir, "ls")
		b, err := os.ReadFile(ls)
		if err != nil {
			t.Skip(err)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		checkReal(t, bin, "", sf, []string{"-d", "/"}, "x86_64", false)
	})
	t.Run("system-libc", func(t *testing.T) {
		out, err := exec.Command(gcc, "-print-file-name=libc.so.6").Output()
		libc, err2 := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
		ls, err3 := exec.LookPath("ls")
		if err != nil || err2 != nil || err3 != nil || !filepath.IsAbs(libc) {
			t.Skip("system libc.so.6 or ls not found")
		}
		dir := t.TempDir()
		for _, c := range [][2]string{{libc, "libc.so.6"}, {ls, "ls"}} {
			b, err := os.ReadFile(c[0])
			if err != nil {
				t.Skip(err)
			}
			if err := os.WriteFile(filepath.Join(dir, c[1]), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		checkRealFiles(t, filepath.Join(dir, "ls"), []string{filepath.Join(dir, "libc.so.6")}, sf, []string{"-d", "/", "/tmp"}, "x86_64")
	})
	t.Run("no-section-headers", func(t *testing.T) {
		objcopy := sidTool("x86_64-objcopy")
		if objcopy == "" {
			t.Skip("reference objcopy (--strip-section-headers) not installed")
		}
		dir := t.TempDir()
		bin, lib := buildHello(t, dir, gcc, realCase{name: "stripped", cflags: []string{"-pie", "-fPIE"}, shared: true})
		run(t, nil, objcopy, "--strip-section-headers", bin)
		checkReal(t, bin, lib, sf, nil, "x86_64", false)
	})
}

func TestRealAArch64(t *testing.T) {
	gcc := lookTool(t, "aarch64-linux-gnu-gcc")
	lookTool(t, "qemu-aarch64-static")
	if _, err := os.Stat("/usr/aarch64-linux-gnu"); err != nil {
		t.Skip("no aarch64 sysroot for qemu -L")
	}
	cases := []realCase{
		{name: "pie", cflags: []string{"-pie", "-fPIE"}, shared: true},
		{name: "nopie", cflags: []string{"-no-pie"}},
		{name: "static", cflags: []string{"-static"}, refused: true},
	}
	sf := minimalSFrame(binary.LittleEndian, 2, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin, lib := buildHello(t, dir, gcc, tc)
			checkReal(t, bin, lib, sf, nil, "aarch64", tc.refused)
		})
	}
}

// buildHello compiles the test program (and its library) into dir and
// returns the program's path and the library directory ("" if none).
func buildHello(t *testing.T, dir, gcc string, tc realCase) (bin, libDir string) {
	t.Helper()
	src := filepath.Join(dir, "hello.c")
	if err := os.WriteFile(src, []byte(helloC), 0o644); err != nil {
		t.Fatal(err)
	}
	lsrc := filepath.Join(dir, "lib.c")
	if err := os.WriteFile(lsrc, []byte(libC), 0o644); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "hello-"+tc.name)
	args := append([]string{"-O2", "-o", bin, src}, tc.cflags...)
	if tc.shared {
		so := filepath.Join(dir, "libanswer.so")
		run(t, nil, gcc, "-O2", "-shared", "-fPIC", "-Wl,-soname,libanswer.so", "-o", so, lsrc)
		args = append(args, "-L"+dir, "-lanswer")
		libDir = dir
	} else {
		args = append(args, lsrc)
	}
	run(t, nil, gcc, args...)
	return bin, libDir
}

// checkReal inserts sf into bin (and into the shared library in libDir,
// if any), then runs and inspects the result.
func checkReal(t *testing.T, bin, libDir string, sf []byte, runArgs []string, arch string, refused bool) {
	t.Helper()
	var libs []string
	if libDir != "" {
		libs = []string{filepath.Join(libDir, "libanswer.so")}
	}
	if got := checkRealFiles(t, bin, libs, sf, runArgs, arch); got != refused {
		t.Errorf("%s: linker-like layout refused: %v, want %v", bin, got, refused)
	}
}

// checkRealFiles inserts sf into bin and into the shared libraries libs
// (all in one directory, put on LD_LIBRARY_PATH), then runs and inspects
// the results. A file for which the linker-like layout is refused (a
// LayoutError) gets the opt-in fragile layout; refused reports that.
func checkRealFiles(t *testing.T, bin string, libs []string, sf []byte, runArgs []string, arch string) (refused bool) {
	t.Helper()
	targets := append([]string{bin}, libs...)
	libDir := ""
	if len(libs) > 0 {
		libDir = filepath.Dir(libs[0])
	}
	var env []string
	runner := []string{bin}
	if arch == "aarch64" {
		runner = []string{"qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu", bin}
	}
	if libDir != "" {
		env = append(env, "LD_LIBRARY_PATH="+libDir)
		if arch == "aarch64" {
			runner = []string{"qemu-aarch64-static", "-L", "/usr/aarch64-linux-gnu", "-E", "LD_LIBRARY_PATH=" + libDir, bin}
		}
	}
	want := run(t, env, runner[0], append(runner[1:], runArgs...)...)

	lint, _ := exec.LookPath("eu-elflint")
	lintBefore := map[string]string{}
	for _, f := range targets {
		if lint != "" {
			lintBefore[f] = elflint(lint, f)
		}
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPlan(in, uint64(len(sf)), Options{})
		var le *LayoutError
		if errors.As(err, &le) {
			t.Logf("%s: %v; checking the fragile layout", f, err)
			refused = true
			p, err = NewPlan(in, uint64(len(sf)), Options{AppendSegment: true})
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out, err := p.Bytes(sf)
		if err != nil {
			t.Fatal(err)
		}
		checkOutput(t, in, out, p, sf)
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteFileAtomic(context.Background(), f, st.Mode(), func(w *os.File) error { _, err := w.Write(out); return err }); err != nil {
			t.Fatal(err)
		}
	}

	if got := run(t, env, runner[0], append(runner[1:], runArgs...)...); got != want {
		t.Errorf("output changed after inserting .sframe:\nbefore: %q\nafter:  %q", want, got)
	}

	readelf := sidTool(arch + "-readelf")
	objdump := sidTool(arch + "-objdump")
	for _, f := range targets {
		hasSections := true
		if readelf != "" {
			secs := run(t, nil, readelf, "-SW", f)
			hasSections = !strings.Contains(secs, "There are no sections")
			if hasSections && !regexp.MustCompile(`\.sframe\s+GNU_SFRAME\s`).MatchString(secs) {
				t.Errorf("%s: readelf -S shows no .sframe of type GNU_SFRAME:\n%s", f, secs)
			}
			segs := run(t, nil, readelf, "-lW", f)
			if !strings.Contains(segs, "GNU_SFRAME") {
				t.Errorf("%s: readelf -l shows no GNU_SFRAME:\n%s", f, segs)
			}
			if m := regexp.MustCompile(`(?m)^\s+\d+\s+\.sframe\s*$`).FindString(segs); hasSections && m == "" {
				t.Errorf("%s: .sframe is not alone in a segment (GNU_SFRAME) in readelf's section-to-segment map:\n%s", f, segs)
			}
		}
		if objdump != "" && hasSections {
			dump := run(t, nil, objdump, "--sframe", f)
			if !strings.Contains(dump, "SFRAME_VERSION_3") || !strings.Contains(dump, "Num FDEs: 0") {
				t.Errorf("%s: objdump --sframe does not decode the section:\n%s", f, dump)
			}
		}
		if lint != "" {
			for _, line := range strings.Split(elflint(lint, f), "\n") {
				if line == "" || line == "No errors" || strings.Contains(line, "0x6474e554") || strings.Contains(line, "unsupported type 1879048180") {
					continue // elfutils does not know the SFrame types
				}
				if !strings.Contains(lintBefore[f], line) {
					t.Errorf("%s: new eu-elflint complaint: %s", f, line)
				}
			}
		}
	}
	return refused
}

func elflint(lint, f string) string {
	out, _ := exec.Command(lint, "--gnu-ld", f).CombinedOutput()
	// Section and program header numbers shift; compare the messages
	// without them.
	s := regexp.MustCompile(`(section|entry) (\[\s*\d+\]|\d+)`).ReplaceAllString(string(out), "$1 N")
	s = regexp.MustCompile(`phdr\[\d+\]`).ReplaceAllString(s, "phdr[N]")
	return string(bytes.ReplaceAll([]byte(s), []byte(f), []byte("FILE")))
}

// TestRealReplace takes a program GNU ld linked with .sframe, checks that
// it is refused without Replace, and replaces its SFrame data: first with
// GNU's own section bytes (objdump must see the same FDE count), then with
// an empty section.
func TestRealReplace(t *testing.T) {
	gcc := lookTool(t, "gcc")
	objcopy := sidTool("x86_64-objcopy")
	objdump := sidTool("x86_64-objdump")
	gccDir := "/tmp/oracle/sid/gcc-x86_64/"
	if r := toolchain.Root(); r != "" {
		if _, err := os.Stat(filepath.Join(r, "sid", "gcc-x86_64")); err == nil {
			gccDir = filepath.Join(r, "sid", "gcc-x86_64") + "/"
		}
	}
	if _, err := os.Stat(gccDir); err != nil || objcopy == "" || objdump == "" {
		t.Skip("reference binutils (sid) not installed")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.c")
	if err := os.WriteFile(src, []byte(helloC+libC), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	run(t, nil, gcc, "-B"+gccDir, "-Wa,--gsframe", "-O2", "-o", bin, src)
	gnuSF := filepath.Join(dir, "gnu.sframe")
	run(t, nil, objcopy, "-O", "binary", "--only-section=.sframe", bin, gnuSF)
	sf, err := os.ReadFile(gnuSF)
	if err != nil || len(sf) < 28 {
		t.Fatalf("GNU .sframe not extracted (%d bytes): %v", len(sf), err)
	}
	fdes := regexp.MustCompile(`Num FDEs: \d+`).FindString(run(t, nil, objdump, "--sframe", bin))
	if fdes == "" || fdes == "Num FDEs: 0" {
		t.Fatalf("GNU-built program has no SFrame FDEs (%q)", fdes)
	}
	want := run(t, nil, bin)
	in, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(in, uint64(len(sf)), Options{}); !errors.Is(err, ErrHasSFrame) {
		t.Fatalf("input with .sframe: error %v, want ErrHasSFrame", err)
	}
	for _, tc := range []struct {
		name     string
		data     []byte
		wantFDEs string
	}{
		{"gnu-bytes", sf, fdes},
		{"empty", minimalSFrame(binary.LittleEndian, 3, -8), "Num FDEs: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPlan(in, uint64(len(tc.data)), Options{Replace: true})
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Bytes(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			checkOutput(t, in, out, p, tc.data)
			dst := filepath.Join(dir, "out-"+tc.name)
			if err := WriteFileAtomic(context.Background(), dst, 0o755, func(w *os.File) error { _, err := w.Write(out); return err }); err != nil {
				t.Fatal(err)
			}
			if got := run(t, nil, dst); got != want {
				t.Errorf("output %q, want %q", got, want)
			}
			dump := run(t, nil, objdump, "--sframe", dst)
			if !strings.Contains(dump, tc.wantFDEs) {
				t.Errorf("objdump --sframe does not show %q:\n%s", tc.wantFDEs, dump)
			}
			if strings.Count(run(t, nil, sidTool("x86_64-readelf"), "-lW", dst), "GNU_SFRAME ") != 1 {
				t.Errorf("not exactly one GNU_SFRAME program header")
			}
		})
	}
}
