package cfi

import (
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
)

// TestCodeWriter: the rows of a codeflow.Func, written as a .debug_frame
// image and executed back, give the same rules at every row: the CFA
// from SP or FP, the caller's FP and RA in their registers or saved, the
// AArch64 signing state and key.
func TestCodeWriter(t *testing.T) {
	sp := func(off int64) codeflow.Row { return codeflow.Row{Base: codeflow.BaseSP, CFAOff: off} }
	stack := func(off int64) codeflow.Saved { return codeflow.Saved{Where: codeflow.OnStack, Off: off} }
	with := func(r codeflow.Row, f func(*codeflow.Row)) codeflow.Row { f(&r); return r }
	amd64 := []codeflow.Row{
		with(sp(8), func(r *codeflow.Row) { r.PC, r.RA = 0x1000, stack(-8) }),
		with(sp(16), func(r *codeflow.Row) { r.PC, r.RA, r.FP = 0x1001, stack(-8), stack(-16) }),
		{PC: 0x1004, Base: codeflow.BaseFP, CFAOff: 16, RA: stack(-8), FP: stack(-16)},
		with(sp(8), func(r *codeflow.Row) { r.PC, r.RA = 0x1100, stack(-8) }),
	}
	arm64 := []codeflow.Row{
		sp(0),
		with(sp(0), func(r *codeflow.Row) { r.PC, r.RASigned = 4, true }),
		{PC: 8, Base: codeflow.BaseSP, CFAOff: 32, RASigned: true, FP: stack(-32), RA: stack(-24)},
		{PC: 12, Base: codeflow.BaseFP, CFAOff: 32, RASigned: true, FP: stack(-32), RA: stack(-24)},
		with(sp(0), func(r *codeflow.Row) { r.PC, r.RASigned = 0x40000, true }),
		sp(0),
	}
	arm64[0].PC, arm64[5].PC = 0, 0x40004
	bkey := func(rows []codeflow.Row) []codeflow.Row {
		out := append([]codeflow.Row(nil), rows...)
		for i := range out {
			out[i].BKey = true
		}
		return out
	}
	for _, tc := range []struct {
		name string
		m    elf.Machine
		rows []codeflow.Row
		end  uint64
	}{
		{"amd64", elf.EM_X86_64, amd64, 0x1200},
		{"arm64", elf.EM_AARCH64, arm64, 0x40010},
		{"arm64 B key", elf.EM_AARCH64, bkey(arm64), 0x40010},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := newCodeWriter(tc.m, binary.LittleEndian, 8)
			if err != nil {
				t.Fatal(err)
			}
			fn := codeflow.Func{Start: tc.rows[0].PC, End: tc.end, Entry: tc.rows[0].PC, Rows: tc.rows}
			w.fde(fn)
			fdes, errs := Parse(&Section{kind: kindCode, data: w.out, order: binary.LittleEndian, ptrSize: 8, codeEntries: w.entries})
			if len(errs) > 0 || len(fdes) != 1 {
				t.Fatalf("parse: %d FDEs, errors %v", len(fdes), errs)
			}
			f := fdes[0]
			if f.Start != fn.Start || f.End() != fn.End || f.CIE.BKey != tc.rows[0].BKey {
				t.Fatalf("FDE [%#x,%#x) B key %v, want [%#x,%#x) %v", f.Start, f.End(), f.CIE.BKey, fn.Start, fn.End, tc.rows[0].BKey)
			}
			if code, _ := f.Note(); code != codeNote {
				t.Errorf("note %q, want %q", code, codeNote)
			}
			var tab Table
			var c Context
			if err := c.Execute(f, &tab); err != nil {
				t.Fatal(err)
			}
			fp, ra, spReg := uint64(6), uint64(16), uint64(7)
			if tc.m == elf.EM_AARCH64 {
				fp, ra, spReg = 29, 30, 31
			}
			for _, want := range tc.rows {
				row := &tab.Rows[tab.RowAt(want.PC)]
				reg := spReg
				if want.Base == codeflow.BaseFP {
					reg = fp
				}
				got := []any{row.CFA.Reg, row.CFA.Offset, saved(row.Rule(fp)), saved(row.Rule(ra)), row.MangledRA}
				exp := []any{reg, want.CFAOff, want.FP, want.RA, want.RASigned}
				if d := cmp.Diff(exp, got); d != "" {
					t.Errorf("at %#x (-want +got):\n%s", want.PC, d)
				}
			}
		})
	}
}

// saved is a CFI rule as a codeflow.Saved: Offset is on the stack, the
// rest in the register.
func saved(r Rule) codeflow.Saved {
	if r.Kind == Offset {
		return codeflow.Saved{Where: codeflow.OnStack, Off: r.Offset}
	}
	return codeflow.Saved{}
}
