// Package arm64 holds the AArch64 facts cfi2sframe needs: DWARF register
// numbers, the AAPCS64 frame record, pointer authentication, and the
// shapes of the PLT stubs GNU ld and LLVM lld emit, with a small simulator
// that derives each stub's frame from its instructions.
package arm64

// DWARF register numbers (DWARF for the Arm 64-bit Architecture, 4.1).
const (
	X19 = 19
	X28 = 28
	X29 = 29 // frame pointer
	X30 = 30 // link register: the return address column
	SP  = 31
	// RAStateRegister is the pseudo-register that DW_CFA_AARCH64_negate_ra_state
	// toggles: 1 while the return address is signed.
	RAStateRegister = 34
)

// Register facts used by the translator.
const (
	FP = X29
	RA = X30
)

// CalleeSaved lists the general registers a callee must preserve
// (AAPCS64 6.1.1): x19–x28, plus the frame record x29/x30.
var CalleeSaved = []int{19, 20, 21, 22, 23, 24, 25, 26, 27, 28, X29, X30}

// RegName returns the conventional name of a DWARF register number, or ""
// when there is none.
func RegName(r int) string {
	switch {
	case r >= 0 && r <= 28:
		return "x" + itoa(r)
	case r == X29:
		return "fp"
	case r == X30:
		return "lr"
	case r == SP:
		return "sp"
	case r == RAStateRegister:
		return "ra_sign_state"
	case r >= 64 && r <= 95:
		return "v" + itoa(r-64)
	}
	return ""
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}
