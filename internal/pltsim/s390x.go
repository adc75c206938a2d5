package pltsim

import "fmt"

// The s390x general registers a stub must not write: the frame pointer,
// the return address and the stack pointer.
const (
	s390xR11 = 11
	s390xR14 = 14
	s390xR15 = 15
)

// GNU ld's s390x PLT (bfd/elf64-s390.c): a 32-byte PLT0 and 32-byte
// entries.
//
//	PLT0:  stg %r1,56(%r15); larl %r1,GOT; mvc 48(8,%r15),8(%r1);
//	       lg %r1,16(%r1); br %r1; nopr; nopr; nopr
//	PLTn:  larl %r1,GOT+n; lg %r1,0(%r1); br %r1;
//	       basr %r1,%r0; lgf %r1,12(%r1); jg PLT0; .long reloc offset
//
// An entry is entered by brasl %r14 with the caller's SP; its lazy half
// (from basr, where the GOT slot first points) and PLT0 store into the
// caller's register save area but change neither %r15 nor %r14, so the
// CFA stays %r15+160 and the return address stays in %r14 throughout.
//
// s390xSimulate follows the instructions of one such stub (header or not)
// and returns its frame. It knows only the instructions GNU ld's stubs
// contain, refuses any that would write the stack pointer, the frame
// pointer or the return-address register, or that calls, and requires the
// stub to end in an unconditional branch (br, jg), optionally followed by
// nopr padding, or by the 4-byte relocation offset ld stores after an
// entry's final jg.
func s390xSimulate(code []byte, entryCFA int32, _ bool) ([]Step, error) {
	if len(code) == 0 {
		return nil, fmt.Errorf("empty PLT stub")
	}
	if allZero(code) {
		return nil, errAllZero
	}
	ended := false // the last instruction was an unconditional branch (or padding after one)
	jg := false    // the last instruction was a jg
	for off := 0; off < len(code); {
		if jg && len(code)-off == 4 {
			break // ld's relocation offset after an entry's final jg: data
		}
		n := s390xInsnLen(code[off])
		if off+n > len(code) {
			return nil, fmt.Errorf("PLT stub byte %#x: instruction of %d bytes runs past the stub's end", off, n)
		}
		in := code[off : off+n]
		w, kind, ok := s390xDecode(in)
		switch {
		case !ok:
			return nil, fmt.Errorf("PLT stub byte %#x: unexpected instruction % x", off, in)
		case w == s390xR15 || w == s390xR14 || w == s390xR11:
			return nil, fmt.Errorf("PLT stub byte %#x: instruction % x writes r%d", off, in, w)
		case kind == s390xBranch:
			ended = true
			jg = in[0] == 0xc0
		case kind == s390xNop:
			jg = false
		default:
			ended, jg = false, false
		}
		off += n
	}
	if !ended {
		return nil, fmt.Errorf("PLT stub of %d bytes does not end in a branch", len(code))
	}
	return []Step{{Off: 0, CFAOffset: entryCFA}}, nil
}

// s390xInsnLen is an instruction's length from the top two bits of its
// first byte (z/Architecture Principles of Operation, "Instruction
// Formats").
func s390xInsnLen(op byte) int {
	switch op >> 6 {
	case 0:
		return 2
	case 3:
		return 6
	}
	return 4
}

type s390xInsnKind uint8

const (
	s390xOther  s390xInsnKind = iota // an instruction that falls through
	s390xBranch                      // an unconditional branch
	s390xNop
)

// s390xNone is s390xDecode's "writes no general register".
const s390xNone = -1

// s390xDecode recognises the instructions of ld's stubs: the general
// register it writes (s390xNone when it writes none), what kind it is, and
// whether it is known at all.
func s390xDecode(in []byte) (written int, kind s390xInsnKind, ok bool) {
	r1, r2 := int(in[1]>>4), int(in[1]&0xf)
	switch len(in) {
	case 2:
		switch in[0] {
		case 0x07: // bcr m1,r2
			switch {
			case r1 == 0:
				return s390xNone, s390xNop, true // nopr
			case r1 == 15 && r2 != 0:
				return s390xNone, s390xBranch, true // br r2
			}
		case 0x0d: // basr r1,r2: with r2=0, only r1 = the next address
			if r2 == 0 {
				return r1, s390xOther, true
			}
		}
	case 6:
		switch in[0] {
		case 0xc0:
			switch r2 { // the opcode extension
			case 0x0: // larl r1,imm
				return r1, s390xOther, true
			case 0x4: // brcl m1,imm: jg when m1=15
				if r1 == 15 {
					return s390xNone, s390xBranch, true
				}
			}
		case 0xe3: // RXY: lg, lgf load r1; stg stores it
			switch in[5] {
			case 0x04, 0x14:
				return r1, s390xOther, true
			case 0x24:
				return s390xNone, s390xOther, true
			}
		case 0xd2: // mvc: storage to storage
			return s390xNone, s390xOther, true
		}
	}
	return s390xNone, s390xOther, false
}
