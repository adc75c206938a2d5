package codeflow

import (
	"cmp"
	"debug/elf"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// arches gives the instruction set of a machine; arm64.go adds AArch64.
var arches = map[elf.Machine]func() arch{elf.EM_X86_64: newAMD64, elf.EM_AARCH64: newARM64}

// frameRegs are the DWARF numbers of a machine's stack and frame
// pointers, whose values must agree where paths meet.
var frameRegs = map[elf.Machine][2]int{
	elf.EM_X86_64:  {amdRSP, amdRBP},
	elf.EM_AARCH64: {31, 29},
}

// maxInsns bounds the instructions one walk keeps a state for: a state
// is about 560 bytes, so a walk takes at most about 150 MB, one per CPU
// (the largest functions of libLLVM and chromium have some tens of
// thousands of instructions; past the bound, bytes read as code are
// likely data).
const maxInsns = 1 << 18

// histLen is how many instructions back walk.block reaches.
const histLen = 24

// Analyze walks each entry of c that c.Described does not cover and gives
// the rows of the code it reaches (emit) or why it left the entry out
// (skip, one per entry).
//
// An entry found only after padding (FromPadding) may be a jump-table
// target or a cold part after a function's padding as well as a
// function (libstdc++ has such): it is kept only when its walk returns
// (reaches a return with the entry's state). Such code that is not a
// function has a frame in place, which its own pops then take the stack
// pointer above the entry's (left out), or it jumps back into its
// function's body, which looks like a tail call and does not return;
// one that returns with no pops ran on its function's entry state,
// which is then right.
//
// No two Funcs overlap, by these rules:
//   - A walk that jumps, with a frame in place, to another entry's start
//     takes that code as part of its function (GCC's foo.cold, which has
//     a symbol and an FDE of its own but is entered with foo's frame).
//     Such an entry's own walk, from the entry's state, which would be
//     wrong there, is dropped. A jump to another entry with the frame
//     gone is a tail call; falling into another entry with a frame
//     (after a call that does not return but that c.NoReturn does not
//     know) ends the path, since no state can be proven there.
//   - Every entry is walked once, on all CPUs (c is only read), keeping
//     its Funcs and the code it reached (merged extents, a few words a
//     function). Two walks that reach the same code are both left out
//     (ReasonShared, conflicts), whether or not either failed: one of
//     them entered code that is not its own, and which cannot be told.
//     Then the Funcs are emitted, entry by entry in address order, each
//     entry's in Start order (so the output depends on nothing but c).
//     Memory grows with the instructions of the functions being walked
//     and with every function's rows, which the output holds anyway.
func Analyze(c *Code, emit func(Func), skip func(Skip)) {
	mk, regs := arches[c.Machine], frameRegs[c.Machine]
	if mk == nil {
		for _, e := range c.Entries {
			if !c.described(e.Addr) {
				skip(Skip{Start: e.Addr, End: e.End, Entry: e.Addr, Reason: ReasonUndecodable, At: e.Addr,
					Detail: fmt.Sprintf("no instruction set for machine %v", c.Machine)})
			}
		}
		return
	}
	// Calls to the file's own functions that never return end a path,
	// as calls to exit do.
	c = InferNoReturn(c)
	results := walkAll(c, mk, regs, c.Entries)
	// Code a walk jumped to with its frame gone, where no entry starts,
	// is a function entered by a tail call only (no call, pointer or
	// symbol names it): walked as an entry in a further round, at most
	// maxRounds. A round's new entries end where the next entry starts.
	for range maxRounds {
		// Only walks that succeed, and share no code with another, are
		// trusted to have proven a tail call: a walk from a wrong entry
		// (inside a function, with its frame) would take a jump of that
		// function's for one.
		results = dropParts(results)
		conflicts(results)
		fresh := tailEntries(c, results)
		if len(fresh) == 0 {
			break
		}
		cc := *c
		cc.Entries = mergeEntries(c, fresh)
		c = &cc
		rewalk(c, mk, regs, results, fresh)
		results = append(results, walkAll(c, mk, regs, fresh)...)
	}
	results = dropParts(results)
	conflicts(results)
	for _, r := range results {
		if r.fail != nil {
			end := r.entry.End
			if end == 0 {
				end = r.last
			}
			skip(Skip{Start: r.entry.Addr, End: end, Entry: r.entry.Addr, Reason: r.fail.reason, At: r.fail.at, Detail: r.fail.detail})
			continue
		}
		for i := range r.funcs {
			emit(r.funcs[i].fn())
		}
	}
}

// walkResult is one entry's walk: its Funcs or why it failed, and the code
// it reached either way.
type walkResult struct {
	entry   Entry
	funcs   []heldFunc // rows.go
	fail    *fail
	reached extents
	last    uint64
	parts   map[uint64]bool // other entries it jumped to with a frame in place
	tails   []uint64        // code without an entry it tail-called
	framed  uint64          // a tail-called entry it reached with a frame in place (0: none)
	skipped bool            // described: not walked
}

// dropParts drops the walks of skipped entries and of entries another
// walk jumped to with its frame in place: such an entry is a part of
// that function (foo.cold), and its own walk, from the entry's state, is
// wrong.
func dropParts(results []walkResult) []walkResult {
	parts := map[uint64]bool{}
	for i := range results {
		for p := range results[i].parts {
			parts[p] = true
		}
	}
	return slices.DeleteFunc(results, func(r walkResult) bool { return r.skipped || parts[r.entry.Addr] })
}

// maxRounds is how many rounds of entries found by tail calls Analyze
// walks after the first.
const maxRounds = 3

// walkAll walks entries on all CPUs, each result at its entry's index.
func walkAll(c *Code, mk func() arch, regs [2]int, entries []Entry) []walkResult {
	results := make([]walkResult, len(entries))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(entries)/64)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := mk()
			var w *walk // this goroutine's buffers, reused walk after walk
			for i := int(next.Add(1) - 1); i < len(entries); i = int(next.Add(1) - 1) {
				results[i], w = walkEntry(c, a, regs, entries[i], w)
			}
		}()
	}
	wg.Wait()
	return results
}

