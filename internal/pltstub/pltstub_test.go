package pltstub

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

func TestHasHeader(t *testing.T) {
	plt0 := []byte{0xff, 0x35, 0xca, 0x2f, 0, 0}
	ibt := []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x35, 0, 0, 0, 0}
	static := []byte{0xff, 0x25, 0x8a, 0x2f, 0, 0, 0x66, 0x90}
	a := arch.AMD64
	if !HasHeader(a, plt0) || !HasHeader(a, ibt) || HasHeader(a, static) {
		t.Errorf("HasHeader(AMD64): %v %v %v, want true true false", HasHeader(a, plt0), HasHeader(a, ibt), HasHeader(a, static))
	}
	if !HasHeader(arch.ARM64, static) || !HasHeader(arch.S390X, static) {
		t.Error("AArch64 and s390x .plt sections start with PLT0")
	}
}

func TestAllZeroStub(t *testing.T) {
	for _, a := range []*arch.Arch{arch.ARM64, arch.S390X} {
		if _, err := Simulate(a, make([]byte, 16), false); err != errAllZero {
			t.Errorf("%v: zero stub: %v", a, err)
		}
	}
}

// checkSteps checks what Simulate gave: an error when wantErr, else the
// steps want.
func checkSteps(t *testing.T, got []Step, err error, want []Step, wantErr bool) {
	t.Helper()
	if wantErr {
		if err == nil {
			t.Fatalf("Simulate = %v, want an error", got)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("steps (-want +got):\n%s", d)
	}
}
