package cfi

import (
	"debug/elf"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/goprologue"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
)

// TestOutermostNote: which Go functions are marked outermost, with which
// code: by name where a stack begins, by the TopFrame flag, by the
// SPWrite flag (a stack switch); a function both named and flagged
// SPWrite is where a stack begins.
func TestOutermostNote(t *testing.T) {
	for _, c := range []struct {
		name string
		flag gopclntab.Flag
		want string
	}{
		{"runtime.goexit", 0, goOutermost},
		{"runtime.mstart", 0, goOutermost},
		{"runtime.rt0_go", gopclntab.SPWrite, goOutermost},
		{"_rt0_amd64_linux", 0, goOutermost},
		{"_rt0_arm64_linux_lib", 0, goOutermost},
		{"runtime.sigtramp", gopclntab.TopFrame, goOutermost},
		{"runtime.goexit", gopclntab.TopFrame | gopclntab.Asm, goOutermost},
		{"runtime.morestack", gopclntab.SPWrite | gopclntab.Asm, goStackSwitch},
		{"runtime.systemstack", gopclntab.SPWrite, goStackSwitch},
		{"main.main", 0, ""},
		{"runtime.memmove", gopclntab.Asm, ""},
		{"runtime.goexit1", 0, ""},
	} {
		n := outermostNote(&gopclntab.Func{Name: c.name, Flag: c.flag})
		if n.code != c.want || (n.code == "") != (n.detail == "") {
			t.Errorf("%s (flags %#x): %q, %q; want code %q (with a detail when set)", c.name, c.flag, n.code, n.detail, c.want)
		}
	}
}

// TestFPUnknown: what goprologue's result says of a function whose
// frame-pointer rules are not known, and nothing for one whose rules are
// (described, or frameless: the frame pointer stays in its register).
func TestFPUnknown(t *testing.T) {
	for _, c := range []struct {
		what string
		res  goprologue.Result
		err  error
		want string // "" for no note, else a part of it
	}{
		{"described", goprologue.Result{Kind: goprologue.Described, Rules: []goprologue.Rule{{PC: 0x1000, Saved: true, Offset: -16}}}, nil, ""},
		{"frameless", goprologue.Result{Kind: goprologue.Frameless}, nil, ""},
		{"unrecognized", goprologue.Result{Kind: goprologue.Unrecognized, Reason: goprologue.ReasonSPWrite, PC: 0x1010, Inst: "MOVQ AX, SP"}, nil, "fp-sp-write at 0x1010 (MOVQ AX, SP)"},
		{"clobbered", goprologue.Result{Kind: goprologue.Unrecognized, Reason: goprologue.ReasonClobbered, PC: 0x1004, Inst: "XORL BP, BP"}, nil, "fp-clobbered"},
		{"decode error", goprologue.Result{}, &goprologue.DecodeError{PC: 0x2000, Err: errors.New("unknown AVX Opcode")}, "cannot decode the instruction at 0x2000: unknown AVX Opcode"},
	} {
		got := fpUnknown(c.res, c.err)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q; want %q", c.what, got, c.want)
		}
	}
}

// TestGoNotes: in real Go programs (x86-64 with and without cgo, AArch64)
// the FDEs made from the function table carry the notes of the functions
// marked outermost (runtime.morestack switches stacks, runtime.goexit is
// where a goroutine's stack begins), each note agrees with the FDE's
// rules (RA undefined from the entry for the outermost ones, no
// frame-pointer rule for go-fp-unknown), and no FDE of .eh_frame (a cgo
// program's C code) has one.
func TestGoNotes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	if runtime.GOOS != "linux" {
		t.Skip("builds Linux programs")
	}
	dir := t.TempDir()
	for _, c := range []gobuild.Config{
		{GOARCH: "amd64", Strip: true},
		{GOARCH: "amd64", Strip: true, Cgo: true},
		{GOARCH: "arm64", Strip: true},
	} {
		t.Run(c.String(), func(t *testing.T) {
			img, err := os.ReadFile(gobuild.Build(t, dir, c))
			if err != nil {
				t.Fatal(err)
			}
			codes := goNoteCodes(t, img)
			for name, want := range map[string]string{
				"runtime.morestack":   goStackSwitch,
				"runtime.systemstack": goStackSwitch,
				"runtime.mcall":       goStackSwitch,
				"runtime.goexit":      goOutermost,
				"runtime.mstart":      goOutermost,
				"main.main":           "",
				"main.deep":           "",
			} {
				if got, ok := codes[name]; !ok || got != want {
					t.Errorf("%s: note %q (FDE found: %v), want %q", name, got, ok, want)
				}
			}
		})
	}
}

