package gocfi_test

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"github.com/cfi2sframe/cfi2sframe/internal/gocfi"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/pclntest"
)

const text = 0x401000

// table is a Go 1.20 table of three functions: f with a 32-byte frame
// (rows of 4, 20 and 2 quanta), goexit (TopFrame) and a function whose SP
// goes 16 below entry at its end, as Go 1.19's AArch64 asyncPreempt does.
func table(t *testing.T, order binary.ByteOrder, ptr int, q uint8) *gopclntab.Table {
	t.Helper()
	Q := uint64(q)
	data := pclntest.Write(pclntest.Table{
		Magic: pclntest.Magic120, Order: order, PtrSize: ptr, Quantum: q, TextStart: text,
		Funcs: []pclntest.Func{
			{Name: "main.f", Off: 0, PCSP: pclntest.PCValue(q, pclntest.R(0, 4*Q), pclntest.R(32, 20*Q), pclntest.R(0, 2*Q))},
			{Name: "runtime.goexit", Off: 32 * Q, Flag: uint8(gopclntab.TopFrame), PCSP: pclntest.PCValue(q, pclntest.R(0, Q), pclntest.R(8, Q))},
			{Name: "runtime.asyncPreempt", Off: 40 * Q, PCSP: pclntest.PCValue(q, pclntest.R(0, 8*Q), pclntest.R(-16, Q))},
		},
		End: 52 * Q,
	})
	tab, err := gopclntab.Parse(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

type want struct {
	off uint64 // from the function's entry, in quanta
	cfa int64  // CFA = SP + cfa
	ra  cfi.Rule
}

// execute returns the table of the FDE that starts at start.
func execute(t *testing.T, fdes []*cfi.FDE, start uint64) *cfi.Table {
	t.Helper()
	for _, f := range fdes {
		if f.Start == start {
			var ctx cfi.Context
			tab := new(cfi.Table)
			if err := ctx.Execute(f, tab); err != nil {
				t.Fatal(err)
			}
			return tab
		}
	}
	t.Fatalf("no FDE at %#x", start)
	return nil
}

func check(t *testing.T, tab *cfi.Table, sp, ra, q uint64, ws []want) {
	t.Helper()
	for _, w := range ws {
		pc := tab.FDE.Start + w.off*q
		r := &tab.Rows[tab.RowAt(pc)]
		if r.CFA.Kind != cfi.CFARegOffset || r.CFA.Reg != sp || r.CFA.Offset != w.cfa {
			t.Errorf("%#x: CFA %+v, want SP(%d)%+d", pc, r.CFA, sp, w.cfa)
		}
		if got := r.Rule(ra); got.Kind != w.ra.Kind || got.Offset != w.ra.Offset {
			t.Errorf("%#x: RA rule %+v, want %+v", pc, got, w.ra)
		}
	}
}

var (
	same  = cfi.Rule{Kind: cfi.SameValue}
	undef = cfi.Rule{Kind: cfi.Undefined}
)

func at(off int64) cfi.Rule { return cfi.Rule{Kind: cfi.Offset, Offset: off} }

// TestRules executes the image of a small table for a push machine with
// 8- and 4-byte pointers and link-register gocfi.Machines of both byte orders:
// the CFA and return-address rules at chosen PCs, and each FDE's range
// (the function, not the padding after it).
func TestRules(t *testing.T) {
	for _, c := range []struct {
		name  string
		m     elf.Machine
		order binary.ByteOrder
		ptr   int
		q     uint8
	}{
		{"amd64", elf.EM_X86_64, binary.LittleEndian, 8, 1},
		{"386", elf.EM_386, binary.LittleEndian, 4, 1},
		{"arm64", elf.EM_AARCH64, binary.LittleEndian, 8, 4},
		{"s390x", elf.EM_S390, binary.BigEndian, 8, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := table(t, c.order, c.ptr, c.q)
			_, fdes, errs := synthesize(t, tab, c.m, nil)
			if len(errs) > 0 || len(fdes) != 3 {
				t.Fatalf("%d FDEs, errors %v", len(fdes), errs)
			}
			mach := gocfi.Machines[c.m]
			q, p := uint64(c.q), int64(c.ptr)
			for i, r := range [][2]uint64{{0, 26}, {32, 34}, {40, 49}} {
				if fdes[i].Start != text+r[0]*q || fdes[i].End() != text+r[1]*q {
					t.Errorf("FDE %d: [%#x, %#x), want [%#x, %#x)", i, fdes[i].Start, fdes[i].End(), text+r[0]*q, text+r[1]*q)
				}
			}
			f := execute(t, fdes, text)
			goexit := execute(t, fdes, text+32*q)
			preempt := execute(t, fdes, text+40*q)
			if !mach.HasLR {
				ra := at(-p)
				check(t, f, mach.SP, mach.RA, q, []want{{0, p, ra}, {3, p, ra}, {4, 32 + p, ra}, {23, 32 + p, ra}, {24, p, ra}, {25, p, ra}})
				check(t, goexit, mach.SP, mach.RA, q, []want{{0, p, ra}, {1, 8 + p, ra}})
				check(t, preempt, mach.SP, mach.RA, q, []want{{7, p, ra}, {8, p - 16, ra}})
				return
			}
			check(t, f, mach.SP, mach.RA, q, []want{{0, 0, same}, {3, 0, same}, {4, 32, at(-32)}, {23, 32, at(-32)}, {24, 0, same}, {25, 0, same}})
			check(t, goexit, mach.SP, mach.RA, q, []want{{0, 0, undef}, {1, 8, undef}})
			check(t, preempt, mach.SP, mach.RA, q, []want{{7, 0, same}, {8, -16, same}})
		})
	}
}

// TestExtra adds frame-pointer rules inside rows, at a row's start, at
// the entry and at the last byte: each holds from its PC on, the CFA and
// RA rules are those without them.
func TestExtra(t *testing.T) {
	const fp = 6
	tab := table(t, binary.LittleEndian, 8, 1)
	rules := map[string][]gocfi.RegRule{
		"main.f": {
			{PC: text, Reg: 3, Kind: gocfi.Undefined},
			{PC: text + 1, Reg: fp, Kind: gocfi.SavedAt, Offset: -16},
			{PC: text + 4, Reg: fp, Kind: gocfi.SavedAt, Offset: -24}, // where a row starts
			{PC: text + 23, Reg: fp, Kind: gocfi.SameValue},
			{PC: text + 25, Reg: fp, Kind: gocfi.Undefined}, // the last byte
		},
	}
	extra := func(f *gopclntab.Func, _ []gocfi.RegRule) []gocfi.RegRule { return rules[f.Name] }
	_, plain, _ := synthesize(t, tab, elf.EM_X86_64, nil)
	_, with, errs := synthesize(t, tab, elf.EM_X86_64, extra)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	c := compare(t, plain, with, 16)
	if c.onlyGo+c.onlyOurs+c.size+c.cfa+c.ra != 0 || c.regs == 0 {
		t.Errorf("with the extra rules: %v", c)
	}
	wantFP := []cfi.Rule{same, at(-16), at(-16), at(-16)}
	for pc := range uint64(26) {
		w := same
		switch {
		case pc >= 25:
			w = undef
		case pc >= 23:
			w = same
		case pc >= 4:
			w = at(-24)
		default:
			w = wantFP[pc]
		}
		r := execute(t, with, text)
		row := &r.Rows[r.RowAt(text+pc)]
		if got := row.Rule(fp); got.Kind != w.Kind || got.Offset != w.Offset {
			t.Errorf("%#x: FP rule %+v, want %+v", text+pc, got, w)
		}
		if got := row.Rule(3); got.Kind != cfi.Undefined {
			t.Errorf("%#x: register 3 rule %+v, want undefined", text+pc, got)
		}
	}
}

// TestExtraErrors: a function whose rules are out of order, outside it or
// not encodable gets no FDE and is reported; the others are kept.
func TestExtraErrors(t *testing.T) {
	tab := table(t, binary.LittleEndian, 8, 1)
	for _, c := range []struct {
		name  string
		rules []gocfi.RegRule
		want  string
	}{
		{"order", []gocfi.RegRule{{PC: text + 5, Reg: 6}, {PC: text + 2, Reg: 6}}, "rule for register 6 at 0x401002: before 0x401005"},
		{"before entry", []gocfi.RegRule{{PC: text - 1, Reg: 6}}, "before 0x401000"},
		{"at end", []gocfi.RegRule{{PC: text + 26, Reg: 6}}, "at or past the function's end 0x40101a"},
		{"offset", []gocfi.RegRule{{PC: text + 1, Reg: 6, Kind: gocfi.SavedAt, Offset: -6}}, "offset -6 is not a multiple of 4"},
		{"kind", []gocfi.RegRule{{PC: text + 1, Reg: 6, Kind: 9}}, "kind 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := func(f *gopclntab.Func, _ []gocfi.RegRule) []gocfi.RegRule {
				if f.Name == "main.f" {
					return c.rules
				}
				return nil
			}
			_, fdes, errs := synthesize(t, tab, elf.EM_X86_64, extra)
			var fe *gocfi.FuncError
			if len(errs) != 1 || !errors.As(errs[0], &fe) || fe.Name != "main.f" || !strings.Contains(errs[0].Error(), c.want) {
				t.Fatalf("errors %v, want one for main.f: %q", errs, c.want)
			}
			if len(fdes) != 2 || fdes[0].Start != text+32 {
				t.Errorf("%d FDEs, the first at %#x; want goexit's and asyncPreempt's", len(fdes), fdes[0].Start)
			}
		})
	}
}