// tailEntries are the targets of the tail calls of results that no entry
// of c starts, sorted, as entries (FromTailCall), each ending at the next
// entry of either kind or at the end of its executable range.
func tailEntries(c *Code, results []walkResult) []Entry {
	seen := map[uint64]bool{}
	var out []Entry
	for _, r := range results {
		if r.fail != nil || r.skipped {
			continue
		}
		for _, t := range r.tails {
			if !seen[t] && !c.isEntry(t) {
				seen[t] = true
				out = append(out, Entry{Addr: t, Source: FromTailCall})
			}
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Addr, b.Addr) })
	return out
}

// mergeEntries is c's entries and fresh, sorted, fresh's ends set.
func mergeEntries(c *Code, fresh []Entry) []Entry {
	all := append(slices.Clone(c.Entries), fresh...)
	slices.SortFunc(all, func(a, b Entry) int { return cmp.Compare(a.Addr, b.Addr) })
	for i := range all {
		if all[i].Source != FromTailCall {
			continue
		}
		end := uint64(0)
		if t := c.textRange(all[i].Addr); t >= 0 {
			end = c.Text[t].Addr + uint64(len(c.Text[t].Data))
		}
		if i+1 < len(all) && all[i+1].Addr < end {
			end = all[i+1].Addr
		}
		all[i].End = end
		for j := range fresh {
			if fresh[j].Addr == all[i].Addr {
				fresh[j].End = end
			}
		}
	}
	return all
}

// rewalk walks again, with c's entries (fresh among them), the walks of
// results that succeeded and reached a fresh entry past their own:
// hand-written assembly (dav1d's) enters one body from several entry
// points, one jumping to it with its frame gone (the tail call that made
// it an entry), another running into it. Walked before the body was an
// entry, the second took the body for its own, and the two walks then
// shared it and both failed. Walked again, it stops at the body when it
// arrives with the entry's state, as at any entry, and fails when it
// arrives with a frame in place (arrive).
func rewalk(c *Code, mk func() arch, regs [2]int, results []walkResult, fresh []Entry) {
	var again []Entry
	var at []int
	for i, r := range results {
		if r.fail != nil || r.skipped {
			continue
		}
		for _, e := range fresh {
			if e.Addr != r.entry.Addr && r.reached.overlaps(e.Addr, e.Addr+1) {
				again = append(again, r.entry)
				at = append(at, i)
				break
			}
		}
	}
	for k, r := range walkAll(c, mk, regs, again) {
		results[at[k]] = r
	}
}

