// Package isa is the one way the project decodes machine instructions:
// golang.org/x/arch's decoders, with their panics on hostile bytes made
// errors and their known wrong lengths corrected, so that no code bytes
// can stop a conversion or a check.
package isa

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// AMD64 is x86asm.Decode in 64-bit mode, with a panic of the decoder
// (x/arch v0.30.0 indexes past a truncated VEX instruction: c5 30) made
// an error, a memory operand's 32-bit displacement sign-extended
// (signDisp), and AMD's prefetch hints and FEMMS, which x86asm does not
// know, decoded (amdHint). Inst.Len is as x86asm gives it: see LenAMD64.
func AMD64(b []byte) (in x86asm.Inst, err error) {
	defer func() {
		if r := recover(); r != nil {
			in, err = x86asm.Inst{}, fmt.Errorf("x86asm: %v", r)
		}
	}()
	in, err = x86asm.Decode(b, 64)
	if err != nil || in.Op == 0 {
		if h, ok := amdHint(b); ok {
			return h, nil
		}
	}
	if err == nil {
		signDisp(&in)
	}
	return in, err
}

// signDisp sign-extends the 32-bit displacements x86asm v0.30.0 gives
// zero-extended in 64-bit mode: lea -0x10(%rip) comes out with Disp
// 0xfffffff0, a target 4 GiB away, and lea -0x1a8(%rbp),%rsp moves SP
// up by as much (8-bit displacements it sign-extends). In 64-bit mode
// the CPU sign-extends every 32-bit displacement, so a value in
// [2^31, 2^32) can only be a negative one; the exception is the 64-bit
// absolute address of mov's moffs forms (opcodes a0-a3), left as it is.
func signDisp(in *x86asm.Inst) {
	if op := in.Opcode >> 24; op >= 0xa0 && op <= 0xa3 {
		return
	}
	for i, a := range in.Args {
		if a == nil {
			break
		}
		if m, ok := a.(x86asm.Mem); ok && m.Disp >= 1<<31 && m.Disp < 1<<32 {
			m.Disp = int64(int32(m.Disp))
			in.Args[i] = m
		}
	}
}

// LenAMD64 is the length of in, decoded from b, with the length x86asm
// gives VZEROUPPER and VZEROALL corrected: it takes them to run two bytes
// past their opcode (c5 f8 77 comes out 5 bytes long). The two have no
// operands: a VEX prefix of two (c5) or three (c4) bytes and the opcode 77.
func LenAMD64(in x86asm.Inst, b []byte) int {
	if in.Op != x86asm.VZEROUPPER && in.Op != x86asm.VZEROALL {
		return in.Len
	}
	if len(b) >= 3 && b[0] == 0xc5 && b[2] == 0x77 {
		return 3
	}
	if len(b) >= 4 && b[0] == 0xc4 && b[3] == 0x77 {
		return 4
	}
	return in.Len
}

// ARM64 is arm64asm.Decode with a panic of the decoder made an error
// (none is known, unlike x86asm's). arm64asm v0.30.0 marks each decoding
// rule it uses in a package-level table (decoderCover[i] = true, for its
// own tests), so goroutines decoding at once write the same true to the
// same bytes: the race detector reports it, and it changes nothing.
func ARM64(w []byte) (in arm64asm.Inst, err error) {
	defer func() {
		if r := recover(); r != nil {
			in, err = arm64asm.Inst{}, fmt.Errorf("arm64asm: %v", r)
		}
	}()
	return arm64asm.Decode(w)
}

// ARM64ImmShift is the value of an ADD or SUB immediate as arm64asm
// gives it ("#0x20" or "#0x10, LSL #12"); false for any other form.
func ARM64ImmShift(is arm64asm.ImmShift) (int64, bool) {
	head, tail, shifted := strings.Cut(is.String(), ", LSL #")
	v, err := strconv.ParseInt(strings.TrimPrefix(head, "#"), 0, 64)
	if err != nil || strings.Contains(head, "MSL") {
		return 0, false
	}
	if shifted {
		n, err := strconv.ParseUint(tail, 10, 6)
		if err != nil {
			return 0, false
		}
		v <<= n
	}
	return v, true
}
