package verify

import (
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/cfiexpr"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// locKind is the shared vocabulary both sides are reduced to.
type locKind uint8

const (
	kSame   locKind = iota // the register still holds the value
	kUndef                 // no value: outermost frame
	kMem                   // saved in memory at base+off
	kVal                   // the value is base+off
	kReg                   // the value is in register base
	kOpaque                // a rule SFrame cannot express (text says which)
	kAny                   // SFrame does not describe it (RA undefined rows carry no FP)
)

// cfaBase stands for "the CFA" as a base.
const cfaBase = ^uint64(0)

type loc struct {
	kind locKind
	base uint64
	off  int64
	text string
}

func (a loc) equal(b loc) bool {
	if a.kind == kAny || b.kind == kAny {
		return true
	}
	if a.kind == kOpaque || b.kind == kOpaque {
		return false
	}
	return a.kind == b.kind && a.base == b.base && a.off == b.off
}

// moved is a location relative to the CFA as it is when the CFA moves up
// by shift; other locations are unchanged.
func (a loc) moved(shift int64) loc {
	if shift != 0 && a.base == cfaBase && (a.kind == kMem || a.kind == kVal) {
		a.off -= shift
	}
	return a
}

// cfaShift is how far translate moves the CFA of row (0: not at all): on
// s390x, when the caller's SP is val_offset(N) from a register-based CFA
// with N not the ABI's -160 (Go's linker's rows), the CFA goes N+160 up,
// where the ABI has it.
func (c *checker) cfaShift(row *cfi.Row) int64 {
	if c.arch != arch.S390X || row.CFA.Kind != cfi.CFARegOffset {
		return 0
	}
	sp := row.Rule(c.sp)
	if sp.Kind != cfi.ValOffset || sp.Offset == c.arch.CallerSPOffset() {
		return 0
	}
	return sp.Offset - c.arch.CallerSPOffset()
}

func (c *checker) regName(r uint64) string {
	if r == cfaBase {
		return "c"
	}
	return c.arch.RegName(r)
}

func (l loc) String(c *checker) string {
	switch l.kind {
	case kSame:
		return "u"
	case kUndef:
		return "undefined"
	case kMem:
		if l.base == cfaBase {
			return fmt.Sprintf("c%+d", l.off)
		}
		return fmt.Sprintf("[%s%+d]", c.regName(l.base), l.off)
	case kVal:
		if l.base == cfaBase {
			return fmt.Sprintf("=c%+d", l.off)
		}
		return fmt.Sprintf("%s%+d", c.regName(l.base), l.off)
	case kReg:
		return c.regName(l.base)
	case kAny:
		return "-"
	}
	return l.text
}

// sframeLoc reduces an SFrame location: of the CFA (cfa), the return
// address (ra) or the frame pointer (neither).
func (c *checker) sframeLoc(l sframe.Loc, cfa, ra bool) loc {
	switch l.Kind {
	case sframe.LocUnsaved:
		return loc{kind: kSame}
	case sframe.LocFixed:
		return loc{kind: kMem, base: cfaBase, off: int64(l.Offset)}
	case sframe.LocDefault:
		// The ABI's default place: AMD64's fixed slot; on AArch64 and
		// s390x the RA is still in its register (LR, r14).
		if off := c.arch.FixedRAOffset(); ra && off != 0 {
			return loc{kind: kMem, base: cfaBase, off: off}
		}
		return loc{kind: kSame}
	case sframe.LocCFA:
		return loc{kind: kMem, base: cfaBase, off: int64(l.Offset)}
	case sframe.LocCFAValue:
		return loc{kind: kVal, base: cfaBase, off: int64(l.Offset)}
	case sframe.LocReg:
		if !cfa && l.Offset == 0 {
			return loc{kind: kReg, base: uint64(l.Reg)}
		}
		return loc{kind: kVal, base: uint64(l.Reg), off: int64(l.Offset)}
	case sframe.LocRegDeref:
		return loc{kind: kMem, base: uint64(l.Reg), off: int64(l.Offset)}
	}
	return loc{kind: kOpaque, text: fmt.Sprintf("sframe location kind %d", l.Kind)}
}

func (c *checker) sframeRA(r sframe.Rule) loc {
	if r.RAUndefined {
		return loc{kind: kUndef}
	}
	return c.sframeLoc(r.RA, false, true)
}

// cfiCFA reduces the CFI's CFA rule at pc.
func (c *checker) cfiCFA(row *cfi.Row, pc uint64) loc {
	switch row.CFA.Kind {
	case cfi.CFARegOffset:
		return loc{kind: kVal, base: row.CFA.Reg, off: row.CFA.Offset}
	case cfi.CFAExpression:
		if p, ok := cfiexpr.ParsePLTExpr(row.CFA.Expr); ok {
			off := p.SPOffset
			if pc&uint64(p.Mask) >= uint64(p.Threshold) {
				off += int64(p.Extra)
			}
			return loc{kind: kVal, base: c.sp, off: off}
		}
		if e, ok := cfiexpr.ParseSimpleExpr(row.CFA.Expr); ok {
			if e.Deref {
				return loc{kind: kMem, base: e.Reg, off: e.Offset}
			}
			return loc{kind: kVal, base: e.Reg, off: e.Offset}
		}
		return loc{kind: kOpaque, text: fmt.Sprintf("expression % x", row.CFA.Expr)}
	}
	return loc{kind: kOpaque, text: "unknown CFA rule"}
}

// cfiReg reduces the CFI rule of register reg.
func (c *checker) cfiReg(row *cfi.Row, t *cfi.Table, reg uint64) loc {
	if reg == c.ra && t.FDE.CIE.RAColumn != c.ra {
		return loc{kind: kOpaque, text: fmt.Sprintf("return column %d", t.FDE.CIE.RAColumn)}
	}
	r := row.Rule(reg)
	switch r.Kind {
	case cfi.SameValue:
		return loc{kind: kSame}
	case cfi.Undefined:
		return loc{kind: kUndef}
	case cfi.Offset:
		return loc{kind: kMem, base: cfaBase, off: r.Offset}
	case cfi.ValOffset:
		return loc{kind: kVal, base: cfaBase, off: r.Offset}
	case cfi.Register:
		if r.Reg == reg {
			return loc{kind: kSame}
		}
		return loc{kind: kReg, base: r.Reg}
	case cfi.Expression:
		if e, ok := cfiexpr.ParseSimpleExpr(r.Expr); ok && !e.Deref {
			return loc{kind: kMem, base: e.Reg, off: e.Offset}
		}
		return loc{kind: kOpaque, text: fmt.Sprintf("expression % x", r.Expr)}
	case cfi.ValExpression:
		if e, ok := cfiexpr.ParseSimpleExpr(r.Expr); ok {
			if e.Deref {
				return loc{kind: kMem, base: e.Reg, off: e.Offset}
			}
			return loc{kind: kVal, base: e.Reg, off: e.Offset}
		}
		return loc{kind: kOpaque, text: fmt.Sprintf("val_expression % x", r.Expr)}
	}
	return loc{kind: kOpaque, text: "unknown rule"}
}
