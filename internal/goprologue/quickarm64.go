package goprologue

import "encoding/binary"

// QuickARM64 is QuickAMD64 for AArch64: it describes a function the Go
// compiler made with the usual frame (Go 1.19 to 1.26), from its
// prologue and its exits, without following its code. The prologue,
// after the stack check (MOVD 16(g), R16; CMP R16, RSP; BLS morestack)
// or at the entry, is MOVD.W R30, -fs(RSP); MOVD R29, -8(RSP); SUB $8,
// RSP, R29: the caller's R29 is at CFA-fs-8 from the SUB on; or, for a
// large frame, SUB $fs, RSP, R20; STP (R29, R30), -8(R20); MOVD R20,
// RSP; SUB $8, RSP, R29, from the MOVD on. Each exit,
// where the pcsp rows put SP back at the entry's, restores it just before:
// MOVD -8(RSP), R29; MOVD.P fs(RSP), R30 (Go 1.26) or LDP -8(RSP), (R29,
// R30); ADD $fs, RSP, RSP (Go 1.19), the register holding it again from
// the second instruction; or follows code that does not fall through
// (the morestack block). Instructions have one size, so the exits are
// read back from the pcsp rows exactly. Its words are matched as the
// encodings arm64asm decodes them to (TestQuickARM64Words); ok is false
// for any other function (large and leaf frames, assembly), which
// Analyze must follow.
func QuickARM64(code []byte, entry uint64, sp []SPRange) (r Result, ok bool) {
	if len(sp) == 0 || sp[0].Start != entry || sp[0].Delta != 0 || len(code)%4 != 0 {
		return Result{}, false
	}
	word := func(pc uint64) uint32 {
		if pc < entry || pc+4 > entry+uint64(len(code)) {
			return 0
		}
		return binary.LittleEndian.Uint32(code[pc-entry:])
	}
	pc, ok := a64StackCheck(word, entry)
	if !ok {
		return Result{}, false
	}
	var f quickFrame
	fs, small := a64PreIndexLR(word(pc))
	switch large := a64SubImm(word(pc), 20); {
	case small && word(pc+4) == a64StoreFP && word(pc+8) == a64SetFP:
		f = quickFrame{made: pc + 4, saved: pc + 8, size: fs}
	case large > 0 && word(pc+4) == a64StoreFPLR && word(pc+8) == a64SetSPR20 && word(pc+12) == a64SetFP:
		f = quickFrame{made: pc + 12, saved: pc + 8, size: large} // stored below the frame before SP moves
	default:
		return Result{}, false
	}
	left := func(pc uint64) (uint64, bool) {
		switch prev := word(pc - 4); {
		case word(pc-8) == a64LoadFP && prev == a64PostIndexLR(f.size),
			word(pc-8) == a64LoadFPLR && prev == a64AddSP(f.size):
			return pc - 4, true
		case prev == a64NOP, prev == a64RET, prev&0xfc000000 == a64B:
			return pc, true
		}
		return 0, false
	}
	return quickRules(entry, sp, f, -f.size-8, left)
}

// a64StackCheck returns the PC after the stack check at entry (entry
// without one): MOVD 16(g), R16 (24(g) on the system stack); CMP R16,
// RSP, or SUB $n, RSP, R17; CMP R16, R17 for a frame past the guard's
// slack; BLS to the morestack block.
func a64StackCheck(word func(uint64) uint32, entry uint64) (uint64, bool) {
	pc := entry
	if w := word(pc); w != a64LoadGuard && w != a64LoadGuard1 {
		return pc, true
	}
	pc += 4
	switch {
	case word(pc) == a64CmpGuard:
		pc += 4
	case a64SubImm(word(pc), 17) > 0 && word(pc+4) == a64CmpGuardR17:
		pc += 8
	default:
		return 0, false
	}
	return pc + 4, word(pc)&0xff00001f == a64BLS
}

// a64SubImm reads SUB $n, RSP, Rd (n in 12 bits, not shifted), 0 for
// anything else.
func a64SubImm(w uint32, rd uint32) int64 {
	if w&0xffc003ff != 0xd10003e0|rd {
		return 0
	}
	return int64(w >> 10 & 0xfff)
}

// The words QuickARM64 reads, as Go's compiler encodes them.
const (
	a64LoadGuard   = 0xf9400b90 // MOVD 16(R28), R16 (g.stackguard0)
	a64LoadGuard1  = 0xf9400f90 // MOVD 24(R28), R16 (g.stackguard1)
	a64CmpGuard    = 0xeb3063ff // CMP R16, RSP
	a64CmpGuardR17 = 0xeb10023f // CMP R16, R17
	a64StoreFPLR   = 0xa93ffa9d // STP (R29, R30), -8(R20)
	a64SetSPR20    = 0x9100029f // MOVD R20, RSP
	a64BLS         = 0x54000009 // BLS, with its offset masked out
	a64StoreFP     = 0xf81f83fd // MOVD R29, -8(RSP)
	a64SetFP       = 0xd10023fd // SUB $8, RSP, R29
	a64LoadFP      = 0xf85f83fd // MOVD -8(RSP), R29
	a64LoadFPLR    = 0xa97ffbfd // LDP -8(RSP), (R29, R30)
	a64NOP         = 0xd503201f
	a64RET         = 0xd65f03c0 // RET (R30)
	a64B           = 0x14000000 // B, with its offset masked out
)

// a64PreIndexLR reads MOVD.W R30, -fs(RSP) (STR X30, [SP, #-fs]!), with
// fs a positive multiple of 8 in its 9-bit signed offset.
func a64PreIndexLR(w uint32) (fs int64, ok bool) {
	if w&0xffe00fff != 0xf8000ffe {
		return 0, false
	}
	off := int64(int32(w<<11) >> 23) // imm9, bits 12-20
	return -off, off < 0 && off%8 == 0
}

// a64PostIndexLR is MOVD.P fs(RSP), R30 (LDR X30, [SP], #fs).
func a64PostIndexLR(fs int64) uint32 { return 0xf84007fe | uint32(fs&0x1ff)<<12 }

// a64AddSP is ADD $fs, RSP, RSP, for fs below 4096.
func a64AddSP(fs int64) uint32 {
	if fs >= 1<<12 {
		return 0
	}
	return 0x910003ff | uint32(fs)<<10
}
