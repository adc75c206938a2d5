package pltsim

import (
	"encoding/binary"
	"fmt"
)

// Known instruction words and masks. A64 instructions are little-endian
// in both data byte orders.
const (
	a64StpX16X30PreSP = 0xa9bf7bf0 // stp x16, x30, [sp, #-16]!
	a64Nop            = 0xd503201f
	a64BtiC           = 0xd503245f
	a64Autia1716      = 0xd503219f
	a64Autib1716      = 0xd50321df
	a64BrX17          = 0xd61f0220
)

// arm64Simulate follows the instructions of one PLT stub and returns
// where its frame changes. Every stub is entered by a branch-and-link
// (PLTn) or a branch from PLTn (PLT0) with the caller's SP, so the CFA
// starts at SP+entryCFA (0) with the return address in x30, whatever
// header says.
func arm64Simulate(code []byte, entryCFA int32, _ bool) ([]Step, error) {
	if allZero(code) {
		return nil, errAllZero
	}
	if len(code)%4 != 0 {
		return nil, fmt.Errorf("PLT stub of %d bytes is not a whole number of instructions", len(code))
	}
	steps := []Step{{Off: 0, CFAOffset: entryCFA}}
	cur := steps[0]
	branched := false
	for off := 0; off < len(code); off += 4 {
		w := binary.LittleEndian.Uint32(code[off:])
		switch {
		case w == a64StpX16X30PreSP:
			if branched {
				return nil, fmt.Errorf("PLT stub byte %#x: code after the final branch", off)
			}
			// Pushes the pair: x16 at the new SP, x30 above it.
			cur.CFAOffset += 16
			cur.RAOffset = -8
			if off+4 < len(code) {
				cur.Off = uint32(off + 4)
				steps = append(steps, cur)
			}
		case w == a64BrX17:
			branched = true
		case w == a64Nop, w == a64BtiC:
		case w == a64Autia1716, w == a64Autib1716,
			a64IsADRP(w), a64IsLDRImm(w), a64IsADDImm(w):
			if branched {
				return nil, fmt.Errorf("PLT stub byte %#x: code after the final branch", off)
			}
		default:
			return nil, fmt.Errorf("PLT stub byte %#x: unexpected instruction %08x", off, w)
		}
	}
	if !branched {
		return nil, fmt.Errorf("PLT stub of %d bytes does not end in a branch", len(code))
	}
	return steps, nil
}

// arm64LazyHeader reports whether code starts as PLT0 does: stp x16,
// x30, [sp, #-16]!, after a bti c with BTI.
func arm64LazyHeader(code []byte) bool {
	for off := 0; off+4 <= len(code) && off <= 4; off += 4 {
		switch binary.LittleEndian.Uint32(code[off:]) {
		case a64StpX16X30PreSP:
			return true
		case a64BtiC:
			continue
		}
		return false
	}
	return false
}

// a64IsADRP: adrp xd, label.
func a64IsADRP(w uint32) bool { return w&0x9f000000 == 0x90000000 }

// a64IsLDRImm: ldr xt, [xn, #imm] (64-bit, unsigned offset, no writeback),
// with a base other than SP.
func a64IsLDRImm(w uint32) bool { return w&0xffc00000 == 0xf9400000 && (w>>5)&31 != 31 }

// a64IsADDImm: add xd, xn, #imm (64-bit), neither register SP.
func a64IsADDImm(w uint32) bool {
	return w&0xff800000 == 0x91000000 && w&31 != 31 && (w>>5)&31 != 31
}
