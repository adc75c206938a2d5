package sframe_test

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// lookupSection builds a sorted AMD64 V3 section: a normal function at
// 0x1000 and a PLT-style PCMask function at 0x2000 (16-byte blocks).
func lookupSection(t testing.TB) *sframe.Section {
	sp := sframe.SPReg(sframe.ABIAMD64LE)
	fp := sframe.FPReg(sframe.ABIAMD64LE)
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
	s, err := sframe.Decode(b, 0x500)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFindFRE(t *testing.T) {
	s := lookupSection(t)
	fp := sframe.FPReg(sframe.ABIAMD64LE)
	tests := []struct {
		pc       uint64
		ok       bool
		cfaReg   uint32
		cfaOff   int32
		fpKind   sframe.LocKind
		undef    bool
		signal   bool
		freStart uint32
	}{
		{pc: 0xfff, ok: false},
		{pc: 0x1000, ok: true, cfaReg: 7, cfaOff: 8, fpKind: sframe.LocUnsaved, signal: true},
		{pc: 0x1003, ok: true, cfaReg: 7, cfaOff: 16, fpKind: sframe.LocCFA, signal: true, freStart: 1},
		{pc: 0x1004, ok: true, cfaReg: fp, cfaOff: 16, fpKind: sframe.LocCFA, signal: true, freStart: 4},
		{pc: 0x101f, ok: true, undef: true, signal: true, freStart: 0x1f},
		{pc: 0x1020, ok: false},
		{pc: 0x2005, ok: true, cfaReg: 7, cfaOff: 8},
		{pc: 0x201b, ok: true, cfaReg: 7, cfaOff: 16, freStart: 11},
		{pc: 0x2031, ok: true, cfaReg: 7, cfaOff: 8},
		{pc: 0x2040, ok: false},
	}
	for _, tt := range tests {
		r, ok := s.FindFRE(tt.pc)
		if ok != tt.ok {
			t.Errorf("FindFRE(%#x) ok = %v, want %v", tt.pc, ok, tt.ok)
			continue
		}
		if !ok {
			continue
		}
		if r.RAUndefined != tt.undef || r.Signal != tt.signal || r.FREStart != tt.freStart {
			t.Errorf("FindFRE(%#x) = undef %v signal %v start %d, want %v %v %d", tt.pc, r.RAUndefined, r.Signal, r.FREStart, tt.undef, tt.signal, tt.freStart)
		}
		if tt.undef {
			continue
		}
		if r.CFA.Reg != tt.cfaReg || r.CFA.Offset != tt.cfaOff || r.FP.Kind != tt.fpKind || r.RA.Kind != sframe.LocFixed {
			t.Errorf("FindFRE(%#x) = CFA r%d%+d FP kind %d RA kind %d", tt.pc, r.CFA.Reg, r.CFA.Offset, r.FP.Kind, r.RA.Kind)
		}
	}
	// The same answers from an unsorted section (linear search).
	s.Header.Flags &^= sframe.FlagFDESorted
	for _, tt := range tests {
		if _, ok := s.FindFRE(tt.pc); ok != tt.ok {
			t.Errorf("unsorted FindFRE(%#x) ok = %v, want %v", tt.pc, ok, tt.ok)
		}
	}
}

func TestFindFREAllocs(t *testing.T) {
	s := lookupSection(t)
	n := testing.AllocsPerRun(100, func() {
		s.FindFRE(0x1004)
		s.FindFRE(0x2031)
	})
	if n != 0 {
		t.Errorf("FindFRE allocates %v times per run", n)
	}
}

func BenchmarkFindFRE(b *testing.B) {
	s := lookupSection(b)
	pcs := []uint64{0x1000, 0x1004, 0x101f, 0x2031, 0x3000}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.FindFRE(pcs[i%len(pcs)])
	}
}