// tailCalled says pc is an entry found as a tail call's target only.
func (c *Code) tailCalled(pc uint64) bool {
	es := c.Entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Addr >= pc })
	return i < len(es) && es[i].Addr == pc && es[i].Source == FromTailCall
}

// isEntry says an entry of c starts at pc.
func (c *Code) isEntry(pc uint64) bool {
	es := c.Entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Addr >= pc })
	return i < len(es) && es[i].Addr == pc
}

// walkEntry walks one entry (on any goroutine: c is only read). prev,
// when not nil, is the last walk of the same goroutine: its buffers are
// reused (allocating them afresh for every entry was two thirds of the
// time the walks of libLLVM took, in growing slices and collecting
// them); the walk it made is returned for the next call.
func walkEntry(c *Code, a arch, regs [2]int, e Entry, prev *walk) (walkResult, *walk) {
	if c.described(e.Addr) {
		return walkResult{entry: e, skipped: true}, prev
	}
	w := prev
	if w == nil {
		w = newWalk(c, a, regs, e)
	} else {
		w.reset(e)
	}
	funcs, f := w.funcs()
	if f == nil && e.Source >= FromPointer && !w.returned {
		// A guessed start (a pointer into code, the end of a padding
		// run) walked from an entry's state without a return proves
		// nothing: a computed goto's label or a case block of a
		// stripped PIE, reached from its function with a frame in
		// place, ends in jumps that look like tail calls from there.
		f = &fail{failure{ReasonNotEntry, "found only by a pointer or after padding, and no path returns: a computed goto's label, a jump-table target or a cold part, not a function"}, e.Addr}
	}
	held := make([]heldFunc, len(funcs))
	for i := range funcs {
		held[i] = hold(funcs[i])
	}
	return walkResult{entry: e, funcs: held, fail: f, reached: withFuncs(w.reached(), funcs), last: w.last, parts: w.parts, tails: w.tails, framed: w.framed}, w
}

// keepBuf is the most instructions whose buffers a walk keeps for the
// next (reset): past it they are dropped, so that one huge function
// does not hold its states (and make clearing the index slow) for the
// rest of the run.
const keepBuf = 1 << 13

// reset makes w, a finished walk, a new walk from e, keeping its
// buffers (those of at most keepBuf instructions) but nothing the last
// walk's result holds (parts, tails).
func (w *walk) reset(e Entry) {
	if len(w.recs) > keepBuf {
		w.recs, w.index, w.order, w.rowBuf = nil, map[uint64]int32{}, nil, nil
	} else {
		clear(w.index)
	}
	*w = walk{code: w.code, arch: w.arch, regs: w.regs, entry: e, index: w.index, entrySP: w.entrySP,
		recs: w.recs[:0], work: w.work[:0], block: w.block[:0], solo: w.solo[:0], order: w.order[:0], pcs: w.pcs[:0], rowBuf: w.rowBuf[:0]}
}

// conflicts fails every walk whose code another walk reached too (walks
// that failed count: they reached it all the same). Two functions do not
// share code; when two walks do, at least one entered code that is not
// its own (a call taken to return that does not, falling into a
// neighbour's cold part; a jump-table target taken for a function), and
// which one cannot be told: neither gives rows.
func conflicts(results []walkResult) {
	type event struct {
		at    uint64
		end   bool
		owner int
	}
	framed := map[uint64]uint64{}
	for _, r := range results {
		if r.framed != 0 {
			framed[r.framed] = r.entry.Addr
		}
	}
	for i := range results {
		if other, ok := framed[results[i].entry.Addr]; ok {
			shared(&results[i], other, results[i].entry.Addr)
		}
	}
	var ev []event
	for i, r := range results {
		for _, x := range r.reached {
			ev = append(ev, event{x.lo, false, i}, event{x.hi, true, i})
		}
	}
	sort.Slice(ev, func(a, b int) bool {
		if ev[a].at != ev[b].at {
			return ev[a].at < ev[b].at
		}
		return ev[a].end && !ev[b].end // an end before a start at the same address
	})
	active := map[int]int{}
	for _, e := range ev {
		if e.end {
			if active[e.owner]--; active[e.owner] == 0 {
				delete(active, e.owner)
			}
			continue
		}
		for o := range active {
			if o != e.owner {
				shared(&results[o], results[e.owner].entry.Addr, e.at)
				shared(&results[e.owner], results[o].entry.Addr, e.at)
			}
		}
		active[e.owner]++
	}
}

