package codecheck

import (
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
)

// The fields a row is judged by (Wrong.Field).
const (
	FieldCFA    = "CFA"
	FieldFP     = "FP"
	FieldRA     = "RA"
	FieldSigned = "RA signing"
	FieldRow    = "row" // the Func's rows themselves: order, range, boundaries
)

// Why a PC in a Func is not judged (Result.NotJudged).
const (
	NoFDE         = "no FDE covers it"
	CFAExpression = "CFI's CFA is an expression"
	CFAOtherBase  = "CFI's CFA is from the pointer the row does not know"
	CFAOtherReg   = "CFI's CFA is in a general register"
	// SavedBeforeCFI: the row has the caller's frame pointer (or return
	// address) at its slot where the CFI still says it is in its
	// register, and a later CFI row of the FDE puts it at that slot:
	// clang records a callee-saved rbp's slot only after its last push,
	// GCC an AArch64 str x30 after instructions scheduled behind it.
	// Both hold there (the register is not changed yet, and the slot
	// has the value), but the row cannot show both, so the PC is not
	// counted as judged; its other fields are judged.
	SavedBeforeCFI = "saved before the CFI records the slot"
	// CFIIncomplete: the FDE has a single row (its program says nothing)
	// while the instructions move the stack pointer before this PC: the
	// CFI is wrong there (glibc's hand-written mpn functions push
	// registers with no CFI directives), so it cannot judge the row.
	// Result.Incomplete lists such FDEs, for a look at their code.
	CFIIncomplete = "the FDE's one row ignores the instructions' pushes (incomplete CFI)"
)

// verdict is the judgement of one row at one PC: the fields that
// disagree, or why it could not be judged.
type verdict struct {
	wrong     []Wrong
	notJudged string
	cross     bool // the CFA judged through the other of SP and FP
}

// has says field is among the fields that disagree.
func (v *verdict) has(field string) bool {
	for _, w := range v.wrong {
		if w.Field == field {
			return true
		}
	}
	return false
}

// slots are the stack slots a Func's rows have the caller's frame
// pointer and return address at, as CFA offsets.
type slots struct{ fp, ra map[int64]bool }

func slotsOf(f *codeflow.Func) slots {
	s := slots{fp: map[int64]bool{}, ra: map[int64]bool{}}
	for _, r := range f.Rows {
		if r.FP.Where == codeflow.OnStack {
			s.fp[r.FP.Off] = true
		}
		if r.RA.Where == codeflow.OnStack {
			s.ra[r.RA.Off] = true
		}
	}
	return s
}

// judge compares our row at pc with the CFI row in effect there; saved
// are the slots the row's Func has the FP and RA at.
func judge(a abi, pc uint64, row *codeflow.Row, ref *refFunc, cr *refRow, saved slots) verdict {
	var v verdict
	add := func(field, ours, theirs string) {
		v.wrong = append(v.wrong, Wrong{PC: pc, Field: field, Ours: ours, CFI: theirs})
	}
	// A row that contradicts itself is wrong whatever the CFI says: the
	// unwinder uses its base, the check might judge the other register.
	if row.Base == codeflow.BaseSP && row.SP.Known && row.SP.Off != -row.CFAOff ||
		row.Base == codeflow.BaseFP && row.FPVal.Known && row.FPVal.Off != -row.CFAOff {
		add(FieldRow, ours(a, row)+fmt.Sprintf(", SP=CFA%+d known=%v, FP=CFA%+d known=%v",
			row.SP.Off, row.SP.Known, row.FPVal.Off, row.FPVal.Known), "its base register's value contradicts its CFA offset")
	}
	if cr.cfaExpr {
		v.notJudged = CFAExpression
		return v
	}
	off, known := value(a, row, cr.cfaReg)
	if !known {
		v.notJudged = CFAOtherReg
		if cr.cfaReg == a.sp || cr.cfaReg == a.fp {
			v.notJudged = CFAOtherBase
		}
		if len(v.wrong) > 0 {
			v.notJudged = ""
		}
		return v
	}
	v.cross = cr.cfaReg != baseReg(a, row.Base)
	if off != -cr.cfaOff {
		add(FieldCFA, ours(a, row), fmt.Sprintf("CFA=%s%+d", a.names(cr.cfaReg), cr.cfaOff))
	}
	early := false
	fpRule := func(r *refRow) cfi.Rule { return r.fp }
	switch savedVerdict(row.FP, cr.fp, saved.fp, ref, pc, fpRule) {
	case disagree:
		add(FieldFP, savedWords("FP", row.FP), ruleWords(a, "FP", cr.fp))
	case savedEarly:
		early = true
	}
	raRule := func(r *refRow) cfi.Rule { return r.ra }
	switch savedVerdict(row.RA, cr.ra, saved.ra, ref, pc, raRule) {
	case disagree:
		add(FieldRA, savedWords("RA", row.RA), ruleWords(a, "RA", cr.ra))
	case savedEarly:
		early = true
	}
	if row.RASigned != cr.mangled {
		key := "A key"
		if ref.bKey {
			key = "B key"
		}
		add(FieldSigned, signedWords(row.RASigned, ""), signedWords(cr.mangled, key))
	}
	if early && len(v.wrong) == 0 {
		v.notJudged = SavedBeforeCFI
	}
	return v
}

