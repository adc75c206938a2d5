// Package s390x holds the s390x facts cfi2sframe needs: DWARF register
// numbers (s390x ELF ABI supplement), the SFrame ABI's s390x rules (the
// CFA is the stack pointer at the call site plus 160; CFA offsets are
// stored adjusted by -160 and scaled down by 8; return address and frame
// pointer are tracked per row, on the stack or in another register), and
// the PLT stubs GNU ld emits, with a small checker that derives each
// stub's frame from its instructions.
package s390x

// DWARF register numbers. 0-15 are the general registers; 16-31 the
// floating-point registers, in the ABI's order (f0, f2, f4, f6, f1, f3, f5,
// f7, f8, f10, f12, f14, f9, f11, f13, f15), which leaf functions use to
// keep the return address, the frame pointer or the stack pointer instead
// of saving them on the stack.
const (
	R0  = 0
	R1  = 1
	R6  = 6
	R11 = 11 // frame pointer
	R13 = 13
	R14 = 14 // return address
	R15 = 15 // stack pointer
	F0  = 16
	F15 = 31
)

// Register facts used by the translator and by the readers of SFrame.
const (
	SP = R15
	FP = R11
	RA = R14
)

// The SFrame specification's s390x constants (sframe-v3.h).
const (
	// SPValOffset is the stack pointer of the caller relative to the CFA
	// (SFRAME_S390X_SP_VAL_OFFSET): the ELF ABI defines the CFA as the SP
	// at the call site plus 160, the size of the register save area every
	// caller provides.
	SPValOffset = -160
	// CFAOffsetAdjustment is added to a CFA offset before it is stored
	// (SFRAME_S390X_CFA_OFFSET_ADJUSTMENT), so that the usual 160 is 0.
	CFAOffsetAdjustment = SPValOffset
	// CFAOffsetAlignment divides the adjusted CFA offset
	// (SFRAME_S390X_CFA_OFFSET_ALIGNMENT_FACTOR): the stack pointer, hence
	// the CFA offset, is 8-byte aligned.
	CFAOffsetAlignment = 8
)

// EncodeCFAOffset returns the stored form of a CFA offset and whether the
// offset has one (the adjusted offset is a multiple of the alignment).
func EncodeCFAOffset(off int64) (int64, bool) {
	adj := off + CFAOffsetAdjustment
	if adj%CFAOffsetAlignment != 0 {
		return 0, false
	}
	return adj / CFAOffsetAlignment, true
}

// CalleeSaved lists the general registers a callee must preserve: r6-r13
// and the stack pointer r15 (r14, the return address, is the caller's to
// lose). Of the floating-point registers f8-f15 are preserved too.
var CalleeSaved = []int{6, 7, 8, 9, 10, 11, 12, 13, R15}

// fprOrder maps DWARF numbers 16-31 to floating-point register numbers.
var fprOrder = [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}

// FPRNumber returns the floating-point register number (0-15) of a DWARF
// register 16-31, or -1.
func FPRNumber(r int) int {
	if r < F0 || r > F15 {
		return -1
	}
	return fprOrder[r-F0]
}

// RegName returns the conventional name of a DWARF register number, or ""
// when there is none.
func RegName(r int) string {
	switch {
	case r >= 0 && r <= 15:
		return "r" + itoa(r)
	case r >= F0 && r <= F15:
		return "f" + itoa(FPRNumber(r))
	}
	return ""
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}