// TestMalformed: a function whose pcsp table does not read gets no FDE,
// nor does one whose record does not; the error says which.
func TestMalformed(t *testing.T) {
	data := pclntest.Write(pclntest.Table{
		Magic: pclntest.Magic118, Order: binary.LittleEndian, PtrSize: 8, Quantum: 1, TextStart: text,
		Funcs: []pclntest.Func{
			{Name: "past", Off: 0, PCSP: pclntest.PCValue(1, pclntest.R(0, 4), pclntest.R(8, 40))},
			{Name: "ok", Off: 16, PCSP: pclntest.PCValue(1, pclntest.R(0, 4))},
			{Name: "empty", Off: 32, PCSP: []byte{0x02, 0x00, 0x00}}, // one row of no PCs
		},
		End: 48,
	})
	tab, err := gopclntab.Parse(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, fdes, errs := synthesize(t, tab, elf.EM_X86_64, nil)
	if len(fdes) != 1 || fdes[0].Start != text+16 {
		t.Errorf("%d FDEs, want ok's", len(fdes))
	}
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "func 0 (past) pcsp table") || !strings.Contains(errs[0].Error(), "past the function's end") ||
		errs[1].Error() != "gocfi: func 2 (empty): empty pcsp table" {
		t.Errorf("errors %v", errs)
	}
}

