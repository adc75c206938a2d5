package codeflow

import "testing"

// TestCheckEntrySource: a range whose first row is not an entry's, and
// which no direct jump reaches (here, an indirect one), is a wrong row where a symbol or
// a call names a function there (ProblemEntry), and one the check cannot
// judge where only padding or a pointer suggests one: a jump-table
// target or cold part the walk described from the function that jumps
// there (ProblemNotDerivable).
func TestCheckEntrySource(t *testing.T) {
	im := assemble(t, `
fn caller
	push %rbx
	lea part(%rip), %rax
	jmp *%rax
fn part
	pop %rbx
	ret
`)
	start := im.syms["part"]
	rows := []Row{
		{PC: start, Base: BaseSP, CFAOff: 16, FP: Saved{Where: InReg}, RA: Saved{Where: OnStack, Off: -8}},
		{PC: start + 1, Base: BaseSP, CFAOff: 8, FP: Saved{Where: InReg}, RA: Saved{Where: OnStack, Off: -8}},
	}
	ruleAt := func(pc uint64) (Row, bool) {
		switch {
		case pc >= start+1 && pc < start+2:
			return rows[1], true
		case pc == start:
			return rows[0], true
		}
		return Row{}, false
	}
	for _, tc := range []struct {
		src  Source
		want ProblemKind
	}{
		{FromSymbol, ProblemEntry},
		{FromCall, ProblemEntry},
		{FromPointer, ProblemNotDerivable},
		{FromPadding, ProblemNotDerivable},
	} {
		c := *im.code
		c.Entries = append([]Entry(nil), im.code.Entries...)
		for i := range c.Entries {
			if c.Entries[i].Addr == start {
				c.Entries[i].Source = tc.src
			}
		}
		probs := CheckRules(&c, start, start+2, ruleAt)
		if len(probs) != 1 || probs[0].What != tc.want || probs[0].PC != start {
			t.Errorf("source %d: %v, want one %s at %#x", tc.src, probs, tc.want, start)
		}
	}
}
