package translate

import (
	"fmt"
	"math"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/cfiexpr"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// maxFlexReg is the largest register number a flexible FDE control word
// may name: the kernel's unwinder reads 5 bits of it (internal/acceptance/kernel.go).
// sid's gas writes larger ones too (an s390x access register, DWARF 48-63,
// as r49), which the kernel would read as another register; such rules
// are skipped here.
const maxFlexReg = 31

func fitsInt32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

// row translates one CFI row into *r (zero on entry). flexWhy is set when
// the row needs a flexible FDE (it says what needs it, for the diagnostic
// when none may be used); d is set when the row cannot be described at
// all.
//
// argsSet says the row is where DW_CFA_GNU_args_size set its (non-zero)
// size; like GNU as, the size matters only there, and only when the CFA is
// SP-based at that point.
func (a *abi) row(cr *cfi.Row, argsSet bool, r *sframe.Row) (flexWhy, d *Diagnostic) {
	pc := cr.Loc
	if cr.RAStateWithPC {
		return nil, skip(pc, RAStateWithPC, "DW_CFA_AARCH64_negate_ra_state_with_pc")
	}
	r.MangledRA = a.arch.PointerAuth() && cr.MangledRA

	// Return address. Undefined marks the outermost frame: an FRE without
	// data words, whatever the other rules say.
	raRule, sp, fpRule, raListed := a.rowRules(cr)
	if raRule.Kind == cfi.Undefined {
		r.RAUndefined = true
		return nil, nil
	}

	// Stack pointer: SFrame assumes SP = CFA in the caller, or on s390x
	// SP = CFA-160 (the CFA is defined as the SP at the call site plus
	// 160), so that the caller's SP is known whatever else says where it
	// was saved: s390x code saves r15 with the other registers (stmg) or in
	// a floating-point register, and GNU as passes over both rules.
	cfa := cr.CFA
	switch sp.Kind {
	case cfi.SameValue:
	case cfi.ValOffset:
		if sp.Offset != a.spValOffset() {
			var ok bool
			if cfa, raRule, fpRule, ok = a.rebase(cr.CFA, sp.Offset, raRule, fpRule); !ok {
				return nil, skip(pc, SPRule, "%s = CFA%+d", a.arch.RegName(a.sp), sp.Offset)
			}
		}
	case cfi.Undefined:
		return nil, skip(pc, UndefinedFPOrSP, "%s undefined", a.arch.RegName(a.sp))
	case cfi.Offset, cfi.Register:
		if a.arch != arch.S390X {
			return nil, skip(pc, SPRule, "%s has rule %s", a.arch.RegName(a.sp), ruleString(a, *sp))
		}
	default:
		return nil, skip(pc, SPRule, "%s has rule %s", a.arch.RegName(a.sp), ruleString(a, *sp))
	}

	// CFA.
	switch cfa.Kind {
	case cfi.CFARegOffset:
		if !fitsInt32(cfa.Offset) {
			return nil, skip(pc, OffsetRange, "CFA offset %d", cfa.Offset)
		}
		if d := a.checkCFAOffset(pc, cfa.Offset); d != nil {
			return nil, d
		}
		r.CFA = sframe.Loc{Kind: sframe.LocReg, Reg: uint32(cfa.Reg), Offset: int32(cfa.Offset)}
		if cfa.Reg != a.sp && cfa.Reg != a.fp {
			if !a.flexABI || cfa.Reg > maxFlexReg {
				return nil, skip(pc, CFARegister, "CFA = %s%+d", a.arch.RegName(cfa.Reg), cfa.Offset)
			}
			flexWhy = skip(pc, CFARegister, "CFA = %s%+d", a.arch.RegName(cfa.Reg), cfa.Offset)
		}
	case cfi.CFAExpression:
		e, ok := cfiexpr.ParseSimpleExpr(cfa.Expr)
		if !ok || !a.flexABI || e.Reg > maxFlexReg {
			return nil, skip(pc, CFAExpression, "CFA = expression % x", cfa.Expr)
		}
		if !fitsInt32(e.Offset) {
			return nil, skip(pc, OffsetRange, "CFA offset %d", e.Offset)
		}
		if d := a.checkCFAOffset(pc, e.Offset); d != nil {
			return nil, d
		}
		if e.Deref {
			r.CFA = sframe.Loc{Kind: sframe.LocRegDeref, Reg: uint32(e.Reg), Offset: int32(e.Offset)}
			flexWhy = skip(pc, CFADeref, "CFA = [%s%+d]", a.arch.RegName(e.Reg), e.Offset)
		} else {
			r.CFA = sframe.Loc{Kind: sframe.LocReg, Reg: uint32(e.Reg), Offset: int32(e.Offset)}
			if e.Reg != a.sp && e.Reg != a.fp {
				flexWhy = skip(pc, CFARegister, "CFA = %s%+d", a.arch.RegName(e.Reg), e.Offset)
			}
		}
	}

	// Outgoing arguments pushed by the caller-side code: GNU as gives up
	// when the CFA is SP-based (and ignores it when FP-based).
	if argsSet && cr.ArgsSize != 0 && r.CFA.Kind == sframe.LocReg && uint64(r.CFA.Reg) == a.sp {
		return nil, skip(pc, ArgsSize, "DW_CFA_GNU_args_size %d with CFA = %s%+d", cr.ArgsSize, a.arch.RegName(a.sp), r.CFA.Offset)
	}

	// Return address.
	var why *Diagnostic
	if a.fixedRA != 0 && raRule.Kind == cfi.SameValue && raListed {
		// An explicit DW_CFA_same_value for rip: GNU as ignores it (the
		// return address stays at the fixed CFA-8 slot the call put it
		// in), and so do we. Without any rule for rip (a CIE that never
		// set it) the function is still skipped.
		raRule = &cfi.Rule{Kind: cfi.Offset, Offset: int64(a.fixedRA)}
	}
	r.RA, why, d = a.raLoc(pc, raRule)
	if d != nil {
		return nil, d
	}
	if flexWhy == nil {
		flexWhy = why
	}

	// Frame pointer.
	r.FP, why, d = a.fpLoc(pc, fpRule)
	if d != nil {
		return nil, d
	}
	if flexWhy == nil {
		flexWhy = why
	}
	if a.arch == arch.ARM64 && r.FP.Kind == sframe.LocCFA && r.RA.Kind == sframe.LocUnsaved {
		return nil, skip(pc, FPWithoutRA, "x29 saved at CFA%+d while x30 is not saved", r.FP.Offset)
	}
	return flexWhy, nil
}

func (a *abi) raLoc(pc uint64, rule *cfi.Rule) (l sframe.Loc, flexWhy, d *Diagnostic) {
	switch rule.Kind {
	case cfi.SameValue:
		if a.fixedRA != 0 {
			return l, nil, skip(pc, RANotAtFixedSlot, "rip has no rule (same value)")
		}
		return sframe.Loc{Kind: sframe.LocUnsaved}, nil, nil
	case cfi.Offset:
		if !fitsInt32(rule.Offset) {
			return l, nil, skip(pc, OffsetRange, "RA offset %d", rule.Offset)
		}
		if a.fixedRA != 0 {
			if rule.Offset != int64(a.fixedRA) {
				return l, nil, skip(pc, RANotAtFixedSlot, "rip saved at CFA%+d", rule.Offset)
			}
			return sframe.Loc{Kind: sframe.LocFixed, Offset: int32(a.fixedRA)}, nil, nil
		}
		if d := a.checkSlot(pc, "RA", rule.Offset); d != nil {
			return l, nil, d
		}
		return sframe.Loc{Kind: sframe.LocCFA, Offset: int32(rule.Offset)}, nil, nil
	case cfi.Register:
		if rule.Reg == a.ra {
			return a.raLoc(pc, &sameValue)
		}
		if a.regForm() {
			return sframe.Loc{Kind: sframe.LocReg, Reg: uint32(rule.Reg)}, nil, nil
		}
		if !a.flexABI || rule.Reg > maxFlexReg {
			return l, nil, skip(pc, RARegister, "return address in %s", a.arch.RegName(rule.Reg))
		}
		return sframe.Loc{Kind: sframe.LocReg, Reg: uint32(rule.Reg)}, skip(pc, RARegister, "return address in %s", a.arch.RegName(rule.Reg)), nil
	case cfi.Expression:
		if e, ok := cfiexpr.ParseSimpleExpr(rule.Expr); ok && !e.Deref && a.flexABI && e.Reg <= maxFlexReg && fitsInt32(e.Offset) {
			return sframe.Loc{Kind: sframe.LocRegDeref, Reg: uint32(e.Reg), Offset: int32(e.Offset)},
				skip(pc, RAExpression, "return address at [%s%+d]", a.arch.RegName(e.Reg), e.Offset), nil
		}
		return l, nil, skip(pc, RAExpression, "return address rule %s", ruleString(a, *rule))
	}
	return l, nil, skip(pc, RAExpression, "return address rule %s", ruleString(a, *rule))
}

func (a *abi) fpLoc(pc uint64, rule *cfi.Rule) (l sframe.Loc, flexWhy, d *Diagnostic) {
	switch rule.Kind {
	case cfi.SameValue:
		return sframe.Loc{Kind: sframe.LocUnsaved}, nil, nil
	case cfi.Undefined:
		return l, nil, skip(pc, UndefinedFPOrSP, "%s undefined", a.arch.RegName(a.fp))
	case cfi.Offset:
		if !fitsInt32(rule.Offset) {
			return l, nil, skip(pc, OffsetRange, "FP offset %d", rule.Offset)
		}
		if d := a.checkSlot(pc, "FP", rule.Offset); d != nil {
			return l, nil, d
		}
		return sframe.Loc{Kind: sframe.LocCFA, Offset: int32(rule.Offset)}, nil, nil
	case cfi.Register:
		if rule.Reg == a.fp {
			return sframe.Loc{Kind: sframe.LocUnsaved}, nil, nil
		}
		if a.regForm() {
			return sframe.Loc{Kind: sframe.LocReg, Reg: uint32(rule.Reg)}, nil, nil
		}
		if !a.flexABI || rule.Reg > maxFlexReg {
			return l, nil, skip(pc, FPRegister, "frame pointer in %s", a.arch.RegName(rule.Reg))
		}
		return sframe.Loc{Kind: sframe.LocReg, Reg: uint32(rule.Reg)}, skip(pc, FPRegister, "frame pointer in %s", a.arch.RegName(rule.Reg)), nil
	case cfi.Expression:
		if e, ok := cfiexpr.ParseSimpleExpr(rule.Expr); ok && !e.Deref && a.flexABI && e.Reg <= maxFlexReg && fitsInt32(e.Offset) {
			return sframe.Loc{Kind: sframe.LocRegDeref, Reg: uint32(e.Reg), Offset: int32(e.Offset)},
				skip(pc, FPExpression, "frame pointer at [%s%+d]", a.arch.RegName(e.Reg), e.Offset), nil
		}
	}
	return l, nil, skip(pc, FPExpression, "frame pointer rule %s", ruleString(a, *rule))
}

// spValOffset is the caller's SP relative to the CFA.
func (a *abi) spValOffset() int64 { return a.arch.CallerSPOffset() }

// rebase moves the CFA of a row whose SP rule is val_offset(spOff) rather
// than the ABI's (SFrame has no SP rule: it takes the caller's SP to be
// CFA+spValOffset) to where the ABI puts it, spOff-spValOffset higher,
// and the RA and FP slots with it, so that every register recovers as
// before. Only on s390x, whose ABI puts the CFA 160 above the caller's
// SP where Go's linker (and its pcsp tables) put it at the caller's SP;
// only a register+offset CFA and RA and FP rules that are not
// expressions. ok is false when it cannot.
func (a *abi) rebase(c cfi.CFA, spOff int64, ra, fp *cfi.Rule) (_ cfi.CFA, _, _ *cfi.Rule, ok bool) {
	if a.arch != arch.S390X || c.Kind != cfi.CFARegOffset {
		return c, ra, fp, false
	}
	shift := spOff - a.spValOffset()
	move := func(r *cfi.Rule) (*cfi.Rule, bool) {
		switch r.Kind {
		case cfi.SameValue, cfi.Undefined, cfi.Register:
			return r, true
		case cfi.Offset:
			m := *r
			m.Offset -= shift
			return &m, true
		}
		return r, false
	}
	ra, okRA := move(ra)
	fp, okFP := move(fp)
	c.Offset += shift
	return c, ra, fp, okRA && okFP
}

// checkCFAOffset says when a CFA offset has no SFrame encoding: on s390x
// it is stored as (offset-160)/8, which needs an 8-byte aligned offset
// (GNU as divides and drops the remainder).
func (a *abi) checkCFAOffset(pc uint64, off int64) *Diagnostic {
	if _, ok := a.arch.EncodeCFAOffset(off); !ok {
		return skip(pc, OffsetAlignment, "CFA offset %d: s390x stores (offset-160)/8", off)
	}
	return nil
}

// checkSlot says when an RA or FP stack slot cannot be written: in s390x
// V2 an odd offset is the register-number form (SFRAME_V2_S390X_OFFSET_IS_REGNUM).
func (a *abi) checkSlot(pc uint64, what string, off int64) *Diagnostic {
	if a.regForm() && off&1 != 0 {
		return skip(pc, OffsetAlignment, "%s saved at CFA%+d: s390x V2 reads an odd offset as a register number", what, off)
	}
	return nil
}

// regForm says whether an RA or FP kept in another register is written in
// a default FDE, as V2 does on s390x (the register number shifted left by
// one, the low bit set); V3 uses a flexible FDE instead.
func (a *abi) regForm() bool { return a.arch == arch.S390X && a.version < sframe.Version3 }

func ruleString(a *abi, r cfi.Rule) string {
	switch r.Kind {
	case cfi.SameValue:
		return "same value"
	case cfi.Undefined:
		return "undefined"
	case cfi.Offset:
		return fmt.Sprintf("saved at CFA%+d", r.Offset)
	case cfi.ValOffset:
		return fmt.Sprintf("value CFA%+d", r.Offset)
	case cfi.Register:
		return "in " + a.arch.RegName(r.Reg)
	case cfi.Expression:
		return fmt.Sprintf("expression % x", r.Expr)
	case cfi.ValExpression:
		return fmt.Sprintf("val_expression % x", r.Expr)
	}
	return "unknown"
}

// rowRules returns the rules of the RA, SP and FP registers in the row
// (sameValue for those it does not list), in one pass over the few it
// lists, without copying them; raListed says it lists the RA (a rule set
// by the FDE or CIE, an explicit DW_CFA_same_value included).
func (a *abi) rowRules(cr *cfi.Row) (ra, sp, fp *cfi.Rule, raListed bool) {
	ra, sp, fp = &sameValue, &sameValue, &sameValue
	for i := range cr.Regs {
		switch rr := &cr.Regs[i]; rr.Reg {
		case a.ra:
			ra, raListed = &rr.Rule, true
		case a.sp:
			sp = &rr.Rule
		case a.fp:
			fp = &rr.Rule
		}
	}
	return ra, sp, fp, raListed
}

// sameValue is the rule of a register a row does not list (read only).
var sameValue = cfi.Rule{Kind: cfi.SameValue}
