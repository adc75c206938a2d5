package sframe_test

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// lookupSection decodes lookupBytes.
func lookupSection(t testing.TB) *sfsection.Section {
	s, err := sfsection.Decode(lookupBytes(t), 0x500)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lookupBytes builds a sorted AMD64 V3 section at 0x500: a normal function
// at 0x1000 and a PLT-style PCMask function at 0x2000 (16-byte blocks).
func lookupBytes(t testing.TB) []byte {
	sp := arch.AMD64.SP()
	fp := arch.AMD64.FP()
	funcs := []sframe.Function{
		{Start: 0x2000, Size: 0x40, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{
			{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed}},
			{Start: 11, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 16}, RA: sframe.Loc{Kind: sframe.LocFixed}},
		}},
		{Start: 0x1000, Size: 0x20, Signal: true, Rows: []sframe.Row{
			{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed}},
			{Start: 1, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 16}, RA: sframe.Loc{Kind: sframe.LocFixed}, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -16}},
			{Start: 4, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: fp, Offset: 16}, RA: sframe.Loc{Kind: sframe.LocFixed}, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -16}},
			{Start: 0x1f, RAUndefined: true},
		}},
	}
	b, err := sframe.Encode(funcs, sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian,
		Addr: 0x500, PCRel: true, Sort: true, CFAFixedRA: -8})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLookup: the rules at the PCs of lookupSection, from a sorted and an
// unsorted index.
func TestLookup(t *testing.T) {
	s := lookupSection(t)
	fp := arch.AMD64.FP()
	tests := []struct {
		pc       uint64
		err      error
		cfaReg   uint32
		cfaOff   int32
		fpKind   sframe.LocKind
		undef    bool
		signal   bool
		freStart uint32
	}{
		{pc: 0xfff, err: sframe.ErrNoFDE},
		{pc: 0x1000, cfaReg: 7, cfaOff: 8, fpKind: sframe.LocUnsaved, signal: true},
		{pc: 0x1003, cfaReg: 7, cfaOff: 16, fpKind: sframe.LocCFA, signal: true, freStart: 1},
		{pc: 0x1004, cfaReg: fp, cfaOff: 16, fpKind: sframe.LocCFA, signal: true, freStart: 4},
		{pc: 0x101f, undef: true, signal: true, freStart: 0x1f},
		{pc: 0x1020, err: sframe.ErrNoFDE},
		{pc: 0x2005, cfaReg: 7, cfaOff: 8},
		{pc: 0x201b, cfaReg: 7, cfaOff: 16, freStart: 11},
		{pc: 0x2031, cfaReg: 7, cfaOff: 8},
		{pc: 0x2040, err: sframe.ErrNoFDE},
	}
	o := s.Options()
	for _, sorted := range []bool{true, false} {
		o.Sort = sorted
		b, err := sframe.Encode(s.Functions(), o)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables(t, b, o.Addr) {
			for _, tt := range tests {
				r, err := tb.Lookup(tt.pc)
				if err != tt.err {
					t.Errorf("sorted=%v: Lookup(%#x) error %v, want %v", sorted, tt.pc, err, tt.err)
					continue
				}
				if err != nil {
					continue
				}
				if r.RAUndefined != tt.undef || r.Signal != tt.signal || r.Start != tt.freStart {
					t.Errorf("Lookup(%#x) = undef %v signal %v start %d, want %v %v %d", tt.pc, r.RAUndefined, r.Signal, r.Start, tt.undef, tt.signal, tt.freStart)
				}
				if tt.undef {
					continue
				}
				if r.CFA.Reg != tt.cfaReg || r.CFA.Offset != tt.cfaOff || r.FP.Kind != tt.fpKind || r.RA.Kind != sframe.LocFixed {
					t.Errorf("Lookup(%#x) = CFA r%d%+d FP kind %d RA kind %d", tt.pc, r.CFA.Reg, r.CFA.Offset, r.FP.Kind, r.RA.Kind)
				}
			}
		}
	}
}
