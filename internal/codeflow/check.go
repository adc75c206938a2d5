package codeflow

import (
	"fmt"
	"sort"
)

// ProblemKind says what CheckRules found wrong with a row.
type ProblemKind string

// The problems CheckRules reports.
const (
	ProblemCFA    ProblemKind = "CFA"     // the CFA rule does not follow
	ProblemFP     ProblemKind = "FP"      // where the caller's FP is does not follow
	ProblemRA     ProblemKind = "RA"      // where the return address is does not follow
	ProblemSigned ProblemKind = "signing" // the return address's signing (or its key) does not follow
	// ProblemInside: a row starts inside an instruction, or a jump goes
	// into the middle of one.
	ProblemInside ProblemKind = "row-inside-instruction"
	// ProblemUndecodable: an instruction of the range does not decode, or
	// the range holds data or runs out of the code.
	ProblemUndecodable ProblemKind = "undecodable"
	// ProblemNotDerivable: the state built from the row before cannot give
	// a rule (the local check knows less than a walk from the entry did),
	// an indirect jump keeps the frame and its table is not found on the
	// straight-line path, or no row covers an instruction of the range.
	ProblemNotDerivable ProblemKind = "not-derivable"
	// ProblemReturn: a return with the frame in place.
	ProblemReturn ProblemKind = "bad-return"
	// ProblemJumpOut: control leaves the described code with a frame in
	// place.
	ProblemJumpOut ProblemKind = "jump-out"
	// ProblemEntry: a function's first row is not the state at an entry.
	ProblemEntry ProblemKind = "entry"
)

// Problem is a row that does not follow from the instructions and the
// rows before it: PC the instruction whose row is at fault, From the
// instruction whose effect was checked against it (PC itself when the
// problem is in one instruction), Row the rule given, Derived what the
// instruction at From gives, both in words.
type Problem struct {
	PC, From     uint64
	What         ProblemKind
	Row, Derived string
}

func (p Problem) String() string {
	s := fmt.Sprintf("%#x: %s: row says %s", p.PC, p.What, p.Row)
	if p.Derived != "" {
		s += ", " + p.Derived
	}
	if p.From != p.PC {
		s += fmt.Sprintf(" (from the instruction at %#x)", p.From)
	}
	return s
}

// CheckRules holds the rows ruleAt gives for [start, end) to the
// instructions there, inductively: each instruction, decoded linearly
// from start, is stepped from the state its own row describes, and every
// way out of it (the next instruction, a branch or jump target, a jump
// table's targets) must reach a row equal to the stepped rule, or leave
// the described code with the frame gone. It is a different algorithm
// from Analyze's walk (no path is followed; every edge is judged locally
// against the rows given), so a row the walk got wrong is not accepted
// by repeating the walk. Only straight-line knowledge is carried: where
// every way into an instruction comes from an earlier instruction of the
// range, the registers all of them agree on (the stack pointer under a
// frame-pointer rule, say) are kept.
//
// ruleAt gives the row covering a PC (Row.PC its start), for the whole
// file: targets outside [start, end) are judged by it too. The problems
// come sorted by PC.
func CheckRules(c *Code, start, end uint64, ruleAt func(pc uint64) (Row, bool)) []Problem {
	mk := arches[c.Machine]
	if mk == nil {
		return []Problem{{PC: start, From: start, What: ProblemUndecodable, Row: "a rule", Derived: fmt.Sprintf("no instruction set for machine %v", c.Machine)}}
	}
	k := &ruleCheck{code: c, a: mk(), start: start, end: end, ruleAt: ruleAt}
	k.w = newWalk(c, k.a, frameRegs[c.Machine], c.entryOf(start, end))
	k.decode()
	k.checkEntry()
	// Passes that only learn what registers hold where paths join (see
	// carry), to a fixed point, then one that reports; without a fixed
	// point, pessimistic passes instead.
	k.optimistic = true
	if !k.settle() {
		k.optimistic = false
		for i := range k.insns {
			k.insns[i].ok = false
		}
		k.settle()
	}
	k.check(true)
	k.checkSolo()
	sort.SliceStable(k.probs, func(i, j int) bool { return k.probs[i].PC < k.probs[j].PC })
	return k.probs
}

