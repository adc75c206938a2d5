package pltsim

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
	if !HasHeader(arch.S390X, static) {
		t.Error("s390x .plt sections start with PLT0")
	}
	// AArch64: GNU ld's and lld's PLT0 (stp x16, x30, [sp, #-16]!; adrp
	// x16, ...), with bti c first; a static executable's GNU ld .plt
	// starts with an IRELATIVE stub (adrp x16; ldr x17; add x16; br x17).
	le := func(ws ...uint32) []byte {
		var b []byte
		for _, w := range ws {
			b = append(b, byte(w), byte(w>>8), byte(w>>16), byte(w>>24))
		}
		return b
	}
	a64plt0 := le(0xa9bf7bf0, 0x90000490)
	a64bti := le(0xd503245f, 0xa9bf7bf0)
	a64static := le(0x90000490, 0xf9400211, 0x91000210, 0xd61f0220)
	if !HasHeader(arch.ARM64, a64plt0) || !HasHeader(arch.ARM64, a64bti) || HasHeader(arch.ARM64, a64static) || HasHeader(arch.ARM64, nil) {
		t.Errorf("HasHeader(ARM64): %v %v %v, want true true false", HasHeader(arch.ARM64, a64plt0), HasHeader(arch.ARM64, a64bti), HasHeader(arch.ARM64, a64static))
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