// How a row's Saved compares with the CFI's rule for the register.
type savedCmp int

const (
	agree savedCmp = iota
	disagree
	savedEarly // SavedBeforeCFI: true, but not what the CFI says
)

// savedVerdict judges where the row has a caller's value (s) against
// the CFI's rule r at pc. Beyond savedAgrees, two differences are both
// true, each for its own reason:
//   - the row has the value back in its register (after pop %rbp,
//     leave, ldp x29, x30) where the CFI still has it at a slot the
//     row's Func saved it to (in): compilers move the rule at the last
//     restore, or not at all before the return. The CFI vouches that the
//     slot holds the caller's value, and the analysis tracked the save
//     to that slot and the load back: both hold it, so they agree. (A
//     Func that never had the value at that slot is judged wrong.)
//   - early: the row has it at a slot where the CFI says it is still in
//     its register, and a later row of the FDE puts it at that same
//     slot: savedEarly (see SavedBeforeCFI). The return address has such
//     cases too: glibc's AArch64 fexecve stores x30 with str x30, [sp,
//     #40] five instructions before its CFI records the slot (GCC
//     scheduled the save, not the note).
func savedVerdict(s codeflow.Saved, r cfi.Rule, in map[int64]bool, ref *refFunc, pc uint64, early func(*refRow) cfi.Rule) savedCmp {
	switch {
	case savedAgrees(s, r):
		return agree
	case s.Where == codeflow.InReg && r.Kind == cfi.Offset && in[r.Offset]:
		return agree
	case early != nil && s.Where == codeflow.OnStack && r.Kind == cfi.SameValue:
		for i := range ref.rows {
			if l := &ref.rows[i]; l.loc > pc {
				if lr := early(l); lr.Kind == cfi.Offset && lr.Offset == s.Off {
					return savedEarly
				}
			}
		}
	}
	return disagree
}

func baseReg(a abi, b codeflow.Base) uint64 {
	if b == codeflow.BaseFP {
		return a.fp
	}
	return a.sp
}

// value is what the row says register reg holds, as CFA+off: its base
// from the CFA rule, the other of SP and FP from what the analysis knew.
func value(a abi, row *codeflow.Row, reg uint64) (off int64, known bool) {
	switch {
	case reg == baseReg(a, row.Base):
		return -row.CFAOff, true
	case reg == a.sp && row.SP.Known:
		return row.SP.Off, true
	case reg == a.fp && row.FPVal.Known:
		return row.FPVal.Off, true
	}
	return 0, false
}

// savedAgrees: a save at CFA+k is the rule offset(k), a value still in
// its register is no rule (same value); every other rule (in another
// register, undefined, an expression) is something a row cannot say.
func savedAgrees(s codeflow.Saved, r cfi.Rule) bool {
	switch r.Kind {
	case cfi.SameValue:
		return s.Where == codeflow.InReg
	case cfi.Offset:
		return s.Where == codeflow.OnStack && s.Off == r.Offset
	}
	return false
}

func ours(a abi, row *codeflow.Row) string {
	return fmt.Sprintf("CFA=%s%+d", a.names(baseReg(a, row.Base)), row.CFAOff)
}

func savedWords(what string, s codeflow.Saved) string {
	switch s.Where {
	case codeflow.InReg:
		return what + " in its register"
	case codeflow.OnStack:
		return fmt.Sprintf("%s at CFA%+d", what, s.Off)
	}
	return what + " lost"
}

func ruleWords(a abi, what string, r cfi.Rule) string {
	switch r.Kind {
	case cfi.SameValue:
		return what + " in its register"
	case cfi.Offset:
		return fmt.Sprintf("%s at CFA%+d", what, r.Offset)
	case cfi.Undefined:
		return what + " undefined"
	case cfi.ValOffset:
		return fmt.Sprintf("%s = CFA%+d", what, r.Offset)
	case cfi.Register:
		return what + " in " + a.names(r.Reg)
	}
	return what + " by an expression"
}

func signedWords(signed bool, key string) string {
	if !signed {
		return "RA not signed"
	}
	if key == "" {
		return "RA signed"
	}
	return "RA signed (" + key + ")"
}