// ruleCheck is one CheckRules in progress.
type ruleCheck struct {
	code       *Code
	a          arch
	w          *walk
	start, end uint64
	ruleAt     func(uint64) (Row, bool)
	insns      []insn
	at         map[uint64]int   // instruction start -> index in insns
	preds      map[uint64][]int // instruction start -> the instructions of the range that lead to it
	probs      []Problem
	optimistic bool // carry: see there
}

// maxPasses bounds the passes that learn what registers hold.
const maxPasses = 16

// settle runs check's silent passes until no state changes (true) or
// maxPasses have run.
func (k *ruleCheck) settle() bool {
	for pass := 0; pass < maxPasses; pass++ {
		if !k.check(false) {
			return true
		}
	}
	return false
}

// insn is one decoded instruction of the range.
type insn struct {
	pc  uint64
	nx  next
	out State // its state after, stepped from its row (check)
	ok  bool  // out is set
}

func (k *ruleCheck) add(p Problem) { k.probs = append(k.probs, p) }

// deadPadding says insns[i] is padding that nothing in the range leads
// to (after a return or a jump): the walk gives it the next
// instruction's row so that a function is one FDE, but it never runs, so
// what it hands on is no way into the next instruction.
func (k *ruleCheck) deadPadding(i int) bool {
	pc := k.insns[i].pc
	if len(k.preds[pc]) > 0 || pc == k.start || k.w.isEntry(pc) {
		return false
	}
	b := k.w.bytes(pc)
	return b != nil && padLen(k.code.Machine, b) > 0
}

// history sets w.block to the instructions of the range before insns[i]
// (up to histLen), as the walk would on a straight path: jump tables are
// found from their bounds check.
func (k *ruleCheck) history(i int) {
	k.w.block = k.w.block[:0]
	for j := max(0, i-histLen); j < i; j++ {
		k.w.block = append(k.w.block, k.insns[j].pc)
	}
	k.w.cur, k.w.pathOf = 0, 0 // path() gives block as set here
}

// decode splits [start, end) into instructions and records who leads to
// whom; the steps here only give lengths and targets.
func (k *ruleCheck) decode() {
	k.at, k.preds = map[uint64]int{}, map[uint64][]int{}
	for pc := k.start; pc < k.end; {
		b := k.w.bytes(pc)
		if b == nil || k.code.Data != nil && k.code.Data(pc) {
			k.add(Problem{PC: pc, From: pc, What: ProblemUndecodable, Row: "a rule", Derived: "but the range holds no code there"})
			return
		}
		i := len(k.insns)
		k.insns = append(k.insns, insn{pc: pc})
		k.history(i)
		s := k.a.entry()
		if r, ok := k.ruleAt(pc); ok {
			s = rowState(&r, k.w.regs)
		}
		nx, err := k.a.step(k.w, b, pc, &s)
		if err != nil && nx.len <= 0 && k.minLen() == 4 {
			// AArch64 gives no length with a failure; it is always 4.
			// (Stepped from its own row in check, it may not fail.)
			nx.len = 4
		}
		if nx.len <= 0 || nx.len > 255 {
			err = fmt.Errorf("instruction length %d", nx.len)
		}
		if err != nil {
			if f, ok := err.(*failure); !ok || f.reason == ReasonUndecodable || f.reason == ReasonOutside || f.reason == ReasonData {
				k.add(Problem{PC: pc, From: pc, What: ProblemUndecodable, Row: "a rule", Derived: "but the instruction there does not decode: " + err.Error()})
				k.insns = k.insns[:i]
				return
			}
		}
		k.insns[i].nx = nx
		k.at[pc] = i
		for _, t := range k.succs(pc, nx) {
			k.preds[t.pc] = append(k.preds[t.pc], i)
		}
		pc += uint64(nx.len)
	}
}

// edge is a way out of an instruction: to pc, by a jump (or branch,
// table) or by falling through.
type edge struct {
	pc   uint64
	jump bool
	// afterCall: the return from a call; code there without a row is
	// what the walk took not to return (a call at its function's end),
	// no row being wrong.
	afterCall bool
}

// succs are the ways out of the instruction at pc.
func (k *ruleCheck) succs(pc uint64, nx next) []edge {
	end := pc + uint64(nx.len)
	switch nx.flow {
	case flowNext:
		return []edge{{end, false, false}}
	case flowCall:
		if nx.target != 0 && k.code.NoReturn != nil && k.code.NoReturn(nx.target) {
			return nil
		}
		return []edge{{end, false, true}}
	case flowJump:
		return []edge{{nx.target, true, false}}
	case flowBranch:
		return []edge{{nx.target, true, false}, {end, false, false}}
	case flowTable:
		e := make([]edge, len(nx.targets))
		for i, t := range nx.targets {
			e[i] = edge{t, true, false}
		}
		return e
	}
	return nil
}

