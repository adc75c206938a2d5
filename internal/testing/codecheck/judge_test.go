package codecheck

import (
	"debug/elf"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
)

// TestSavedVerdict: the two differences between a row and the CFI that
// are both true, and the ones next to them that are not.
func TestSavedVerdict(t *testing.T) {
	reg := codeflow.Saved{Where: codeflow.InReg}
	at := func(off int64) codeflow.Saved { return codeflow.Saved{Where: codeflow.OnStack, Off: off} }
	same := cfi.Rule{Kind: cfi.SameValue}
	off := func(o int64) cfi.Rule { return cfi.Rule{Kind: cfi.Offset, Offset: o} }
	// An FDE whose rows put the FP at CFA-16 from 0x10 on.
	ref := &refFunc{start: 0, end: 0x40, rows: []refRow{{loc: 0, fp: same}, {loc: 0x10, fp: off(-16)}}}
	// One whose slot ends at 0x10: nothing puts the FP at a slot after.
	undone := &refFunc{start: 0, end: 0x40, rows: []refRow{{loc: 0, fp: off(-16)}, {loc: 0x10, fp: same}}}
	fp := func(r *refRow) cfi.Rule { return r.fp }
	tests := []struct {
		name  string
		s     codeflow.Saved
		r     cfi.Rule
		slots []int64
		pc    uint64
		early func(*refRow) cfi.Rule
		want  savedCmp
		ref   *refFunc // nil: ref
	}{
		{"same slot", at(-16), off(-16), nil, 0x20, fp, agree, nil},
		{"other slot", at(-24), off(-16), []int64{-24}, 0x20, fp, disagree, nil},
		{"in its register", reg, same, nil, 0x8, fp, agree, nil},
		{"restored, saved there before", reg, off(-16), []int64{-16}, 0x30, fp, agree, nil},
		{"restored, never saved there", reg, off(-16), []int64{-24}, 0x30, fp, disagree, nil},
		{"restored, never saved", reg, off(-16), nil, 0x30, fp, disagree, nil},
		{"saved before the CFI says", at(-16), same, []int64{-16}, 0x8, fp, savedEarly, nil},
		{"saved where the CFI never says", at(-24), same, []int64{-24}, 0x8, fp, disagree, nil},
		{"saved, the CFI's slot comes before", at(-16), same, []int64{-16}, 0x18, fp, disagree, undone},
		{"return address saved early", at(-16), same, []int64{-16}, 0x8, nil, disagree, nil},
		{"lost", codeflow.Saved{Where: codeflow.Lost}, same, nil, 0x8, fp, disagree, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := map[int64]bool{}
			for _, o := range tt.slots {
				in[o] = true
			}
			f := ref
			if tt.ref != nil {
				f = tt.ref
			}
			if got := savedVerdict(tt.s, tt.r, in, f, tt.pc, tt.early); got != tt.want {
				t.Errorf("%v, want %v", got, tt.want)
			}
		})
	}
}

