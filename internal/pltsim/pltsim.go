// Package pltsim simulates the instructions of the PLT stubs GNU ld and
// LLVM lld emit to derive their frames, for translate's PLT rows (the
// sections come from internal/pltfind). It knows only
// what the linkers' stubs contain and refuses anything else, so that an
// unfamiliar stub is never described by a guess.
package pltsim

import (
	"errors"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

// A Step says that from byte Off of a PLT stub on, until the next step,
// the CFA is SP+CFAOffset, and the return address is at CFA+RAOffset, or,
// when RAOffset is 0, where it is at a function's entry (the Arch's
// FixedRAOffset, or its RA register).
type Step struct {
	Off       uint32
	CFAOffset int32
	RAOffset  int32
}

// Simulate follows the instructions of one PLT stub of a and returns where
// its frame changes; header says the stub is a PLT's header (PLT0), which
// the entries reach by a jump, having pushed more on x86-64.
func Simulate(a *arch.Arch, code []byte, header bool) ([]Step, error) {
	// At a function's entry the SP is the caller's SP less what the call
	// pushed (the return address at its fixed slot), so the CFA is
	// SP+8 on x86-64, SP+160 on s390x (its caller's SP offset) and SP on
	// AArch64.
	entryCFA := int32(-(a.CallerSPOffset() + a.FixedRAOffset()))
	switch a {
	case arch.AMD64:
		return amd64Simulate(code, entryCFA, header)
	case arch.ARM64:
		return arm64Simulate(code, entryCFA, header)
	case arch.S390X:
		return s390xSimulate(code, entryCFA, header)
	}
	return nil, errors.New("no PLT stubs known for " + a.String())
}

// HasHeader reports whether the code of a .plt section of a starts with
// PLT0, the lazy binder's stub. A static executable's .plt has none, only
// the stubs that IFUNCs are called through, bound by IRELATIVE relocations
// at startup: GNU ld's on x86-64 and AArch64 (LLVM lld puts those in
// .iplt). AArch64's PLT0 starts by pushing x16 and x30 (after a bti c
// with BTI); an IRELATIVE stub with adrp. s390x's .plt always has one.
func HasHeader(a *arch.Arch, code []byte) bool {
	switch a {
	case arch.AMD64:
		return amd64LazyHeader(code)
	case arch.ARM64:
		return arm64LazyHeader(code)
	}
	return true
}

// errAllZero refuses a stub of zero bytes (or none): a section the linker
// reserved but did not fill.
var errAllZero = errors.New("all zero")

func allZero(code []byte) bool {
	for _, b := range code {
		if b != 0 {
			return false
		}
	}
	return true
}
