package arch

// AArch64 DWARF register numbers (DWARF for the Arm 64-bit Architecture,
// 4.1).
const (
	arm64X29 = 29 // frame pointer
	arm64X30 = 30 // link register: the return address column
	arm64SP  = 31
	// arm64RAState is the pseudo-register that
	// DW_CFA_AARCH64_negate_ra_state toggles: 1 while the return address
	// is signed.
	arm64RAState = 34
)

func arm64RegName(r uint64) string {
	switch {
	case r <= 28:
		return "x" + itoa(int(r))
	case r == arm64X29:
		return "fp"
	case r == arm64X30:
		return "lr"
	case r == arm64SP:
		return "sp"
	case r == arm64RAState:
		return "ra_sign_state"
	case r >= 64 && r <= 95:
		return "v" + itoa(int(r-64))
	}
	return ""
}
