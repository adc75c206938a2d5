package codeflow

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// maxReturnScan is how many instructions a scan follows from one entry
// (its own, not its callees'); past it the entry is taken to return.
const maxReturnScan = 1 << 16

// InferNoReturn returns a copy of c whose NoReturn also says so of the
// file's own functions that never return (objtool's dead ends): a
// function none of whose paths reaches a return, an indirect jump or a
// tail call to a function that returns, a call to a function known not
// to return ending its path, as a call to exit does. The code after a
// call to it belongs to whatever follows (another function, a landing
// pad), which a walk must not give the caller's state. Analyze does this
// itself; CheckRules's callers do it once per file, so that both agree
// on where a path ends.
//
// The set is found before any walk asks, as the least fixed point over
// c's entries (noReturnSet): it depends on c alone. A cache filled as the
// walks asked, with a guess for a function still being scanned, gave
// answers that depended on which walk asked first, so two runs on two
// CPUs could write different rows. When unsure (a call into code no
// entry starts, a scan too long, code CFI describes) a function is taken
// to return: the walk then goes on after the call, as it does for calls
// it knows nothing of.
func InferNoReturn(c *Code) *Code {
	mk := arches[c.Machine]
	if mk == nil {
		return c
	}
	set := noReturnSet(c, mk)
	if len(set) == 0 {
		return c
	}
	named := c.NoReturn
	cc := *c
	cc.NoReturn = func(addr uint64) bool { return set[addr] || named != nil && named(addr) }
	return &cc
}

// noReturnSet is the entries of c that never return. Round by round,
// every entry still taken to return whose scan asked about a function
// the round before added is scanned again, from the set as it stood at
// the round's start, until a round adds none; the first round scans
// every entry. Adding a function can only end more paths, so the set
// only grows and the rounds end. Each round's scans run on all CPUs and
// write only their own slots, so neither their order nor their number
// changes the result.
func noReturnSet(c *Code, mk func() arch) map[uint64]bool {
	n := len(c.Entries)
	set := map[uint64]bool{}
	returns := make([]bool, n)
	asked := make([][]uint64, n) // the functions each scan's answer rests on
	todo := make([]int, 0, n)
	for i, e := range c.Entries {
		if !c.described(e.Addr) {
			todo = append(todo, i)
		}
	}
	isNo := func(addr uint64) bool { return set[addr] || c.NoReturn != nil && c.NoReturn(addr) }
	for len(todo) > 0 {
		scanAll(c, mk, todo, isNo, returns, asked)
		added := map[uint64]bool{}
		for _, i := range todo {
			if !returns[i] {
				added[c.Entries[i].Addr] = true
				asked[i] = nil
			}
		}
		if len(added) == 0 {
			break
		}
		for a := range added {
			set[a] = true
		}
		todo = todo[:0]
		for i := range asked {
			if returns[i] && slices.ContainsFunc(asked[i], func(a uint64) bool { return added[a] }) {
				todo = append(todo, i)
			}
		}
	}
	return set
}

// scanAll scans the entries of c at the indices todo on all CPUs,
// setting returns and asked at each.
func scanAll(c *Code, mk func() arch, todo []int, isNo func(uint64) bool, returns []bool, asked [][]uint64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(todo)/64)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := &scanner{code: c, arch: mk(), isNo: isNo, seen: map[uint64]bool{}}
			for k := int(next.Add(1) - 1); k < len(todo); k = int(next.Add(1) - 1) {
				i := todo[k]
				returns[i] = sc.scan(c.Entries[i].Addr)
				asked[i] = slices.Clone(sc.asked)
			}
		}()
	}
	wg.Wait()
}

// scanner is one goroutine's scans, with buffers reused from one to the
// next (a walk, a map and a work list for every scan were a fifth of
// chromium's allocations).
type scanner struct {
	code  *Code
	arch  arch
	isNo  func(uint64) bool
	w     *walk
	seen  map[uint64]bool
	todo  []uint64
	asked []uint64 // the last scan's: functions taken to return that it went on past
}

// scan follows every instruction reachable from entry, by control flow
// alone (each stepped from the entry's state: only where it goes
// matters), and says whether a path returns. Calls to functions isNo
// names end a path, other calls go on after the call, and a jump to
// another entry is a tail call that returns unless isNo names it; the
// functions so taken to return are kept in asked.
func (s *scanner) scan(entry uint64) bool {
	if s.w == nil {
		s.w = newWalk(s.code, s.arch, [2]int{}, Entry{Addr: entry})
	} else {
		s.w.reset(Entry{Addr: entry})
	}
	if len(s.seen) > keepBuf {
		s.seen = map[uint64]bool{}
	} else {
		clear(s.seen)
	}
	s.asked = s.asked[:0]
	w, seen, c := s.w, s.seen, s.code
	todo := append(s.todo[:0], entry)
	defer func() { s.todo = todo[:0] }()
	var st State // one for the scan: a State per instruction went to the heap
	for len(todo) > 0 {
		pc := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[pc] {
			continue
		}
		if len(seen) >= maxReturnScan || c.described(pc) {
			return true
		}
		seen[pc] = true
		b := w.bytes(pc)
		if b == nil {
			return true // off the code: unknown
		}
		st = s.arch.entry()
		nx, err := s.arch.step(w, b, pc, &st)
		if err != nil || nx.len <= 0 {
			return true
		}
		end := pc + uint64(nx.len)
		switch nx.flow {
		case flowNext:
			todo = append(todo, end)
		case flowCall:
			if nx.target == 0 || !s.isNo(nx.target) {
				if nx.target != 0 && c.isEntry(nx.target) {
					s.asked = append(s.asked, nx.target)
				}
				todo = append(todo, end)
			}
		case flowBranch:
			todo = append(todo, nx.target, end)
		case flowJump:
			if c.isEntry(nx.target) && nx.target != entry {
				if !s.isNo(nx.target) {
					s.asked = append(s.asked, nx.target)
					return true // a tail call to a function that returns
				}
				continue
			}
			todo = append(todo, nx.target)
		case flowReturn, flowIndirect, flowTable:
			return true
		}
	}
	return false
}