// TestLimit: functions sharing one long pcsp table, as no linker lays
// them out, would make the image quadratic in the table's size; it stops.
func TestLimit(t *testing.T) {
	var rows []pclntest.Row
	for i := range 20000 {
		rows = append(rows, pclntest.R(int32(8*(i%2)), 1))
	}
	pcsp := pclntest.PCValue(1, rows...)
	var funcs []pclntest.Func
	for i := range 200 {
		funcs = append(funcs, pclntest.Func{Name: "f", Off: uint64(i) * 20000, PCSP: pcsp})
	}
	data := pclntest.Write(pclntest.Table{Magic: pclntest.Magic120, Order: binary.LittleEndian, PtrSize: 8, Quantum: 1, TextStart: text, Funcs: funcs, End: 200 * 20000})
	tab, err := gopclntab.Parse(data, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = gocfi.DebugFrame(tab, elf.EM_X86_64, nil)
	if err == nil || !strings.Contains(err.Error(), "4 times the table's size") {
		t.Fatalf("error %v", err)
	}
	if _, _, err := gocfi.DebugFrame(tab, elf.EM_PPC, nil); err == nil || !strings.Contains(err.Error(), "no Go call-frame rules for machine EM_PPC") {
		t.Fatalf("error %v for EM_PPC", err)
	}
}