// rowState is the state a row describes: the CFA base register at its
// distance from the CFA, the rest unknown.
func rowState(r *Row, regs [2]int) State {
	var s State
	reg := regs[0]
	if r.Base == BaseFP {
		reg = regs[1]
	}
	s.Regs[reg] = Val{Off: -r.CFAOff, Known: true}
	s.FP, s.RA, s.RASigned, s.BKey = r.FP, r.RA, r.RASigned, r.BKey
	return s
}

// entryOf is the entry whose function holds [start, end): the last one
// at or before start that reaches it (a symbol's extent), or one at
// start without an end.
func (c *Code) entryOf(start, end uint64) Entry {
	i := sort.Search(len(c.Entries), func(i int) bool { return c.Entries[i].Addr > start }) - 1
	if i >= 0 && (c.Entries[i].Addr == start || c.Entries[i].End >= end) {
		return c.Entries[i]
	}
	return Entry{Addr: start}
}

// carry adds to s what every instruction of the range leading to
// insns[i] knew after it, unless other code may enter there (the range's
// start, another entry). Optimistic (k.optimistic), the instructions not
// stepped yet are passed over, as a data-flow analysis does, so that what
// a loop keeps is known in it: sound once the passes reach a fixed point
// (CheckRules falls back when they do not). Else only instructions
// before it count, and all must be stepped: each pass is then sound on
// its own (what it knows comes from the rows and steps only).
func (k *ruleCheck) carry(i int, s *State) {
	pc := k.insns[i].pc
	ps := k.preds[pc]
	if len(ps) == 0 || pc == k.start || k.w.isEntry(pc) {
		return
	}
	var from []int
	for _, p := range ps {
		if k.deadPadding(p) {
			continue // never run: its row (the next one's) is no way in
		}
		switch {
		case k.insns[p].ok && (k.optimistic || p < i):
			from = append(from, p)
		case !k.optimistic:
			return
		}
	}
	if len(from) == 0 {
		return
	}
	for r := range s.Regs {
		if s.Regs[r].Known {
			continue
		}
		v := k.insns[from[0]].out.Regs[r]
		for _, p := range from[1:] {
			if k.insns[p].out.Regs[r] != v {
				v = Val{}
			}
		}
		s.Regs[r] = v
	}
}

// check steps each instruction from its row and what carry knows, and
// judges its ways out when report is set. It says whether a state after
// an instruction changed.
func (k *ruleCheck) check(report bool) bool {
	add := k.add
	if !report {
		add = func(Problem) {}
	}
	changed := false
	for i := range k.insns {
		in := &k.insns[i]
		row, ok := k.ruleAt(in.pc)
		if !ok {
			add(Problem{PC: in.pc, From: in.pc, What: ProblemNotDerivable, Row: "nothing", Derived: "but the instruction is in the range checked"})
			continue
		}
		n := uint64(in.nx.len)
		if last, ok := k.ruleAt(in.pc + n - 1); ok && last.PC > in.pc && last.PC < in.pc+n {
			add(Problem{PC: last.PC, From: in.pc, What: ProblemInside, Row: rowString(&last, k.w.regs),
				Derived: fmt.Sprintf("but the instruction at %#x runs to %#x", in.pc, in.pc+n)})
		}
		s := rowState(&row, k.w.regs)
		k.carry(i, &s)
		k.history(i)
		nx, err := k.a.step(k.w, k.w.bytes(in.pc), in.pc, &s)
		if err != nil {
			add(Problem{PC: in.pc, From: in.pc, What: ProblemNotDerivable, Row: rowString(&row, k.w.regs),
				Derived: "but the instruction cannot be stepped from it: " + err.Error()})
			changed = changed || in.ok
			in.ok = false
			continue
		}
		changed = changed || !in.ok || in.out != s
		in.out, in.ok = s, true
		if !report {
			continue
		}
		switch nx.flow {
		case flowIndirect:
			// An indirect jump with the frame in place is a jump table
			// the walk resolved from the path it followed (the bound is
			// often checked in a block placed elsewhere, or on another
			// path), which the straight-line history here may not hold:
			// its targets cannot be judged, so the rule is one the rows
			// cannot re-derive, not one shown wrong. A row that claims
			// the frame at the jump still meets the edge checks into it.
			if !k.a.tail(&s) {
				k.add(Problem{PC: in.pc, From: in.pc, What: ProblemNotDerivable, Row: rowString(&row, k.w.regs),
					Derived: "but its jump table is not found on the straight-line path, so its targets are not checked: " + frameString(&s, k.w.regs)})
			}
		case flowReturn:
			if !k.a.tail(&s) || s.FP.Where == Lost {
				k.add(Problem{PC: in.pc, From: in.pc, What: ProblemReturn, Row: rowString(&row, k.w.regs),
					Derived: "but the return leaves with the frame in place: " + frameString(&s, k.w.regs)})
			}
		}
		for _, e := range k.succs(in.pc, nx) {
			k.edge(in.pc, &row, e, &s)
		}
	}
	return changed
}

