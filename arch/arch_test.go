package arch

import (
	"debug/elf"
	"encoding/binary"
	"testing"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		a      *Arch
		m      elf.Machine
		le, be uint8
	}{
		{AMD64, elf.EM_X86_64, 3, 3},
		{ARM64, elf.EM_AARCH64, 2, 1},
		{S390X, elf.EM_S390, 4, 4},
	} {
		if got := ForMachine(tc.m); got != tc.a {
			t.Errorf("ForMachine(%v) = %v, want %v", tc.m, got, tc.a)
		}
		if got := tc.a.machine; got != tc.m {
			t.Errorf("%v: machine %v, want %v", tc.a, got, tc.m)
		}
		le, be := tc.a.SFrameABI(binary.LittleEndian), tc.a.SFrameABI(binary.BigEndian)
		if le != tc.le || be != tc.be {
			t.Errorf("%v: SFrame ABI %d LE, %d BE; want %d, %d", tc.a, le, be, tc.le, tc.be)
		}
		if ForSFrameABI(le) != tc.a || ForSFrameABI(be) != tc.a {
			t.Errorf("ForSFrameABI(%d/%d) is not %v", le, be, tc.a)
		}
	}
	if a := ForMachine(elf.EM_386); a != nil {
		t.Errorf("ForMachine(EM_386) = %v", a)
	}
	for _, id := range []uint8{0, 5, 255} {
		if a := ForSFrameABI(id); a != nil {
			t.Errorf("ForSFrameABI(%d) = %v", id, a)
		}
	}
}

// TestFacts pins the register numbers and offsets the ABIs define.
func TestFacts(t *testing.T) {
	for _, tc := range []struct {
		a                 *Arch
		sp, fp, ra        uint32
		callerSP, fixedRA int64
		pac               bool
		spName, raName    string
	}{
		{AMD64, 7, 6, 16, 0, -8, false, "rsp", "rip"},
		{ARM64, 31, 29, 30, 0, 0, true, "sp", "lr"},
		{S390X, 15, 11, 14, -160, 0, false, "r15", "r14"},
	} {
		a := tc.a
		if a.SP() != tc.sp || a.FP() != tc.fp || a.RA() != tc.ra {
			t.Errorf("%v: SP %d FP %d RA %d, want %d %d %d", a, a.SP(), a.FP(), a.RA(), tc.sp, tc.fp, tc.ra)
		}
		if a.CallerSPOffset() != tc.callerSP || a.FixedRAOffset() != tc.fixedRA || a.PointerAuth() != tc.pac {
			t.Errorf("%v: caller SP %d, fixed RA %d, PAC %v", a, a.CallerSPOffset(), a.FixedRAOffset(), a.PointerAuth())
		}
		if n := a.RegName(uint64(a.SP())); n != tc.spName {
			t.Errorf("%v: SP named %q, want %q", a, n, tc.spName)
		}
		if n := a.RegName(uint64(a.RA())); n != tc.raName {
			t.Errorf("%v: RA named %q, want %q", a, n, tc.raName)
		}
	}
}

// TestCFAOffset: DecodeCFAOffset inverts EncodeCFAOffset; only s390x
// scales.
func TestCFAOffset(t *testing.T) {
	for _, a := range all {
		for _, off := range []int64{0, 8, 16, 160, 168, 320, -24, 1 << 20} {
			w, ok := a.EncodeCFAOffset(off)
			if !ok {
				t.Errorf("%v: no encoding for %d", a, off)
				continue
			}
			if a != S390X && w != off {
				t.Errorf("%v: %d encoded as %d", a, off, w)
			}
			if got := a.DecodeCFAOffset(int32(w)); int64(got) != off {
				t.Errorf("%v: %d -> %d -> %d", a, off, w, got)
			}
		}
		if _, ok := a.EncodeCFAOffset(12); ok != (a != S390X) {
			t.Errorf("%v: EncodeCFAOffset(12) ok %v", a, ok)
		}
	}
}