// shared fails r, whose code at pc the walk from other reached too.
func shared(r *walkResult, other, pc uint64) {
	if r.fail == nil {
		r.fail = &fail{failure{ReasonShared, fmt.Sprintf("the walk from the entry at %#x reaches this function's code at %#x too", other, pc)}, pc}
	}
}

// reached is the code the walk reached, as merged extents.
func (w *walk) reached() extents {
	pcs := w.pcs[:0]
	for i := range w.recs {
		pcs = append(pcs, w.recs[i].pc)
	}
	w.pcs = pcs
	slices.Sort(pcs)
	var out extents
	for _, pc := range pcs {
		n := uint64(1)
		if j, ok := w.index[pc]; ok && w.recs[j].n > 0 {
			n = uint64(w.recs[j].n)
		}
		out.add(pc, pc+n)
	}
	return out
}

func (c *Code) described(pc uint64) bool { return c.Described != nil && c.Described(pc, pc+1) }

// fail is a failure and the instruction it was found at.
type fail struct {
	failure
	at uint64
}

// extents is a sorted list of disjoint [lo, hi) ranges, adjacent ones merged.
type extents []struct{ lo, hi uint64 }

func (x extents) overlaps(lo, hi uint64) bool {
	i := sort.Search(len(x), func(i int) bool { return x[i].hi > lo })
	return i < len(x) && x[i].lo < hi
}

func (x *extents) add(lo, hi uint64) {
	s := *x
	i := sort.Search(len(s), func(i int) bool { return s[i].hi >= lo })
	if i < len(s) && s[i].lo <= hi { // touches s[i]: grow it, then swallow what it reaches
		s[i].lo, s[i].hi = min(s[i].lo, lo), max(s[i].hi, hi)
		j := i + 1
		for j < len(s) && s[j].lo <= s[i].hi {
			s[i].hi = max(s[i].hi, s[j].hi)
			j++
		}
		*x = append(s[:i+1], s[j:]...)
		return
	}
	s = append(s, struct{ lo, hi uint64 }{})
	copy(s[i+1:], s[i:])
	s[i].lo, s[i].hi = lo, hi
	*x = s
}

func newWalk(c *Code, a arch, regs [2]int, e Entry) *walk {
	w := &walk{code: c, arch: a, regs: regs, entry: e, index: map[uint64]int32{}}
	w.entrySP = a.entry().Regs[regs[0]].Off
	return w
}

// bytes gives the code from pc to the end of its executable range, nil
// outside them.
func (w *walk) bytes(pc uint64) []byte { return w.code.bytes(pc) }

// bytes gives the code from pc to the end of its executable range, nil
// outside them.
func (c *Code) bytes(pc uint64) []byte {
	if i := c.textRange(pc); i >= 0 {
		r := c.Text[i]
		return r.Data[pc-r.Addr:]
	}
	return nil
}

// single asks that the instruction at pc have one predecessor when the
// walk ends, for the jump table at jump resolved through it.
func (w *walk) single(jump uint64, pcs ...uint64) {
	for _, pc := range pcs {
		w.solo = append(w.solo, soloCheck{pc, jump})
	}
}

// inside says a jump table's target t, for the jump at pc, is code of this
// function: in the entry's extent when that is known (and the jump too),
// else in the jump's executable range.
func (w *walk) inside(pc, t uint64) bool {
	if e := w.entry; e.End != 0 {
		return e.Addr <= pc && pc < e.End && e.Addr <= t && t < e.End
	}
	return w.textRange(pc) >= 0 && w.textRange(pc) == w.textRange(t)
}

// textRange is the index of the executable range holding pc, or -1.
func (w *walk) textRange(pc uint64) int { return w.code.textRange(pc) }

// textRange is the index of the executable range holding pc, or -1.
func (c *Code) textRange(pc uint64) int {
	t := c.Text
	i := sort.Search(len(t), func(i int) bool { return t[i].Addr+uint64(len(t[i].Data)) > pc })
	if i < len(t) && t[i].Addr <= pc {
		return i
	}
	return -1
}

