package trace

import (
	"fmt"
	"math"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/cfiexpr"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// checker steps one frame with the object's DWARF CFI, as a DWARF
// unwinder does: the FDE holding the PC, its program executed up to the
// PC, then the CFA and the return address, SP and FP rules applied.
type checker struct {
	mem *pageMem
	ctx cfi.Context
	tab cfi.Table
}

// dwarfAnswer is the caller frame DWARF CFI gives, or why there is none.
type dwarfAnswer struct {
	ok        bool
	outermost bool   // the return address column is undefined
	goTop     bool   // outermost: a Go function the runtime's unwinder ends at, which Go's .debug_frame does not say
	goNoFP    bool   // fpKnown is false: Go's .debug_frame has no frame-pointer rule
	fail      string // why DWARF could not step
	pc        uint64
	sp, fp    uint64
	fpKnown   bool
}

func (a dwarfAnswer) String() string {
	switch {
	case a.outermost:
		return "outermost (RA undefined)"
	case !a.ok:
		return a.fail
	}
	fp := "?"
	if a.fpKnown {
		fp = fmt.Sprintf("%#x", a.fp)
	}
	return fmt.Sprintf("pc %#x sp %#x fp %s", a.pc, a.sp, fp)
}

// The registers of x86-64, the one architecture trace samples.
var (
	regFP = uint64(arch.AMD64.FP())
	regSP = uint64(arch.AMD64.SP())
)

// step computes f's caller with DWARF CFI; addr is the looked-up address
// (f.PC, minus one unless f is topmost).
func (k *checker) step(o *Object, bias uint64, f *unwind.Frame, addr uint64) dwarfAnswer {
	fail := func(s string) dwarfAnswer { return dwarfAnswer{fail: s} }
	if o.fdes == nil {
		return fail("no DWARF CFI")
	}
	fa := addr - bias
	fde := o.findFDE(fa)
	if fde == nil {
		return fail("no DWARF FDE")
	}
	if err := k.ctx.Execute(fde, &k.tab); err != nil {
		return fail("DWARF program error")
	}
	i := k.tab.RowAt(fa)
	if i < 0 {
		return fail("no DWARF row")
	}
	row := &k.tab.Rows[i]
	top, goFunc := o.goFuncs[fde.Start]
	if top {
		return dwarfAnswer{outermost: true, goTop: true}
	}
	reg := func(n uint64) (uint64, bool) {
		if n > math.MaxUint32 {
			return 0, false
		}
		return f.Reg(uint32(n)) // false beyond the registers a Frame tracks
	}
	var cfa uint64
	switch row.CFA.Kind {
	case cfi.CFARegOffset:
		v, ok := reg(row.CFA.Reg)
		if !ok {
			return fail(fmt.Sprintf("CFA register %d unknown", row.CFA.Reg))
		}
		cfa = v + uint64(row.CFA.Offset)
	default:
		if e, ok := cfiexpr.ParseSimpleExpr(row.CFA.Expr); ok {
			v, ok := reg(e.Reg)
			if !ok {
				return fail(fmt.Sprintf("CFA register %d unknown", e.Reg))
			}
			cfa = v + uint64(e.Offset)
			if e.Deref {
				if cfa, ok = k.mem.ReadWord(cfa); !ok {
					return fail("DWARF read failed")
				}
			}
		} else if p, ok := cfiexpr.ParsePLTExpr(row.CFA.Expr); ok {
			sp, ok1 := reg(p.SPReg)
			if !ok1 || p.PCReg != uint64(arch.AMD64.RA()) {
				return fail("PLT CFA register unknown")
			}
			cfa = sp + uint64(p.SPOffset)
			if uint8(f.PC)&p.Mask >= p.Threshold {
				cfa += p.Extra
			}
		} else {
			return fail("CFA expression")
		}
	}
	// apply gives a register's caller value under rule r.
	apply := func(n uint64, r cfi.Rule) (v uint64, known bool, why string) {
		switch r.Kind {
		case cfi.SameValue:
			v, known = reg(n)
			return v, known, ""
		case cfi.Undefined:
			return 0, false, ""
		case cfi.Offset:
			v, ok := k.mem.ReadWord(cfa + uint64(r.Offset))
			if !ok {
				return 0, false, "DWARF read failed"
			}
			return v, true, ""
		case cfi.ValOffset:
			return cfa + uint64(r.Offset), true, ""
		case cfi.Register:
			v, known = reg(r.Reg)
			if !known {
				return 0, false, fmt.Sprintf("register %d unknown", r.Reg)
			}
			return v, true, ""
		case cfi.Expression, cfi.ValExpression:
			e, ok := cfiexpr.ParseSimpleExpr(r.Expr)
			if !ok {
				return 0, false, "register expression"
			}
			b, ok := reg(e.Reg)
			if !ok {
				return 0, false, fmt.Sprintf("register %d unknown", e.Reg)
			}
			a := b + uint64(e.Offset)
			if e.Deref {
				if a, ok = k.mem.ReadWord(a); !ok {
					return 0, false, "DWARF read failed"
				}
			}
			if r.Kind == cfi.ValExpression {
				return a, true, ""
			}
			v, ok := k.mem.ReadWord(a)
			if !ok {
				return 0, false, "DWARF read failed"
			}
			return v, true, ""
		}
		return 0, false, "unknown rule"
	}
	raCol := fde.CIE.RAColumn
	raRule := row.Rule(raCol)
	if raRule.Kind == cfi.Undefined {
		return dwarfAnswer{outermost: true}
	}
	ra, ok, why := apply(raCol, raRule)
	if !ok {
		if why == "" {
			why = "RA unknown"
		}
		return fail(why)
	}
	a := dwarfAnswer{ok: true, pc: ra, sp: cfa}
	if r := row.Rule(regSP); r.Kind != cfi.SameValue {
		sp, ok, why := apply(regSP, r)
		if !ok {
			return fail("SP: " + why)
		}
		a.sp = sp
	}
	switch {
	case goFunc && !hasRule(row, regFP):
		a.goNoFP = true
	default:
		a.fp, a.fpKnown, why = apply(regFP, row.Rule(regFP))
		if why != "" {
			return fail("FP: " + why)
		}
	}
	if ra == 0 {
		return dwarfAnswer{outermost: true}
	}
	return a
}

// hasRule says whether row has a rule of its own for register n, not the
// same value every register without one has.
func hasRule(row *cfi.Row, n uint64) bool {
	for _, r := range row.Regs {
		if r.Reg == n {
			return true
		}
	}
	return false
}

// compare records how SFrame's step of frame prev (to next, or stopping
// with why) agrees with DWARF's answer dw.
func (c *Collector) compare(m *execMap, addr uint64, prev *unwind.Frame, why unwind.Reason, next *unwind.Frame, dw dwarfAnswer) {
	st := &c.CheckStats
	sfOK := why == unwind.ReasonOK
	sfOuter := why == unwind.ReasonOutermost
	dwOK := dw.ok
	switch {
	case why == unwind.ReasonNoObject:
		// No SFrame to compare (an object without .sframe): the walk
		// stop is reported as such.
		st.NoSFrame++
		return
	case !sfOK && !sfOuter && !dwOK && !dw.outermost:
		st.NeitherStepped++
		return
	case (sfOK || sfOuter) && !dwOK && !dw.outermost && dw.fail != "no DWARF FDE" && dw.fail != "no DWARF CFI" && dw.fail != "":
		// The DWARF rule is one this checker does not evaluate.
		st.SFrameOnly++
		st.DWARFFail[dw.fail]++
		return
	}
	nextSP, _ := next.Reg(arch.AMD64.SP()) // a caller frame knows its SP
	agree := false
	switch {
	case sfOuter && dw.outermost:
		agree = true
	case sfOK && dwOK:
		agree = next.PC == dw.pc && nextSP == dw.sp
		if dw.fpKnown {
			v, known := next.Reg(arch.AMD64.FP())
			agree = agree && known && v == dw.fp
		}
	}
	if agree {
		st.Agree++
		if dw.goTop {
			st.GoOutermost++
		}
		if dw.goNoFP {
			st.GoNoFP++
		}
		return
	}
	st.Disagree++
	d := disagreement{PC: addr, SFrame: why.String()}
	if m != nil && m.obj != nil {
		d.Obj, d.PC, d.Func = m.obj.Path, addr-m.bias, m.obj.Symbolize(addr-m.bias)
	}
	if sfOK {
		fp := "?"
		if v, ok := next.Reg(arch.AMD64.FP()); ok {
			fp = fmt.Sprintf("%#x", v)
		}
		d.SFrame = fmt.Sprintf("pc %#x sp %#x fp %s", next.PC, nextSP, fp)
	} else if sfOuter {
		d.SFrame = "outermost"
	}
	d.DWARF = dw.String()
	if dw.fail == "" && !dw.ok && !dw.outermost {
		d.DWARF = "no DWARF CFI for the object"
	}
	c.Disagree[d]++
}
