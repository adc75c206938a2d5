package sframe

import "strconv"

// LocKind says how a tracked entity (CFA, RA or FP) is recovered.
type LocKind uint8

const (
	// LocUnsaved: not tracked by this row (FP/RA unchanged, still in its
	// register). Rendered "u".
	LocUnsaved LocKind = iota
	// LocFixed: RA saved at CFA + the header's fixed RA offset. Rendered "f".
	LocFixed
	// LocDefault: flex FDE whose RA rule is the padding data word, i.e. the
	// ABI's default location. Rendered "U".
	LocDefault
	// LocCFA: saved in memory at CFA + Offset (default FDEs, flex with
	// reg_p=0 deref_p=1). Rendered "c±N".
	LocCFA
	// LocCFAValue: value is CFA + Offset itself (flex reg_p=0 deref_p=0).
	LocCFAValue
	// LocReg: value is register Reg + Offset (CFA base in default FDEs,
	// flex reg_p=1 deref_p=0).
	LocReg
	// LocRegDeref: value is loaded from register Reg + Offset (flex
	// reg_p=1 deref_p=1).
	LocRegDeref
)

// String returns the kind's name ("LocReg"), or its number for an unknown
// one.
func (k LocKind) String() string {
	if int(k) < len(locKindNames) {
		return locKindNames[k]
	}
	return "LocKind(" + strconv.Itoa(int(k)) + ")"
}

var locKindNames = [...]string{"LocUnsaved", "LocFixed", "LocDefault", "LocCFA", "LocCFAValue", "LocReg", "LocRegDeref"}

// Loc is one recovery rule.
type Loc struct {
	Kind   LocKind
	Reg    uint32 // DWARF register number for LocReg/LocRegDeref
	Offset int32
}

// String returns the rule in the notation of Dump's columns, with a
// register named by its DWARF number: "r7+8" (LocReg), "(r6+16)"
// (LocRegDeref), "c-16" (LocCFA), "=c+8" (LocCFAValue), "u" (LocUnsaved),
// "f" (LocFixed) and "U" (LocDefault).
func (l Loc) String() string { return string(appendLoc(nil, 0, l)) }

// Rule is the rule that applies at a PC: the row in effect (Row.Start is
// its FRE's start offset, a mask value in a PCMask function) and what the
// function holding the PC says of all its rows.
type Rule struct {
	Row
	FuncStart uint64
	FuncSize  uint32
	PCType    PCType
	Flex      bool
	Signal    bool
	PauthKeyB bool
	NoFREs    bool // from an FDE without FREs
}

func flexLoc(ctrl uint32, off int32) Loc {
	reg := ctrl >> flexCtrlRegShift
	deref := ctrl&flexCtrlDerefP != 0
	if ctrl&flexCtrlRegP != 0 {
		if deref {
			return Loc{Kind: LocRegDeref, Reg: reg, Offset: off}
		}
		return Loc{Kind: LocReg, Reg: reg, Offset: off}
	}
	if deref {
		return Loc{Kind: LocCFA, Offset: off}
	}
	return Loc{Kind: LocCFAValue, Offset: off}
}

// Interpret returns the rule of FRE f of FDE d, as Lookup gives it.
func (t *Table) Interpret(d *FDE, f *FRE) Rule { return interpret(&t.Header, d, f) }

func interpret(h *Header, d *FDE, f *FRE) Rule {
	var r Rule
	interpretInto(h, d, f, &r)
	return r
}

// interpretInto is interpret writing into *r: a lookup's caller then reads
// the fields it needs instead of copying the whole Rule back (a copy of
// fields just written one by one, which the processor cannot forward).
func interpretInto(h *Header, d *FDE, f *FRE, r *Rule) {
	*r = Rule{
		Row:       Row{Start: f.Start, MangledRA: f.MangledRA},
		FuncStart: d.Start, FuncSize: d.Size, PCType: d.PCType,
		Flex: d.Flex, Signal: d.Signal, PauthKeyB: d.PauthKeyB,
	}
	n := int(f.NumWords)
	if n == 0 {
		r.RAUndefined = true
		return
	}
	if r.Flex {
		r.CFA = flexLoc(f.uword(0), 0)
		if n > 1 {
			r.CFA.Offset = f.Words[1]
		}
		r.CFA.Offset = h.ABI.arch().DecodeCFAOffset(r.CFA.Offset)
		if r.CFA.Kind == LocCFA || r.CFA.Kind == LocCFAValue {
			// A CFA rule must name a register; keep the raw form.
			r.CFA.Kind = LocReg
		}
		r.RA = Loc{Kind: LocUnsaved}
		if h.CFAFixedRA != cfaFixedRAInvalid {
			r.RA = Loc{Kind: LocFixed, Offset: int32(h.CFAFixedRA)}
		}
		r.FP = Loc{Kind: LocUnsaved}
		i := 2
		if n > i {
			c := f.uword(i)
			if c == 0 {
				r.RA = Loc{Kind: LocDefault}
				if h.CFAFixedRA != cfaFixedRAInvalid {
					r.RA.Offset = int32(h.CFAFixedRA)
				}
				i++
			} else {
				var off int32
				if n > i+1 {
					off = f.Words[i+1]
				}
				r.RA = flexLoc(c, off)
				i += 2
			}
		}
		if n > i {
			c := f.uword(i)
			if c != 0 {
				var off int32
				if n > i+1 {
					off = f.Words[i+1]
				}
				r.FP = flexLoc(c, off)
			}
		}
		return
	}
	a := h.ABI.arch()
	cfaOff := a.DecodeCFAOffset(f.Words[0])
	reg := a.SP()
	if f.BaseReg == baseRegFP {
		reg = a.FP()
	}
	r.CFA = Loc{Kind: LocReg, Reg: reg, Offset: cfaOff}
	r.RA = Loc{Kind: LocUnsaved}
	r.FP = Loc{Kind: LocUnsaved}
	if h.CFAFixedRA != cfaFixedRAInvalid {
		r.RA = Loc{Kind: LocFixed, Offset: int32(h.CFAFixedRA)}
	}
	if h.CFAFixedFP != cfaFixedFPInvalid {
		r.FP = Loc{Kind: LocCFA, Offset: int32(h.CFAFixedFP)}
	}
	stackOrReg := func(w int32) Loc {
		if h.ABI == ABIS390XBE && h.Version <= Version2 && w&1 != 0 {
			return Loc{Kind: LocReg, Reg: uint32(w >> 1)}
		}
		return Loc{Kind: LocCFA, Offset: w}
	}
	i := 1
	if h.CFAFixedRA == cfaFixedRAInvalid && n > i {
		if w := f.Words[i]; !(h.ABI == ABIS390XBE && w == raOffsetInvalid) {
			r.RA = stackOrReg(w)
		}
		i++
	}
	if h.CFAFixedFP == cfaFixedFPInvalid && n > i {
		r.FP = stackOrReg(f.Words[i])
	}
}
