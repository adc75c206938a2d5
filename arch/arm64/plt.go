package arm64

import (
	"encoding/binary"
	"fmt"
)

// A StackStep says that from byte Off of a stub onwards, until the next
// step, the CFA is SP+CFAOffset, and the return address is either still
// in x30 (RASaved false) or stored at CFA+RAOffset.
type StackStep struct {
	Off       uint32
	CFAOffset int32
	RASaved   bool
	RAOffset  int32
}

// Known instruction words and masks. A64 instructions are little-endian
// in both data byte orders.
const (
	stpX16X30PreSP = 0xa9bf7bf0 // stp x16, x30, [sp, #-16]!
	nop            = 0xd503201f
	btiC           = 0xd503245f
	autia1716      = 0xd503219f
	autib1716      = 0xd50321df
	brX17          = 0xd61f0220
)

// SimulateStub follows the instructions of one PLT stub and returns where
// its frame changes. Every stub is entered by a branch-and-link (PLTn) or
// a branch from PLTn (PLT0) with the caller's SP, so the CFA starts at
// SP+0 with the return address in x30. It knows only what PLT stubs
// contain and refuses anything else, so that an unfamiliar stub is never
// described by a guess.
func SimulateStub(code []byte) ([]StackStep, error) {
	if len(code) == 0 || len(code)%4 != 0 {
		return nil, fmt.Errorf("PLT stub of %d bytes is not a whole number of instructions", len(code))
	}
	steps := []StackStep{{Off: 0}}
	cur := steps[0]
	branched := false
	for off := 0; off < len(code); off += 4 {
		w := binary.LittleEndian.Uint32(code[off:])
		switch {
		case w == stpX16X30PreSP:
			if branched {
				return nil, fmt.Errorf("PLT stub byte %#x: code after the final branch", off)
			}
			// Pushes the pair: x16 at the new SP, x30 above it.
			cur.CFAOffset += 16
			cur.RASaved = true
			cur.RAOffset = -8
			if off+4 < len(code) {
				cur.Off = uint32(off + 4)
				steps = append(steps, cur)
			}
		case w == brX17:
			branched = true
		case w == nop, w == btiC:
		case w == autia1716, w == autib1716,
			isADRP(w), isLDRImm(w), isADDImm(w):
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

// isADRP: adrp xd, label.
func isADRP(w uint32) bool { return w&0x9f000000 == 0x90000000 }

// isLDRImm: ldr xt, [xn, #imm] (64-bit, unsigned offset, no writeback),
// with a base other than SP.
func isLDRImm(w uint32) bool { return w&0xffc00000 == 0xf9400000 && (w>>5)&31 != 31 }

// isADDImm: add xd, xn, #imm (64-bit), neither register SP.
func isADDImm(w uint32) bool {
	return w&0xff800000 == 0x91000000 && w&31 != 31 && (w>>5)&31 != 31
}