// goNoteCodes returns the note code of every FDE of img by its function's
// name, checking each note against the FDE's rules and that only FDEs of
// the function table have notes.
func goNoteCodes(t *testing.T, img []byte) map[string]string {
	t.Helper()
	f, err := OpenBytes(img)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(strings.NewReader(string(img)))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gopclntab.OpenBytes(img)
	if err != nil {
		t.Fatal(err)
	}
	ra, fp := raColumn[ef.Machine], map[elf.Machine]uint64{elf.EM_X86_64: 6, elf.EM_AARCH64: 29}[ef.Machine]
	codes := map[string]string{}
	ctx := f.Context(f.Entries())
	for {
		fde, err := ctx.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		code, detail := fde.Note()
		if fde.sec.kind != kindGo {
			if code != "" {
				t.Errorf("%s FDE [%#x,%#x): note %q", fde.sec.Name(), fde.Start, fde.End(), code)
			}
			continue
		}
		fn, ok := tab.FuncAt(fde.Start)
		if !ok {
			t.Fatalf("no function at %#x", fde.Start)
		}
		codes[fn.Name] = code
		if (code == "") != (detail == "") {
			t.Errorf("%s: code %q, detail %q", fn.Name, code, detail)
		}
		tb := ctx.Table()
		if tb == nil || len(tb.Rows) == 0 {
			t.Fatalf("%s: its FDE does not execute", fn.Name)
		}
		raRule, fpRule := ruleOf(&tb.Rows[0], ra), Rule{}
		for i := range tb.Rows {
			if r := ruleOf(&tb.Rows[i], fp); r.Kind != SameValue {
				fpRule = r
			}
		}
		switch code {
		case goOutermost, goStackSwitch:
			if raRule.Kind != Undefined {
				t.Errorf("%s: %s, but its return address at the entry is %+v", fn.Name, code, raRule)
			}
		case goFPUnknown:
			if fpRule.Kind != SameValue {
				t.Errorf("%s: %s, but its frame pointer has the rule %+v", fn.Name, code, fpRule)
			}
		}
	}
	return codes
}

// ruleOf is register reg's rule in row r.
func ruleOf(r *Row, reg uint64) Rule {
	for _, rr := range r.Regs {
		if rr.Reg == reg {
			return rr.Rule
		}
	}
	return Rule{}
}

// TestShared: where .eh_frame and the function table both describe a Go
// function (a cgo build with two of its C FDEs moved onto main.main and
// runtime.morestack), .eh_frame's FDE is kept and Shared says so, the
// table's is left out with its note; every Go function's .debug_frame FDE
// gives way to the table's, and Shared says that too. Without either
// (a stripped cgo build, as real ones are) nothing is shared.
func TestShared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("builds x86-64 Linux cgo programs")
	}
	dir := t.TempDir()
	moved := []string{"runtime.morestack", "main.main"} // in address order, as Shared meets them
	for _, c := range []struct {
		cfg            gobuild.Config
		ehOverGo       []string // the functions .eh_frame describes for the table
		goOverDebugMin int      // at least this many
	}{
		{gobuild.Config{GOARCH: "amd64", Cgo: true, EHFrameOver: moved}, moved, 1000},
		{gobuild.Config{GOARCH: "amd64", Cgo: true, Strip: true}, nil, 0},
	} {
		t.Run(c.cfg.String(), func(t *testing.T) {
			img, err := os.ReadFile(gobuild.Build(t, dir, c.cfg))
			if err != nil {
				t.Fatal(err)
			}
			f, err := OpenBytes(img)
			if err != nil {
				t.Fatal(err)
			}
			tab, err := gopclntab.OpenBytes(img)
			if err != nil {
				t.Fatal(err)
			}
			goEntries := map[uint64]bool{}
			for _, e := range f.Entries() {
				if f.sections[e.ref&(1<<refSecBits-1)].kind == kindGo {
					goEntries[e.Start] = true
				}
			}
			var ehOverGo []string
			goOverDebug := 0
			f.Shared(func(left Entry, used, unused string) {
				fn, _ := tab.FuncAt(left.Start)
				switch {
				case used == ".eh_frame" && unused == ".gopclntab":
					ehOverGo = append(ehOverGo, fn.Name)
					if goEntries[left.Start] {
						t.Errorf("%s: its table FDE is both kept and left out", fn.Name)
					}
				case used == ".gopclntab" && unused == ".debug_frame":
					goOverDebug++
					if !goEntries[left.Start] {
						t.Errorf("%s [%#x,%#x): its .debug_frame FDE gave way to no table FDE", fn.Name, left.Start, left.Start+left.Size)
					}
				default:
					t.Errorf("%s [%#x,%#x): %s used over %s", fn.Name, left.Start, left.Start+left.Size, used, unused)
				}
			})
			if !slices.Equal(ehOverGo, c.ehOverGo) || goOverDebug < c.goOverDebugMin || (c.goOverDebugMin == 0 && goOverDebug > 0) {
				t.Errorf(".eh_frame over .gopclntab: %v, want %v; .gopclntab over .debug_frame: %d, want at least %d", ehOverGo, c.ehOverGo, goOverDebug, c.goOverDebugMin)
			}
			codes := goNoteCodes(t, img)
			for _, name := range c.ehOverGo {
				if code, ok := codes[name]; ok {
					t.Errorf("%s: its table FDE is kept (note %q)", name, code)
				}
			}
		})
	}
}
