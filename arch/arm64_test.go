package arch

import "testing"

func TestRegNameARM64(t *testing.T) {
	for r, want := range map[uint64]string{0: "x0", 19: "x19", 29: "fp", 30: "lr", 31: "sp", 34: "ra_sign_state", 72: "v8", 50: "r50"} {
		if got := ARM64.RegName(r); got != want {
			t.Errorf("RegName(%d) = %q, want %q", r, got, want)
		}
	}
}