// isEntry says pc is the start of an entry other than the walk's own.
func (w *walk) isEntry(pc uint64) bool { return pc != w.entry.Addr && w.code.isEntry(pc) }

// path is w.block for the instruction being stepped: the instructions
// before it on one path, oldest first, found only when a step asks (jump
// tables do; finding it for every instruction took a fifth of a walk).
func (w *walk) path() []uint64 {
	if w.pathOf != w.cur {
		w.history(w.cur)
		w.pathOf = w.cur
	}
	return w.block
}

// history fills w.block for the instruction at rec i.
func (w *walk) history(i int32) {
	w.block = w.block[:0]
	r := &w.recs[i]
	for len(w.block) < histLen && r.hasPred {
		j, ok := w.index[r.pred]
		if !ok {
			break
		}
		r = &w.recs[j]
		w.block = append(w.block, r.pc)
	}
	for l, h := 0, len(w.block)-1; l < h; l, h = l+1, h-1 {
		w.block[l], w.block[h] = w.block[h], w.block[l]
	}
}

// run walks the entry's paths: nil when every path ended well.
func (w *walk) run() *fail {
	w.st = w.arch.entry()
	if f := w.arrive(0, false, w.entry.Addr, &w.st, true); f != nil {
		return f
	}
	for len(w.work) > 0 {
		i := w.work[len(w.work)-1]
		w.work = w.work[:len(w.work)-1]
		w.recs[i].queued = false
		pc := w.recs[i].pc
		w.cur, w.pathOf = i, -1 // w.path() fills w.block when a step asks
		// The state is stepped in w.st, not in a local the compiler
		// moves to the heap (560 bytes an instruction).
		w.st = w.recs[i].s
		s := &w.st
		nx, err := w.arch.step(w, w.bytes(pc), pc, s)
		if err != nil {
			return w.failAt(pc, err)
		}
		if nx.len <= 0 || nx.len > 255 {
			return &fail{failure{ReasonUndecodable, fmt.Sprintf("instruction length %d", nx.len)}, pc}
		}
		if sp := w.regs[0]; nx.flow != flowReturn && s.Regs[sp].Known && s.Regs[sp].Off > w.entrySP {
			// Above the entry's stack pointer: the code pops what its
			// entry did not push, so it was entered with a frame in place
			// (a jump-table target or a cold part taken for a function).
			return &fail{failure{ReasonStates, fmt.Sprintf("the stack pointer goes above the entry's, to CFA%+d: not a function's entry", s.Regs[sp].Off)}, pc}
		}
		w.recs[i].n = uint8(nx.len)
		w.last = max(w.last, pc+uint64(nx.len))
		if f := w.follow(pc, nx, s); f != nil {
			return f
		}
	}
	rechecked := map[uint64]bool{}
	for _, c := range w.solo {
		if j, ok := w.index[c.pc]; ok && w.recs[j].multi {
			// The path the table was resolved on is not the only one:
			// an arch that can prove the bound on each path does so.
			ok, seen := rechecked[c.jump]
			if !seen {
				if rc, is := w.arch.(rechecker); is {
					ok = rc.recheck(w, c.jump)
				}
				rechecked[c.jump] = ok
			}
			if ok {
				continue
			}
			return &fail{failure{ReasonIndirect, fmt.Sprintf("another path reaches %#x, bypassing the bounds check of the jump table", c.pc)}, c.jump}
		}
	}
	return w.scannedJoins()
}

func (w *walk) failAt(pc uint64, err error) *fail {
	if f, ok := err.(*failure); ok {
		return &fail{*f, pc}
	}
	return &fail{failure{ReasonUndecodable, err.Error()}, pc}
}

