package arch

import "testing"

func TestRegNameS390X(t *testing.T) {
	for r, want := range map[uint64]string{0: "r0", 11: "r11", 15: "r15", 16: "f0", 17: "f2", 20: "f1", 24: "f8", 31: "f15", 32: "r32", 1 << 40: "r1099511627776"} {
		if got := S390X.RegName(r); got != want {
			t.Errorf("RegName(%d) = %q, want %q", r, got, want)
		}
	}
}

func TestEncodeCFAOffsetS390X(t *testing.T) {
	for _, tc := range []struct {
		off  int64
		want int64
		ok   bool
	}{
		{160, 0, true}, {320, 20, true}, {200320, 25020, true}, {0, -20, true}, {164, 0, false}, {161, 0, false},
	} {
		got, ok := S390X.EncodeCFAOffset(tc.off)
		if got != tc.want || ok != tc.ok {
			t.Errorf("EncodeCFAOffset(%d) = %d, %v; want %d, %v", tc.off, got, ok, tc.want, tc.ok)
		}
	}
}
