package verify

import (
	"debug/elf"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// fromCode checks SFrame function d, which no CFI describes, against its
// instructions (codeflow.CheckRules): each of its rows must follow from
// the instructions and the rows before it. It says false when d cannot be
// checked so (a machine codeflow does not know, a PLT, no code loaded, a
// PCMask function): d is then checked as any other, NoCFI where no CFI
// covers it.
func (c *checker) fromCode(d *sframe.FDE) bool {
	start, end := d.Start, d.Start+uint64(d.Size)
	if c.in.Code == nil || d.PCType == sframe.PCMask || c.in.SFrame == nil ||
		(c.in.Machine != elf.EM_X86_64 && c.in.Machine != elf.EM_AARCH64) || c.inPLT(start) || c.hasCFI(start, end) {
		return false
	}
	code := c.in.Code()
	if code == nil || !inText(code, start, end) {
		// Not code the analysis reads (no executable section there: a
		// tool moved or dropped it): NoCFI, as before the check existed.
		return false
	}
	c.fromCodeFDEs++
	for _, p := range codeflow.CheckRules(code, start, end, c.codeRule) {
		kind := FromCode
		if p.What == codeflow.ProblemNotDerivable {
			// Not shown wrong: counted, the first few listed.
			if c.unproven++; c.unproven > defaultList {
				continue
			}
			kind = Unproven
		}
		c.add(Finding{Kind: kind, Func: d.Start, PC: p.PC, End: p.PC + 1, What: string(p.What), SFrame: p.Row, CFI: p.Derived})
	}
	return true
}

// inText says [lo, hi) lies in one executable range of code.
func inText(code *codeflow.Code, lo, hi uint64) bool {
	for _, r := range code.Text {
		if lo >= r.Addr && hi <= r.Addr+uint64(len(r.Data)) {
			return true
		}
	}
	return false
}

// hasCFI says a CFI function overlaps [lo, hi).
func (c *checker) hasCFI(lo, hi uint64) bool {
	i := sort.Search(len(c.spans), func(i int) bool { return c.spans[i].Start+c.spans[i].Size > lo })
	return i < len(c.spans) && c.spans[i].Start < hi
}

// inPLT says pc is in one of the file's PLT sections (described from the
// stubs' instructions by translate; left NoCFI).
func (c *checker) inPLT(pc uint64) bool {
	for _, p := range c.in.PLTs {
		if p.Addr <= pc && pc < p.Addr+uint64(len(p.Data)) {
			return true
		}
	}
	return false
}

// codeRule is the SFrame row at pc as codeflow states a rule, or false
// where there is none or it says what no analysed frame can (a flexible
// rule, an outermost frame).
func (c *checker) codeRule(pc uint64) (codeflow.Row, bool) {
	r, err := c.in.SFrame.Lookup(pc)
	if err != nil || r.RAUndefined || r.CFA.Kind != sframe.LocReg {
		return codeflow.Row{}, false
	}
	row := codeflow.Row{PC: r.FuncStart + uint64(r.Start), CFAOff: int64(r.CFA.Offset)}
	switch uint64(r.CFA.Reg) {
	case c.sp:
		row.Base = codeflow.BaseSP
	case c.fp:
		row.Base = codeflow.BaseFP
	default:
		return codeflow.Row{}, false
	}
	var ok bool
	if row.FP, ok = codeSaved(r.FP); !ok {
		return codeflow.Row{}, false
	}
	if c.in.Machine == elf.EM_X86_64 {
		// SFrame's x86-64 return address is always at CFA-8.
		row.RA = codeflow.Saved{Where: codeflow.OnStack, Off: -8}
	} else if row.RA, ok = codeSaved(r.RA); !ok {
		return codeflow.Row{}, false
	}
	row.RASigned = r.MangledRA
	row.BKey = r.MangledRA && r.PauthKeyB
	return row, true
}

// codeSaved is an SFrame FP or RA rule as codeflow says where a caller's
// value is.
func codeSaved(l sframe.Loc) (codeflow.Saved, bool) {
	switch l.Kind {
	case sframe.LocUnsaved:
		return codeflow.Saved{Where: codeflow.InReg}, true
	case sframe.LocCFA:
		return codeflow.Saved{Where: codeflow.OnStack, Off: int64(l.Offset)}, true
	}
	return codeflow.Saved{}, false
}

// fromCodeString is a FromCode finding in words.
func (f Finding) fromCodeString(loc string) string {
	return fmt.Sprintf("%s [%#x,%#x): %s: the rule does not follow from the instructions and the rules before it: .sframe says %s; %s", loc, f.PC, f.End, f.What, f.SFrame, f.CFI)
}
