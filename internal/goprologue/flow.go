package goprologue

import (
	"fmt"
	"sort"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// flowKind is how control leaves an instruction.
type flowKind uint8

const (
	flowNext     flowKind = iota // to the next instruction
	flowCall                     // to the next instruction, if the callee returns
	flowJump                     // to target only
	flowBranch                   // to target or the next instruction
	flowIndirect                 // to a register's or memory's address
	flowReturn                   // back to the caller
	flowStop                     // nowhere: a trap
)

// fpOp is what an instruction does with the frame pointer register.
type fpOp uint8

const (
	fpNone  fpOp = iota
	fpStore      // stores it at addr, when known
	fpLoad       // loads it from addr, when known
	fpWrite      // sets it otherwise
	// fpCaller sets it to the value Go's convention gives the caller's
	// frame pointer: on arm64, the caller's SP less 8, which is the
	// entry's SP less 8 (the epilogue of arm64 leaf functions).
	fpCaller
)

// effect is what one instruction does that matters here. Addresses are
// relative to the stack pointer at the function's entry.
type effect struct {
	flow      flowKind
	target    uint64
	fp        fpOp
	addr      int64
	addrKnown bool
	spWrite   bool  // the stack pointer is written
	spKnown   bool  // by spDelta more bytes below the entry's
	spDelta   int64 // (negative when it moves up)
	nop       bool  // does nothing
}

// insn is one decoded instruction, or a word that does not decode.
type insn struct {
	pc   uint64
	size int
	err  error
	raw  any
}

// text is the instruction in Go's assembler syntax, made only when asked
// for (a result that names it, a test): formatting every instruction cost
// a third of an analysis.
func (in insn) text() string {
	switch r := in.raw.(type) {
	case *x86asm.Inst:
		return x86asm.GoSyntax(*r, in.pc, nil)
	case *arm64asm.Inst:
		return arm64asm.GoSyntax(*r, in.pc, nil, nil)
	case fmt.Stringer:
		return r.String()
	}
	return ""
}

// arch is what the analysis needs of an instruction set.
type arch struct {
	// cfa is the CFA's distance above the stack pointer at entry.
	cfa int64
	// below is how far under the stack pointer the saved frame pointer
	// may lie while the frame is in place (arm64 keeps it just below).
	below int64
	// decode splits code into instructions; undecodable bytes become an
	// insn with err set.
	decode func(code []byte, pc uint64, sc *scratch) []insn
	// effect says what in does, given the SP delta before it; regs holds
	// what is known of the general registers since the last reset and is
	// updated with what in writes.
	effect func(in insn, delta int64, regs map[int]value) effect
}

// value is what is known of a register: a constant, or an address at a
// known distance from the stack pointer at entry.
type value struct {
	stack bool
	v     int64
}

var arches = map[Arch]*arch{}

// state is where the caller's frame pointer is before an instruction.
type state struct {
	saved bool  // in the stack slot at slot
	slot  int64 // relative to the entry's stack pointer
	holds bool  // the register still holds it as well
}

// function is the analysis of one function in progress.
type function struct {
	arch       *arch
	insns      []insn
	entry, end uint64
	delta      []int64
	known      []bool // the pcsp rows give an SP delta
	weak       bool   // following paths from unreached code
	derr       *DecodeError
	eff        []effect
	in         []*state
	work       []int
	fail       *Result
}

// at returns the index of the instruction that starts at pc: the
// instructions are in address order.
func (f *function) at(pc uint64) (int, bool) {
	j := sort.Search(len(f.insns), func(j int) bool { return f.insns[j].pc >= pc })
	return j, j < len(f.insns) && f.insns[j].pc == pc
}

// effects computes each instruction's effect in address order, with the
// register knowledge reset where another path may join.
func (f *function) effects() {
	leader := make([]bool, len(f.insns)+1)
	leader[0] = true
	f.eff = make([]effect, len(f.insns))
	for pass := 0; pass < 2; pass++ {
		regs := map[int]value{}
		for i, in := range f.insns {
			if leader[i] || in.err != nil {
				clear(regs)
			}
			if in.err != nil {
				f.eff[i] = effect{flow: flowStop}
				leader[i+1] = true
				continue
			}
			e := f.arch.effect(in, f.delta[i], regs)
			f.eff[i] = e
			if e.flow == flowJump || e.flow == flowBranch {
				if j, ok := f.at(e.target); ok {
					leader[j] = true
				}
			}
			if e.flow != flowNext && e.flow != flowBranch {
				leader[i+1] = true
			}
			if e.flow == flowCall {
				clear(regs)
			}
		}
	}
}

// failAt records the first reason the function is not followed.
func (f *function) failAt(i int, reason string) {
	if f.fail == nil {
		f.fail = &Result{Kind: Unrecognized, Reason: reason, PC: f.insns[i].pc, Inst: f.insns[i].text()}
	}
}

// consistent says whether s can hold before instruction i: the pcsp rows
// give it an SP delta and leave room for the frame, whose saved frame
// pointer lies at or above the stack pointer (less the arch's allowance).
func (f *function) consistent(s state, i int) bool {
	return f.known[i] && (!s.saved || s.slot >= -f.delta[i]-f.arch.below)
}

// flow follows every path from the entry, then from the instructions no
// path reaches: those run in the frame if the pcsp rows leave room for
// it (a deferreturn block, the targets of a jump table), else without.
// The paths from those are weak: where they meet another path or leave
// the pcsp rows, they end rather than fail.
func (f *function) flow() error {
	f.in = make([]*state, len(f.insns))
	f.join(0, state{holds: true})
	if err := f.run(); err != nil {
		return err
	}
	framed, slot := f.frameSlot()
	f.weak = true
	for i := range f.insns {
		if f.fail != nil {
			return nil
		}
		if f.in[i] != nil || f.insns[i].err != nil || !f.known[i] {
			continue
		}
		s := state{holds: true}
		if framed && f.consistent(state{saved: true, slot: slot}, i) {
			s = state{saved: true, slot: slot}
		}
		f.join(i, s)
		if err := f.run(); err != nil {
			return err
		}
	}
	return nil
}

// frameSlot is the one slot the function saves the frame pointer in, if
// it saves it at all.
func (f *function) frameSlot() (bool, int64) {
	for _, s := range f.in {
		if s != nil && s.saved {
			return true, s.slot
		}
	}
	return false, 0
}

// join brings state s to instruction i.
func (f *function) join(i int, s state) {
	if f.weak && (!f.known[i] || f.insns[i].err != nil) {
		return
	}
	old := f.in[i]
	switch {
	case old == nil:
		f.in[i] = &s
	case old.saved != s.saved || old.slot != s.slot:
		if !f.weak {
			f.failAt(i, ReasonConflict)
		}
		return
	case old.holds && !s.holds:
		old.holds = false
	default:
		return
	}
	f.work = append(f.work, i)
}

// returns says whether a call at i, which leaves state s, may return:
// no callee returns where the pcsp rows show no frame for s or no row at
// all, past the NOPs that follow a call to a function that panics.
func (f *function) returns(i int, s state) bool {
	j := i + 1
	for j < len(f.insns) && f.eff[j].nop && f.insns[j].err == nil {
		j++
	}
	return j < len(f.insns) && f.insns[j].err == nil && f.consistent(s, j)
}

// run empties the work list.
func (f *function) run() error {
	for len(f.work) > 0 && f.fail == nil && f.derr == nil {
		i := f.work[len(f.work)-1]
		f.work = f.work[:len(f.work)-1]
		if f.insns[i].err != nil {
			return &DecodeError{PC: f.insns[i].pc, Err: f.insns[i].err}
		}
		if !f.known[i] {
			return fmt.Errorf("goprologue: no SP delta for the instruction at %#x, which the code reaches", f.insns[i].pc)
		}
		f.step(i, *f.in[i])
	}
	if f.derr != nil {
		return f.derr
	}
	return nil
}

// step applies instruction i to the state before it and passes the
// result on along each way out.
func (f *function) step(i int, s state) {
	e := f.eff[i]
	if e.spWrite {
		if !e.spKnown {
			f.failAt(i, ReasonSPWrite)
			return
		}
		// While the frame pointer is saved, its slot is found through SP,
		// so the pcsp rows must move with SP; after the restore they may
		// lag (arm64 Go before 1.25 pops large frames in two ADDs).
		if n := i + 1; s.saved && n < len(f.insns) && f.known[n] && f.delta[n] != f.delta[i]+e.spDelta {
			f.failAt(i, ReasonSPMismatch)
			return
		}
	}
	switch e.fp {
	case fpStore:
		if e.addrKnown && !s.saved && s.holds {
			s = state{saved: true, slot: e.addr, holds: true}
		}
	case fpLoad, fpWrite, fpCaller:
		if s.saved && (e.fp == fpCaller || e.fp == fpLoad && e.addrKnown && e.addr == s.slot) {
			s = state{holds: true}
			break
		}
		if !s.saved {
			f.failAt(i, ReasonClobbered)
			return
		}
		s.holds = false
	}
	f.leave(i, e, s)
}

// leave passes state s on from instruction i along the ways out of it.
func (f *function) leave(i int, e effect, s state) {
	next := func() {
		if i+1 < len(f.insns) {
			f.join(i+1, s)
		} else if !f.weak {
			f.failAt(i, ReasonFallsOff)
		}
	}
	out := func() {
		if !s.holds {
			f.failAt(i, ReasonNotRestored)
		}
	}
	switch e.flow {
	case flowNext:
		next()
	case flowCall:
		if f.returns(i, s) {
			next()
		}
	case flowBranch, flowJump:
		if j, ok := f.at(e.target); ok {
			f.join(j, s)
		} else if e.target >= f.entry && e.target < f.end {
			f.badTarget(i, e.target)
		} else {
			out()
		}
		if e.flow == flowBranch {
			next()
		}
	case flowIndirect:
		if !s.saved {
			out()
		}
	case flowReturn:
		out()
	}
}

// badTarget handles a jump from i into the middle of an instruction: a
// jump into bytes that did not decode (x86 code is split from the
// start, so one undecodable instruction swallows the rest) is a decode
// error there; any other means the code is not what it was decoded as.
func (f *function) badTarget(i int, target uint64) {
	k := sort.Search(len(f.insns), func(k int) bool { return f.insns[k].pc > target }) - 1
	if k >= 0 && f.insns[k].err != nil && f.derr == nil {
		f.derr = &DecodeError{PC: f.insns[k].pc, Err: f.insns[k].err}
		return
	}
	f.failAt(i, ReasonBadTarget)
}

// result turns the states into rules.
func (f *function) result() Result {
	var rules []Rule
	for i, s := range f.in {
		if s == nil {
			continue
		}
		r := Rule{PC: f.insns[i].pc, Saved: s.saved}
		if s.saved {
			r.Offset = s.slot - f.arch.cfa
		}
		if n := len(rules); n > 0 && rules[n-1].Saved == r.Saved && rules[n-1].Offset == r.Offset {
			continue
		}
		rules = append(rules, r)
	}
	if len(rules) > 0 {
		rules[0].PC = f.entry
	}
	if len(rules) == 1 && !rules[0].Saved {
		return Result{Kind: Frameless}
	}
	return Result{Kind: Described, Rules: rules}
}
