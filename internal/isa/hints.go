package isa

import "golang.org/x/arch/x86/x86asm"

// AMD's 3DNow! row left two opcodes x86asm v0.30.0 does not know, and
// OpenBLAS's kernels for AMD cores (the OPTERON, BARCELONA, ... builds a
// dynamic-arch library carries) use both:
//
//   - 0f 0d /r, mod not 3: the prefetch hints. /1 is PREFETCHW, which
//     x86asm knows; /0 is AMD's PREFETCH and the other /r are reserved
//     hints every x86-64 core runs as prefetches. None writes a register,
//     memory or the flags.
//   - 0f 0e: FEMMS, a faster EMMS: it empties the x87/MMX tag word and
//     touches nothing else.
//
// amdHint decodes them after the legacy prefixes and REX x86asm would
// take: a prefetch as PREFETCHW with the memory operand its ModRM gives
// (the same for every /r), FEMMS as EMMS, which has the same (no) effect
// on the registers and the stack. ok is false for any other bytes.
func amdHint(b []byte) (x86asm.Inst, bool) {
	i := 0
	for i < len(b) && i < 14 && isLegacyPrefix(b[i]) {
		i++
	}
	if i < len(b) && b[i]&0xf0 == 0x40 { // REX
		i++
	}
	if i+1 >= len(b) || b[i] != 0x0f {
		return x86asm.Inst{}, false
	}
	switch b[i+1] {
	case 0x0e:
		return x86asm.Inst{Op: x86asm.EMMS, Mode: 64, Len: i + 2}, true
	case 0x0d:
		if i+2 >= len(b) || b[i+2]>>6 == 3 {
			return x86asm.Inst{}, false
		}
		// Decode as /1 (PREFETCHW): the length and the memory operand
		// depend on mod and r/m only.
		c := make([]byte, min(len(b), 15))
		copy(c, b)
		c[i+2] = c[i+2]&^0x38 | 1<<3
		in, err := x86asm.Decode(c, 64)
		if err != nil || in.Op != x86asm.PREFETCHW {
			return x86asm.Inst{}, false
		}
		return in, true
	}
	return x86asm.Inst{}, false
}

// isLegacyPrefix says p is a prefix these opcodes may carry: operand and
// address size, a segment, rep. Lock (f0) makes them fault.
func isLegacyPrefix(p byte) bool {
	switch p {
	case 0x66, 0x67, 0xf2, 0xf3, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65:
		return true
	}
	return false
}
