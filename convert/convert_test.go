package convert

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/sfcompare"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "sframe", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// otherMachine is a fixture whose ELF header names a machine cfi2sframe
// does not convert (RISC-V).
func otherMachine(t *testing.T) []byte {
	b := fixture(t, "v3-x86_64-exe")
	binary.LittleEndian.PutUint16(b[18:], uint16(elf.EM_RISCV))
	return b
}

// noSectionHeaders is the example program with its section header table
// cut off (e_shoff, e_shnum, e_shstrndx zero), as objcopy
// --strip-section-headers leaves it: the dynamic tables after the
// program header table cannot be sized, so no layout can move them.
func noSectionHeaders(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	clear(b[40:48]) // e_shoff
	clear(b[60:64]) // e_shnum, e_shstrndx
	return b
}

// TestErrors: every way a conversion fails gives a typed error (errors.As,
// errors.Is), named by the file once, in one line without a word of the
// command line; options that cannot be used give an *OptionError, about
// no file.
func TestErrors(t *testing.T) {
	exe := fixture(t, "v3-x86_64-exe")
	obj := fixture(t, "v3-x86_64-O2.o")
	hello, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		layout  *layoutError
		unsupp  *unsupportedError
		option  *OptionError
		anyElse error
	)
	tests := []struct {
		name string
		in   []byte
		opts Options
		as   any   // a pointer to the type errors.As must find
		is   error // errors.Is, when set
		want string
	}{
		{"not ELF", []byte("#!/bin/sh\necho hi\n"), Options{}, &anyElse, nil, "not an ELF file"},
		{"empty", nil, Options{}, &anyElse, nil, "not an ELF file"},
		{"truncated", exe[:100], Options{}, &anyElse, nil, "run past the end of the file"},
		{"has sframe", exe, Options{}, &anyElse, ErrHasSFrame, "already has SFrame data"},
		{"object with sframe", obj, Options{}, &anyElse, ErrHasSFrame, "already has SFrame data"},
		{"RISC-V", otherMachine(t), Options{Force: true}, &unsupp, ErrUnsupported, "unsupported machine EM_RISCV"},
		{"no layout", noSectionHeaders(t), Options{}, &layout, ErrLayout, "no layout that strip, objcopy, eu-strip and patchelf keep"},
		{"no CFI", hostile.EHFrameOnly(nil), Options{}, &anyElse, ErrNoCFI, "hold no FDE"},
		{"bad version", hello, Options{Version: 4}, &option, nil, "SFrame version 4 cannot be written"},
		{"pcrel v3", hello, Options{Version: 3, PCRel: true}, &option, nil, "PCRel: applies to SFrame version 2 only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := convertMem("in.elf", tc.in, tc.opts)
			if err == nil {
				t.Fatalf("no error; result %+v", res)
			}
			if !errors.As(err, tc.as) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("error %v (%T): not a %T (wrapping %v)", err, err, tc.as, tc.is)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "--") {
				t.Errorf("error %q: want one line containing %q and no command-line flag", msg, tc.want)
			}
			var e *Error
			if _, opt := tc.as.(**OptionError); opt {
				if errors.As(err, &e) || strings.Contains(msg, "in.elf") {
					t.Errorf("error %q: an option error names a file", msg)
				}
				if err := tc.opts.Validate(); err == nil || err.Error() != msg {
					t.Errorf("Validate: %v, want Convert's error %q", err, msg)
				}
				return
			}
			if !errors.As(err, &e) || e.File != "in.elf" || !strings.HasPrefix(msg, "in.elf: ") || strings.Count(msg, "in.elf") != 1 {
				t.Errorf("error %q (%T): want an *Error naming the file once, first", msg, err)
			}
		})
	}
	if err := (Options{Version: 2, PCRel: true}).Validate(); err != nil {
		t.Errorf("V2 with PCRel: %v", err)
	}
	// The fragile layout is taken when asked for.
	res, err := convertMem("in.elf", noSectionHeaders(t), Options{FragileLayout: true})
	if err != nil || !strings.Contains(res.Warning, "fragile layout") {
		t.Errorf("FragileLayout: %v, warning %q", err, res.Warning)
	}
}

