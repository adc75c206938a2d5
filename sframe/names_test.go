package sframe_test

import (
	"fmt"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestNames: the typed constants print as the specification names them,
// and unknown values as their type and number.
func TestNames(t *testing.T) {
	tests := []struct {
		v    fmt.Stringer
		want string
	}{
		{sframe.ABIAArch64BE, "SFRAME_ABI_AARCH64_ENDIAN_BIG"},
		{sframe.ABIAArch64LE, "SFRAME_ABI_AARCH64_ENDIAN_LITTLE"},
		{sframe.ABIAMD64LE, "SFRAME_ABI_AMD64_ENDIAN_LITTLE"},
		{sframe.ABIS390XBE, "SFRAME_ABI_S390X_ENDIAN_BIG"},
		{sframe.ABI(0), "ABI(0)"},
		{sframe.ABI(7), "ABI(7)"},
		{sframe.PCInc, "SFRAME_FDE_TYPE_PCINC"},
		{sframe.PCMask, "SFRAME_FDE_TYPE_PCMASK"},
		{sframe.PCType(2), "PCType(2)"},
	}
	for _, tt := range tests {
		if got := tt.v.String(); got != tt.want {
			t.Errorf("%T %d: %q, want %q", tt.v, tt.v, got, tt.want)
		}
	}
}
