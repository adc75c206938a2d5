package codeflow

import "sync"

// maxReturnScan is how many instructions returns follows from one entry
// (its own, not its callees'); past it the entry is taken to return.
const maxReturnScan = 1 << 16

// maxReturnDepth is how deep returns follows calls into other entries.
const maxReturnDepth = 8

// returnsCache tells whether a call to one of a file's own functions can
// come back (objtool's dead-end functions): a function none of whose
// paths reaches a return or a jump out (a tail call, an indirect jump)
// does not, and the code after a call to it belongs to whatever follows
// (another function, a landing pad), which a walk must not give the
// caller's state. When unsure it says the function returns: the walk
// then goes on after the call, as it does for calls it knows nothing of.
type returnsCache struct {
	code  *Code
	arch  arch
	mu    sync.Mutex
	known map[uint64]bool // entry → it returns (in progress: true)
	// bufs are scans' buffers (scanBufs), reused: a walk, a map and a
	// work list for every scan were a fifth of chromium's allocations.
	bufs sync.Pool
}

// scanBufs is what one scan uses.
type scanBufs struct {
	w    *walk
	seen map[uint64]bool
	todo []uint64
}

// InferNoReturn returns a copy of c whose NoReturn also says so of the
// file's own functions that never return (objtool's dead ends), learnt
// from their instructions as calls to them are met; it is safe for
// concurrent use. Analyze does this itself; CheckRules's callers do it
// once per file, so that both agree on where a path ends.
func InferNoReturn(c *Code) *Code {
	mk := arches[c.Machine]
	if mk == nil {
		return c
	}
	rc := newReturnsCache(c, mk())
	cc := *c
	cc.NoReturn = rc.noReturn
	return &cc
}

func newReturnsCache(c *Code, a arch) *returnsCache {
	r := &returnsCache{code: c, arch: a, known: map[uint64]bool{}}
	r.bufs.New = func() any { return &scanBufs{seen: map[uint64]bool{}} }
	return r
}

// noReturn says a call to target does not return: c.NoReturn says so
// (exit, abort, ... by name), or target is an entry whose paths all end
// in traps and such calls.
func (r *returnsCache) noReturn(target uint64) bool {
	if r.code.NoReturn != nil && r.code.NoReturn(target) {
		return true
	}
	return !r.returns(target, 0)
}

func (r *returnsCache) returns(entry uint64, depth int) bool {
	r.mu.Lock()
	v, ok := r.known[entry]
	if !ok && depth < maxReturnDepth && !r.code.described(entry) {
		r.known[entry] = true // a call back into itself: assume it returns
	}
	r.mu.Unlock()
	if ok {
		return v
	}
	// Any call's target is a function's entry, whether or not the Code
	// lists it (verify's Code lacks the entries Analyze found by tail
	// calls).
	if depth >= maxReturnDepth || r.code.described(entry) {
		return true
	}
	v = r.scan(entry, depth)
	r.mu.Lock()
	r.known[entry] = v
	r.mu.Unlock()
	return v
}

// scan follows every instruction reachable from entry, by control flow
// alone (each stepped from the entry's state: only where it goes
// matters).
func (r *returnsCache) scan(entry uint64, depth int) bool {
	b := r.bufs.Get().(*scanBufs)
	defer r.bufs.Put(b)
	if b.w == nil {
		b.w = newWalk(r.code, r.arch, [2]int{}, Entry{Addr: entry})
	} else {
		b.w.reset(Entry{Addr: entry})
	}
	if len(b.seen) > keepBuf {
		b.seen = map[uint64]bool{}
	} else {
		clear(b.seen)
	}
	w, seen := b.w, b.seen
	todo := append(b.todo[:0], entry)
	defer func() { b.todo = todo[:0] }()
	var s State // one for the scan: a State per instruction went to the heap
	for len(todo) > 0 {
		pc := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[pc] {
			continue
		}
		if len(seen) >= maxReturnScan || r.code.described(pc) {
			return true
		}
		seen[pc] = true
		b := w.bytes(pc)
		if b == nil {
			return true // off the code: unknown
		}
		s = r.arch.entry()
		nx, err := r.arch.step(w, b, pc, &s)
		if err != nil || nx.len <= 0 {
			return true
		}
		end := pc + uint64(nx.len)
		switch nx.flow {
		case flowNext:
			todo = append(todo, end)
		case flowCall:
			if nx.target == 0 || !(r.code.NoReturn != nil && r.code.NoReturn(nx.target)) && r.returns(nx.target, depth+1) {
				todo = append(todo, end)
			}
		case flowBranch:
			todo = append(todo, nx.target, end)
		case flowJump:
			if r.code.isEntry(nx.target) && nx.target != entry {
				if r.returns(nx.target, depth+1) {
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