// TestReplaceAgreesWithGNU converts GNU-linked fixtures that carry GNU's
// .sframe (with Force, so ours replaces it) and compares the two sections at
// every PC of every function GNU describes.
func TestReplaceAgreesWithGNU(t *testing.T) {
	for _, name := range []string{
		"v3-x86_64-exe", "v3-x86_64-lib-lazy.so", "v3-x86_64-lib-now.so", "v3-x86_64-lib-ibt.so",
		"v3-aarch64-exe", "v3-aarch64-lib.so", "v3-aarch64be-exe", "v3-aarch64be-lib.so",
		"v3-s390x-lib.so",
	} {
		t.Run(name, func(t *testing.T) {
			in := fixture(t, name)
			gnu := decodeSFrame(t, in)
			gnuT := openSFrame(t, in)
			res, err := convertMem(name, in, Options{Force: true})
			if err != nil {
				t.Fatal(err)
			}
			ours := decodeSFrame(t, res.output)
			oursT := openSFrame(t, res.output)
			if ours.Header.Version != sframe.Version3 || ours.Header.Flags&sframe.FlagFDESorted == 0 {
				t.Errorf("header %+v: want V3, sorted", ours.Header)
			}
			// GNU ld (2.44 to 2.47.50) describes .plt.got entries with
			// CFA=sp+16, but they are reached by a call and push nothing:
			// ld's own .eh_frame for them says rsp+8, and so do we.
			ef, err := elf.NewFile(bytes.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			var gotLo, gotHi uint64
			if s := ef.Section(".plt.got"); s != nil {
				gotLo, gotHi = s.Addr, s.Addr+s.Size
			}
			pcs, diffs, gnuBug := 0, 0, 0
			for i := range gnu.FDEs {
				d := &gnu.FDEs[i]
				if len(d.FREs) == 0 {
					continue
				}
				for pc := d.Start; pc < d.Start+uint64(d.Size); pc++ {
					g, _ := sfcompare.Row(gnuT, pc)
					o, ok := sfcompare.Row(oursT, pc)
					pcs++
					if pc >= gotLo && pc < gotHi && ok && g.CFA.Offset == 16 && o.CFA.Offset == 8 {
						gnuBug++
						continue
					}
					if !ok || !sameRule(g, o) {
						diffs++
						if diffs <= 5 {
							t.Errorf("pc %#x: GNU %+v, ours %+v (found %v)", pc, g, o, ok)
						}
					}
				}
			}
			t.Logf("%s: %d GNU functions, %d PCs compared, %d differ, %d in .plt.got where GNU ld is wrong; %s", name, len(gnu.FDEs), pcs, diffs, gnuBug, res.Translate.Summary())
		})
	}
}

func sameRule(a, b sframe.Rule) bool {
	return a.CFA == b.CFA && a.RA == b.RA && a.FP == b.FP && a.MangledRA == b.MangledRA &&
		a.RAUndefined == b.RAUndefined && a.Flex == b.Flex && a.Signal == b.Signal
}

func decodeSFrame(t *testing.T, b []byte) *sfsection.Section {
	t.Helper()
	s := sframeSectionOf(t, b)
	sec, err := sfsection.Decode(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func openSFrame(t *testing.T, b []byte) *sframe.Table {
	t.Helper()
	s := sframeSectionOf(t, b)
	tb, err := sframe.Open(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func sframeSectionOf(t *testing.T, b []byte) *elfread.Section {
	t.Helper()
	f, err := elfread.NewFile(bytes.NewReader(b), "x")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDataOnlyObject: a relocatable object without .eh_frame (only data)
// comes back unchanged with a note, as as --gsframe adds no .sframe to it;
// so does an archive of such objects.
func TestDataOnlyObject(t *testing.T) {
	as := toolchain.Tool(t, "sid", "x86_64-as")
	ar, err := exec.LookPath("ar")
	if err != nil {
		t.Skip("ar not installed")
	}
	dir := t.TempDir()
	src, obj := filepath.Join(dir, "d.s"), filepath.Join(dir, "d.o")
	if err := os.WriteFile(src, []byte(".section .rodata\n.globl tbl\ntbl: .quad 1, 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "--gsframe", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	lib := filepath.Join(dir, "libd.a")
	if out, err := exec.Command(ar, "rcs", lib, obj).CombinedOutput(); err != nil {
		t.Fatalf("ar: %v\n%s", err, out)
	}
	for _, f := range []string{obj, lib} {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if ef, err := elfread.NewFile(bytes.NewReader(in), f); err == nil {
			if _, err := ef.SFrame(); err == nil {
				t.Fatalf("%s: as --gsframe wrote .sframe for data only; the premise is wrong", f)
			}
		}
		res, err := convertMem(f, in, Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if res.Unchanged == "" || !bytes.Equal(res.output, in) {
			t.Errorf("%s: unchanged %q, output equal %v", f, res.Unchanged, bytes.Equal(res.output, in))
		}
	}
}