// edge judges the way out of the instruction at from (its row, its state
// after s) to e.
func (k *ruleCheck) edge(from uint64, fromRow *Row, e edge, s *State) {
	t := e.pc
	if k.code.described(t) {
		return
	}
	if i, ok := k.at[from]; ok && k.deadPadding(i) {
		// Padding nothing leads to never runs: the row it has (the
		// call's before it, for a reader that looks a return address
		// up as it is, or the next instruction's) hands nothing on.
		return
	}
	inRange := k.start <= t && t < k.end
	if _, ok := k.at[t]; inRange && !ok && len(k.insns) > 0 && t < k.insns[len(k.insns)-1].pc+uint64(k.insns[len(k.insns)-1].nx.len) {
		k.add(Problem{PC: t, From: from, What: ProblemInside, Row: "an instruction start", Derived: "but a jump goes into the middle of an instruction"})
		return
	}
	if t != k.start && !inRange && k.w.isEntry(t) && (!e.jump || k.a.tail(s)) {
		return // a tail call; or a fall, frame in place, into the next function (a call that does not return)
	}
	row, ok := k.ruleAt(t)
	if !ok {
		// Padding that runs into code without a row is the padding a
		// call that does not return leaves before the next function,
		// which conversion covers with the call's row for unwinders
		// that look a return address up as it is.
		if b := k.w.bytes(from); b != nil && padLen(k.code.Machine, b) > 0 {
			return
		}
		if !k.a.tail(s) && !e.afterCall {
			k.add(Problem{PC: from, From: from, What: ProblemJumpOut, Row: rowString(fromRow, k.w.regs),
				Derived: fmt.Sprintf("but control goes to %#x, which no row describes, with the frame in place: %s", t, frameString(s, k.w.regs))})
		}
		return
	}
	k.compare(t, from, fromRow, &row, s)
}

// compare holds the row at pc to the state s that the instruction at from
// leaves.
func (k *ruleCheck) compare(pc, from uint64, fromRow, row *Row, s *State) {
	got, err := k.a.rule(s)
	if err != nil {
		k.add(Problem{PC: pc, From: from, What: ProblemNotDerivable, Row: rowString(row, k.w.regs),
			Derived: fmt.Sprintf("but it cannot be re-derived from the row at %#x (%s): %v", fromRow.PC, rowString(fromRow, k.w.regs), err)})
		return
	}
	derived := "the instructions give " + rowString(&got, k.w.regs)
	reg := k.w.regs[0]
	if row.Base == BaseFP {
		reg = k.w.regs[1]
	}
	// The CFA rule is judged by what it means: a row counting from the
	// other base than rule's choice is right when that register is known.
	if v := s.Regs[reg]; !v.Known || -v.Off != row.CFAOff {
		k.add(Problem{PC: pc, From: from, What: ProblemCFA, Row: rowString(row, k.w.regs), Derived: derived})
	}
	if !sameSaved(row.FP, got.FP) {
		k.add(Problem{PC: pc, From: from, What: ProblemFP, Row: rowString(row, k.w.regs), Derived: derived})
	}
	if !sameSaved(row.RA, got.RA) {
		k.add(Problem{PC: pc, From: from, What: ProblemRA, Row: rowString(row, k.w.regs), Derived: derived})
	}
	if row.RASigned != got.RASigned || row.RASigned && row.BKey != got.BKey {
		k.add(Problem{PC: pc, From: from, What: ProblemSigned, Row: rowString(row, k.w.regs), Derived: derived})
	}
}

