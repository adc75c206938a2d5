package codeentry

import (
	"slices"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// dataRefs are the addresses in read-only data, outside the code, that
// the file references: the address an instruction's memory operand or
// mov immediate names (the sweep's), a dynamic relocation's target, and
// any aligned 8-byte word of loaded data whose value is one (a non-PIE's
// pointers, RELR's addends). Sorted, each once (codeflow.Code.Refs).
//
// A jump table bounded by its content ends where another object starts,
// and an object the code or data uses is referenced at its start (the
// table itself is, by the lea of the code that indexes it). Too many
// addresses (a number that looks like one) only end such tables sooner.
// Cost: one pass over the relocations and the loaded data's words, a
// binary search each, and 8 bytes per referenced address kept.
func dataRefs(f *elfread.File, img *image, rs *relocs, sw *sweepResult) []uint64 {
	var out []uint64
	keep := func(v uint64) {
		if find(img.ro, v, 1) >= 0 && img.textAt(v) < 0 {
			out = append(out, v)
		}
	}
	for _, v := range sw.data {
		keep(v)
	}
	for _, r := range rs.list {
		keep(uint64(r.addend))
		if s, ok := rs.symbol(r.sym); ok {
			keep(s.Value + uint64(r.addend))
		}
	}
	order := f.ELF.ByteOrder
	for _, r := range img.all {
		if img.textAt(r.addr) >= 0 {
			continue // code: its words are instructions
		}
		// Words at 8-byte aligned addresses (pointers are aligned).
		off := (8 - r.addr%8) % 8
		for ; off+8 <= uint64(len(r.data)); off += 8 {
			keep(order.Uint64(r.data[off:]))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
