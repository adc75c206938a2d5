package verify

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// pltExpr is the x86-64 lazy-PLT CFA expression:
// rsp+8 + (((rip & 15) >= 11) << 3).
var pltExpr = []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}

// hugePCMask is a section with one PCMASK function of 0xffffffff bytes
// (16-byte blocks: CFA rsp+8, from byte 11 rsp+16; or with pc set, the same
// rows once, from its start) and a CFI table for the same range whose CFA
// rule is cfa.
func hugePCMask(t *testing.T, cfa cfi.CFA, pc sframe.PCType) input {
	t.Helper()
	sp := arch.AMD64.SP()
	const start, size = 0x2000, 0xffffffff
	funcs := []sframe.Function{{Start: start, Size: size, PCType: pc, RepSize: 16, Rows: []sframe.Row{
		{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed}},
		{Start: 11, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 16}, RA: sframe.Loc{Kind: sframe.LocFixed}},
	}}}
	b, err := sframe.Encode(funcs, sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, PCRel: true, Sort: true, CFAFixedRA: -8})
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	fde := &cfi.FDE{Start: start, Size: size, CIE: &cfi.CIE{RAColumn: 16, CodeAlign: 1, DataAlign: -8}}
	tab := &cfi.Table{FDE: fde, Rows: []cfi.Row{{Loc: start, CFA: cfa, Regs: []cfi.RegRule{{Reg: 16, Rule: cfi.Rule{Kind: cfi.Offset, Offset: -8}}}}}}
	return input{Machine: 62, SFrame: tb, Tables: []*cfi.Table{tab}}
}

// TestPCMaskHuge: a 4 GiB PCMASK function is checked by its repeat block,
// not PC by PC (which took 32 GB and hours): agreeing CFI gives no
// finding, disagreeing CFI one finding that says it recurs.
func TestPCMaskHuge(t *testing.T) {
	r := check(hugePCMask(t, cfi.CFA{Kind: cfi.CFAExpression, Expr: pltExpr}, sframe.PCMask))
	if !r.Agree || len(r.Findings) != 0 || r.Checked != 0xffffffff {
		t.Fatalf("PLT expression against PCMASK: %+v", r)
	}
	r = check(hugePCMask(t, cfi.CFA{Kind: cfi.CFARegOffset, Reg: 7, Offset: 8}, sframe.PCMask))
	if r.Agree || len(r.Findings) != 1 {
		t.Fatalf("constant CFA against PCMASK: want one disagreement, got %+v", r.Findings)
	}
	f := r.Findings[0]
	if f.What != "CFA" || f.PC != 0x2000+11 || f.End != 0x2000+16 || f.Every != 16 || f.Until != 0x2000+0xffffffff {
		t.Errorf("finding %+v: want CFA at [0x200b,0x2010) every 16 bytes up to the end", f)
	}
	// An RA that disagrees at every PC is one run over the whole function.
	in := hugePCMask(t, cfi.CFA{Kind: cfi.CFAExpression, Expr: pltExpr}, sframe.PCMask)
	in.Tables[0].Rows[0].Regs[0].Rule.Offset = -16
	r = check(in)
	if len(r.Findings) != 1 || r.Findings[0].PC != 0x2000 || r.Findings[0].End != 0x2000+0xffffffff || r.Findings[0].Every != 0 {
		t.Errorf("RA wrong everywhere: %+v", r.Findings)
	}
}

// TestPLTExprPeriodic: a PC-incremented SFrame function over a CFI row
// with the PLT expression is checked over 32 bytes and the rest follows.
func TestPLTExprPeriodic(t *testing.T) {
	in := hugePCMask(t, cfi.CFA{Kind: cfi.CFAExpression, Expr: pltExpr}, sframe.PCInc)
	r := check(in)
	// The SFrame side now says rsp+16 from byte 11 to the end; the CFI
	// says rsp+8 in bytes 0-10 of every 16: two runs in the 32-byte window
	// that starts at the FRE boundary 0x200b.
	if r.Agree || len(r.Findings) != 2 {
		t.Fatalf("findings %+v", r.Findings)
	}
	for i, f := range r.Findings {
		if lo := uint64(0x2010 + 16*i); f.Every != 32 || f.PC != lo || f.End != lo+11 || f.Until != 0x2000+0xffffffff {
			t.Errorf("finding %+v", f)
		}
	}
}