// TestIncomplete: a CFA disagreement is the CFI's only where its FDE is
// one row and the row knows the stack pointer moved from the entry's.
func TestIncomplete(t *testing.T) {
	a, _ := abiOf(elf.EM_X86_64)
	one := &refFunc{rows: []refRow{{cfaReg: 7, cfaOff: 8}}}
	two := &refFunc{rows: []refRow{{cfaReg: 7, cfaOff: 8}, {loc: 1, cfaReg: 7, cfaOff: 16}}}
	pushed := &codeflow.Row{Base: codeflow.BaseSP, CFAOff: 24, SP: codeflow.Val{Off: -24, Known: true}}
	atEntry := &codeflow.Row{Base: codeflow.BaseSP, CFAOff: 8, SP: codeflow.Val{Off: -8, Known: true}}
	cfa := verdict{wrong: []Wrong{{Field: FieldCFA}}}
	fp := verdict{wrong: []Wrong{{Field: FieldFP}}}
	for _, tc := range []struct {
		name string
		ref  *refFunc
		row  *codeflow.Row
		v    verdict
		want bool
	}{
		{"one row, pushed, CFA differs", one, pushed, cfa, true},
		{"two rows", two, pushed, cfa, false},
		{"at the entry", one, atEntry, cfa, false},
		{"only FP differs", one, pushed, fp, false},
		{"agrees", one, pushed, verdict{}, false},
	} {
		if got := incomplete(a, tc.ref, tc.row, tc.v); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStale: a CFA disagreement is the CFI's where its row agrees with
// ours at its start and our offset then changes only by what the
// instructions in between take off SP (libLLVM's `add $8,%rsp` without a
// row); not when our change is not the instruction's.
func TestStale(t *testing.T) {
	a, _ := abiOf(elf.EM_X86_64)
	// push %rbx; add $8,%rsp; cmp %rbx,%rdi; ret
	code := []byte{0x53, 0x48, 0x83, 0xc4, 0x08, 0x48, 0x39, 0xdf, 0xc3}
	c := &codeflow.Code{Machine: elf.EM_X86_64, Text: []codeflow.Range{{Addr: 0x1000, Data: code}}}
	pcs := []uint64{0x1000, 0x1001, 0x1005, 0x1008}
	sp := func(pc uint64, off int64) codeflow.Row {
		return codeflow.Row{PC: pc, Base: codeflow.BaseSP, CFAOff: off, SP: codeflow.Val{Off: -off, Known: true}}
	}
	cr := &refRow{loc: 0x1001, cfaReg: 7, cfaOff: 16}
	cfa := verdict{wrong: []Wrong{{Field: FieldCFA}}}
	for _, tc := range []struct {
		name string
		rows []codeflow.Row
		v    verdict
		want bool
	}{
		{"the add moves SP, the CFI keeps its row", []codeflow.Row{sp(0x1000, 8), sp(0x1001, 16), sp(0x1005, 8)}, cfa, true},
		{"our change is not the add's", []codeflow.Row{sp(0x1000, 8), sp(0x1001, 16), sp(0x1005, 0)}, cfa, false},
		{"our row disagrees where the CFI's starts", []codeflow.Row{sp(0x1000, 8), sp(0x1001, 24), sp(0x1005, 16)}, cfa, false},
		{"no CFA disagreement", []codeflow.Row{sp(0x1000, 8), sp(0x1001, 16), sp(0x1005, 8)}, verdict{}, false},
	} {
		f := &codeflow.Func{Start: 0x1000, End: 0x1009, Rows: tc.rows}
		if got := stale(a, c, f, pcs, cr, 0x1005, tc.v); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestContradicted: a CFA disagreement is the CFI's where its next row
// gives our offset and nothing in between moves SP (libLLVM-15: rsp+48
// over `test; je`, then rsp+40 before the pops).
func TestContradicted(t *testing.T) {
	a, _ := abiOf(elf.EM_X86_64)
	// test %r15d,%r15d; je +0xb; pop %rbx
	code := []byte{0x45, 0x85, 0xff, 0x74, 0x0b, 0x5b}
	c := &codeflow.Code{Machine: elf.EM_X86_64, Text: []codeflow.Range{{Addr: 0x1000, Data: code}}}
	pcs := []uint64{0x1000, 0x1003, 0x1005}
	ref := &refFunc{rows: []refRow{{loc: 0x1000, cfaReg: 7, cfaOff: 48}, {loc: 0x1005, cfaReg: 7, cfaOff: 40}}}
	row := func(off int64) *codeflow.Row {
		return &codeflow.Row{Base: codeflow.BaseSP, CFAOff: off, SP: codeflow.Val{Off: -off, Known: true}}
	}
	cfa := verdict{wrong: []Wrong{{Field: FieldCFA}}}
	if !contradicted(a, c, ref, &ref.rows[0], row(40), pcs, 0x1003, cfa) {
		t.Error("rsp+48 over test; je, then rsp+40: not taken for the CFI's error")
	}
	if contradicted(a, c, ref, &ref.rows[0], row(56), pcs, 0x1003, cfa) {
		t.Error("our offset is neither row's: taken for the CFI's error")
	}
	// pop %rbx moves SP: the next row may follow from it.
	c2 := &codeflow.Code{Machine: elf.EM_X86_64, Text: []codeflow.Range{{Addr: 0x1000, Data: []byte{0x5b, 0x5b, 0x5b}}}}
	ref2 := &refFunc{rows: []refRow{{loc: 0x1000, cfaReg: 7, cfaOff: 48}, {loc: 0x1002, cfaReg: 7, cfaOff: 40}}}
	if contradicted(a, c2, ref2, &ref2.rows[0], row(40), []uint64{0x1000, 0x1001, 0x1002}, 0x1001, cfa) {
		t.Error("a pop between the rows: taken for the CFI's error")
	}
}