func sameSaved(a, b Saved) bool {
	return a.Where == b.Where && (a.Where != OnStack || a.Off == b.Off)
}

// checkEntry: the range's first row must be the state at an entry when
// the range starts at a function entry that no jump reaches (a jump may
// reach a part of a function, GCC's foo.cold, with the frame in place).
func (k *ruleCheck) checkEntry() {
	i := sort.Search(len(k.code.Entries), func(i int) bool { return k.code.Entries[i].Addr >= k.start })
	if i == len(k.code.Entries) || k.code.Entries[i].Addr != k.start {
		return
	}
	row, ok := k.ruleAt(k.start)
	if !ok {
		return // check reports it
	}
	s := k.a.entry()
	want, err := k.a.rule(&s)
	if err != nil {
		return
	}
	want.PC = row.PC
	if sameRule(&row, &want) || k.jumpedTo(k.start) {
		return
	}
	if k.code.Entries[i].Source >= FromPointer {
		// A guessed start (a pointer into code, the end of a padding
		// run) is often a jump-table target or a cold part, which the
		// walk described as part of the function that jumps there, from
		// outside this range: its first row cannot be checked here.
		k.add(Problem{PC: k.start, From: k.start, What: ProblemNotDerivable, Row: rowString(&row, k.w.regs),
			Derived: "but it starts where only a pointer or padding suggests a function, and no jump of the range reaches it: the jump into it is not checked"})
		return
	}
	k.add(Problem{PC: k.start, From: k.start, What: ProblemEntry, Row: rowString(&row, k.w.regs),
		Derived: "but a function entry no jump reaches has " + rowString(&want, k.w.regs)})
}

func sameRule(a, b *Row) bool {
	return a.Base == b.Base && a.CFAOff == b.CFAOff && sameSaved(a.FP, b.FP) && sameSaved(a.RA, b.RA) &&
		a.RASigned == b.RASigned && (!a.RASigned || a.BKey == b.BKey)
}

// jumpedTo says a direct jump or branch somewhere in the code goes to pc:
// a linear sweep of the executable ranges (run only for a range whose
// first row is not the entry's, so seldom).
func (k *ruleCheck) jumpedTo(pc uint64) bool {
	w := newWalk(k.code, k.a, k.w.regs, Entry{})
	for _, r := range k.code.Text {
		for off := 0; off < len(r.Data); {
			at := r.Addr + uint64(off)
			s := k.a.entry()
			nx, err := k.a.step(w, r.Data[off:], at, &s)
			if err != nil || nx.len <= 0 {
				off += k.minLen()
				continue
			}
			if (nx.flow == flowJump || nx.flow == flowBranch) && nx.target == pc {
				return true
			}
			off += nx.len
		}
	}
	return false
}

func (k *ruleCheck) minLen() int {
	if _, ok := k.a.(arm64); ok {
		return 4
	}
	return 1
}

// checkSolo: a jump table found from a bounds check holds only when the
// instructions after the check have no other way in.
func (k *ruleCheck) checkSolo() {
	for _, c := range k.w.solo {
		if len(k.preds[c.pc]) > 1 || c.pc == k.start {
			k.add(Problem{PC: c.jump, From: c.jump, What: ProblemNotDerivable, Row: "a jump table's targets",
				Derived: fmt.Sprintf("but another path reaches %#x, bypassing the bounds check", c.pc)})
		}
	}
}

// rowString is a row in words: "CFA=sp+16 fp=CFA-16 ra=CFA-8 signed(B)".
func rowString(r *Row, regs [2]int) string {
	base := "sp"
	if r.Base == BaseFP {
		base = "fp"
	}
	p := func(x Saved) string {
		switch x.Where {
		case InReg:
			return "in its register"
		case OnStack:
			return fmt.Sprintf("at CFA%+d", x.Off)
		}
		return "lost"
	}
	s := fmt.Sprintf("CFA=%s%+d, FP %s, RA %s", base, r.CFAOff, p(r.FP), p(r.RA))
	if r.RASigned {
		key := "A"
		if r.BKey {
			key = "B"
		}
		s += ", RA signed (" + key + " key)"
	}
	return s
}