// follow takes the paths out of the instruction at pc, s its state after.
func (w *walk) follow(pc uint64, nx next, s *State) *fail {
	end := pc + uint64(nx.len)
	switch nx.flow {
	case flowNext:
		return w.arrive(pc, true, end, s, false)
	case flowCall:
		if nx.target != 0 && w.code.NoReturn != nil && w.code.NoReturn(nx.target) {
			return nil
		}
		return w.arrive(pc, true, end, s, false)
	case flowJump:
		return w.arrive(pc, true, nx.target, s, true)
	case flowBranch:
		if f := w.arrive(pc, true, nx.target, s, true); f != nil {
			return f
		}
		return w.arrive(pc, true, end, s, false)
	case flowTable:
		for _, t := range nx.targets {
			if f := w.arrive(pc, true, t, s, true); f != nil {
				return f
			}
		}
	case flowIndirect:
		if !w.arch.tail(s) {
			return &fail{failure{ReasonIndirect, "an indirect jump with the frame in place and no jump table found"}, pc}
		}
	case flowReturn:
		w.returned = true
		if s.FP.Where == Lost {
			return &fail{failure{ReasonFPLost, "a return with the caller's frame pointer overwritten"}, pc}
		}
		if !w.arch.tail(s) {
			return &fail{failure{ReasonReturn, "a return with the stack not as at the entry"}, pc}
		}
	}
	return nil
}

// arrive takes a path from the instruction at from (none for the entry)
// to pc with state s: a new instruction is queued; one reached before
// must agree on the frame (stack and frame pointers, where the caller's
// frame pointer and return address are), and keeps only what both paths
// know of the other registers, stepped again when that lost something.
func (w *walk) arrive(from uint64, hasFrom bool, pc uint64, s *State, jump bool) *fail {
	e := w.entry
	if jump && w.arch.tail(s) && e.End != 0 && (pc < e.Addr || pc >= e.End) {
		// A tail call to code without an entry of its own: one, for a
		// later round.
		if !w.isEntry(pc) && !w.code.described(pc) && w.bytes(pc) != nil {
			w.tails = append(w.tails, pc)
		}
		return nil
	}
	if !jump && hasFrom && e.End != 0 && from >= e.Addr && from < e.End && pc >= e.End {
		// Falling off the function's known end: after a call that does
		// not return, into what follows (padding, a landing pad, another
		// function): no state can be proven there.
		return nil
	}
	if w.isEntry(pc) {
		if w.arch.tail(s) {
			return nil // a tail call, or a fall into the next function with no frame
		}
		if w.code.tailCalled(pc) {
			// Code another function enters with its frame gone, this one
			// with a frame: no one state holds there, for either walk
			// (conflicts fails the entry's too).
			w.framed = pc
			return &fail{failure{ReasonShared, fmt.Sprintf("a path reaches %#x, which another function tail-calls, with a frame in place", pc)}, from}
		}
		if !jump {
			return nil // a fall, frame in place, into the next function
		}
		if w.parts == nil {
			w.parts = map[uint64]bool{}
		}
		w.parts[pc] = true
	}
	if w.bytes(pc) == nil {
		return &fail{failure{ReasonOutside, fmt.Sprintf("a path goes to %#x, outside the executable code", pc)}, from}
	}
	if w.code.described(pc) {
		return nil
	}
	if w.code.Data != nil && w.code.Data(pc) {
		return &fail{failure{ReasonData, fmt.Sprintf("a path reaches %#x, data inside the code", pc)}, from}
	}
	i, ok := w.index[pc]
	if !ok {
		if len(w.recs) >= maxInsns {
			return &fail{failure{ReasonLimit, fmt.Sprintf("over %d instructions", maxInsns)}, pc}
		}
		i = int32(len(w.recs))
		w.recs = append(w.recs, rec{s: *s, pc: pc, pred: from, hasPred: hasFrom, queued: true})
		w.index[pc] = i
		w.work = append(w.work, i)
		return nil
	}
	r := &w.recs[i]
	if !hasFrom || !r.hasPred || r.pred != from {
		r.multi = true
		if hasFrom && !slices.Contains(w.preds[pc], from) {
			if w.preds == nil {
				w.preds = map[uint64][]uint64{}
			}
			w.preds[pc] = append(w.preds[pc], from)
		}
	}
	// Where the caller's frame pointer and return address are, and the
	// signing, must be the same on every path. What the registers hold
	// is intersected, SP and FP too: what is left known holds on every
	// path, so a rule given from it does (an alloca path and a fixed one
	// meet under a frame pointer; rbp, saved, used as a general
	// register). Only when no rule is left do the paths differ.
	if r.s.FP != s.FP || r.s.RA != s.RA || r.s.RASigned != s.RASigned || r.s.BKey != s.BKey {
		return w.differ(from, pc, &r.s, s)
	}
	was := r.s
	lost := false
	for k := range r.s.Regs {
		if r.s.Regs[k].Known && r.s.Regs[k] != s.Regs[k] {
			r.s.Regs[k] = Val{}
			lost = true
		}
	}
	if lost {
		if _, err := w.arch.rule(&r.s); err != nil {
			return w.differ(from, pc, &was, s)
		}
	}
	if lost && !r.queued {
		r.queued = true
		w.work = append(w.work, i)
	}
	return nil
}

