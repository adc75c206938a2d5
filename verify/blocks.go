package verify

import (
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// block is one FRE block of a section as blockProblems finds it: where it
// starts in the FRE sub-section, its size, how its FREs are read (their
// count and start-field size), and the first FDE pointing at it.
type block struct {
	off, size uint64
	fres      int
	addrSize  uint8
	fde       int
}

// blockProblems checks how a section's FDEs use its FRE blocks (a V3
// function's attribute and FREs, a V2 function's FREs), which cfi2sframe
// shares between functions whose blocks are the same:
//
//   - every block lies inside the FRE sub-section (sframe-block-bounds);
//   - a block is shared whole: none starts inside another one
//     (sframe-block-inside);
//   - every FDE pointing at a block reads it the same way: the same FRE
//     count and start-field size (sframe-block-differs; in V3 both come
//     from the block itself, in V2 from each FDE's index entry).
//
// Offsets are given in hex, in the FRE sub-section and in the section.
func blockProblems(t *sframe.Table) []LayoutProblem {
	var out []LayoutProblem
	add := func(what, format string, args ...any) {
		out = append(out, LayoutProblem{What: what, Detail: fmt.Sprintf(format, args...)})
	}
	h := &t.Header
	freAt := uint64(h.Size()) + uint64(h.FREOff) // the sub-section's section offset
	attr := uint64(0)
	if h.Version == sframe.Version3 {
		attr = 5
	}
	blocks := map[uint64]*block{}
	var d sframe.FDE
	for i := range int(h.NumFDEs) {
		if err := t.FDE(i, &d); err != nil {
			add("sframe-block-bounds", "FDE %d: %v", i, err)
			continue
		}
		if len(d.FREs) == 0 && attr == 0 {
			continue // a V2 function without FREs holds no block
		}
		size := attr
		for _, f := range d.FREs {
			size += uint64(d.AddrSize) + 1 + uint64(f.NumWords)*uint64(f.WordSize)
		}
		off := uint64(d.FREOff)
		if off+size > uint64(h.FRELen) {
			add("sframe-block-bounds", "FDE %d: its block [%#x,%#x) (section offset %#x) runs past the %#x-byte FRE sub-section", i, off, off+size, freAt+off, h.FRELen)
			continue
		}
		b := blocks[off]
		if b == nil {
			blocks[off] = &block{off: off, size: size, fres: len(d.FREs), addrSize: d.AddrSize, fde: i}
			continue
		}
		if b.size != size || b.fres != len(d.FREs) || b.addrSize != d.AddrSize {
			add("sframe-block-differs", "FDE %d reads the block at FRE offset %#x (section offset %#x) as %d FREs with %d-byte starts (%#x bytes), FDE %d as %d with %d-byte starts (%#x bytes)",
				i, off, freAt+off, len(d.FREs), d.AddrSize, size, b.fde, b.fres, b.addrSize, b.size)
		}
	}
	sorted := make([]*block, 0, len(blocks))
	for _, b := range blocks {
		sorted = append(sorted, b)
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].off < sorted[j].off })
	// A block starts inside another one when it starts before the
	// furthest end of the blocks that start below it.
	var reach *block
	for _, b := range sorted {
		if reach != nil && b.off < reach.off+reach.size {
			add("sframe-block-inside", "FDE %d's block at FRE offset %#x (section offset %#x) starts inside FDE %d's block [%#x,%#x)",
				b.fde, b.off, freAt+b.off, reach.fde, reach.off, reach.off+reach.size)
		}
		if reach == nil || b.off+b.size > reach.off+reach.size {
			reach = b
		}
	}
	return out
}