// differ is the failure of paths that reach pc with states a and b no
// one rule holds for.
func (w *walk) differ(from, pc uint64, a, b *State) *fail {
	return &fail{failure{ReasonStates, fmt.Sprintf("paths from %#x and before reach %#x with different frames: %s and %s",
		from, pc, frameString(a, w.regs), frameString(b, w.regs))}, pc}
}

func frameString(s *State, regs [2]int) string {
	v := func(x Val) string {
		if !x.Known {
			return "?"
		}
		return fmt.Sprintf("CFA%+d", x.Off)
	}
	p := func(x Saved) string {
		switch x.Where {
		case InReg:
			return "reg"
		case OnStack:
			return fmt.Sprintf("CFA%+d", x.Off)
		}
		return "lost"
	}
	return fmt.Sprintf("{sp %s fp %s savedfp %s ra %s signed %v}", v(s.Regs[regs[0]]), v(s.Regs[regs[1]]), p(s.FP), p(s.RA), s.RASigned)
}

// funcs walks the entry and gives its Funcs: runs of adjacent reached
// instructions, split where another entry starts, and joined across
// padding no path runs (joinable). A Row starts where the
// rule changes or where what is known of the stack or frame pointer
// (Row.SP, Row.FPVal) changes, so that every field of a row holds at each
// instruction it covers.
func (w *walk) funcs() ([]Func, *fail) {
	if f := w.run(); f != nil {
		return nil, f
	}
	order := w.order[:0]
	for i := range w.recs {
		order = append(order, int32(i))
	}
	w.order = order
	sort.Slice(order, func(a, b int) bool { return w.recs[order[a]].pc < w.recs[order[b]].pc })
	var out []Func
	var cur *Func
	var last uint64 // the last instruction of cur
	// The rows of every Func go to one buffer, kept for the next walk
	// (each Func's rows are its end while it is cur): walkEntry copies
	// them (hold) before the next walk writes over them.
	rows := w.rowBuf[:0]
	first := 0 // where cur's rows start in rows
	for _, i := range order {
		r := &w.recs[i]
		row, err := w.arch.rule(&r.s)
		if err != nil {
			return nil, w.failAt(r.pc, err)
		}
		row.PC = r.pc
		if cur != nil && r.pc < cur.End {
			// A path into the middle of another instruction: the bytes
			// read two ways are data, or code no row can describe.
			return nil, &fail{failure{ReasonData, fmt.Sprintf("a path reaches %#x, inside the instruction at %#x", r.pc, last)}, r.pc}
		}
		if cur != nil && cur.End < r.pc && (!w.isEntry(r.pc) || w.parts[r.pc]) && w.joinable(last, cur.End, r.pc) {
			// Padding between two runs of this walk's code, never run:
			// one Func (one FDE fewer), the padding taking the row of the
			// instruction after it.
			pad := row
			pad.PC = cur.End
			rows = append(rows, pad)
			cur.End = r.pc
		}
		if cur == nil || cur.End != r.pc || w.isEntry(r.pc) && !w.parts[r.pc] {
			if cur != nil {
				cur.Rows = rows[first:len(rows):len(rows)]
			}
			out = append(out, Func{Start: r.pc, Entry: w.entry.Addr})
			cur = &out[len(out)-1]
			first = len(rows)
		}
		if n := len(rows); n == first || !sameRow(&rows[n-1], &row) {
			rows = append(rows, row)
		}
		cur.End = r.pc + uint64(r.n)
		last = r.pc
	}
	if cur != nil {
		cur.Rows = rows[first:len(rows):len(rows)]
	}
	w.rowBuf = rows
	return out, nil
}

func sameRow(a, b *Row) bool {
	x, y := *a, *b
	x.PC, y.PC = 0, 0
	return x == y
}
