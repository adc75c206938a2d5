package codeflow

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// maxTable bounds the entries of a jump table.
const maxTable = 1 << 12

// hist is one instruction of the path before a jump: its PC and decoding.
type hist struct {
	pc uint64
	in x86asm.Inst
}

// table resolves the indirect jump in at pc as a jump table, or gives nil.
//
// It runs the path before the jump (w.block) forward over symbolic values
// (tablesim, below) and accepts the jump only when its target is, on that
// path, a table entry whose index a bounds check proved in range:
//
//	lea T(%rip),%rA; movslq (%rA,%rI,4),%rB; add %rC,%rB; jmp *%rB
//	  (GCC's and clang's PIC tables, the add either way round; rC holds T
//	  or, in glibc's computed gotos, another address of the function)
//	jmp *T(,%rI,8); mov T(,%rI,8),%rB; jmp *%rB   (absolute entries)
//
// The bound comes from cmp $N then ja/jae (or jbe/jb to the table's side):
// on the index or on a register the index was copied or zero-extended
// from (before or after the check), on a narrower part of it when the
// index is that part zero-extended, or on a memory word the index is then
// reloaded from with nothing stored between; or from a byte table in
// read-only data indexed by a proven index (the entries' largest byte);
// a RIP-relative load with no index reads one entry. The table's address
// is taken from the path's lea (as before: compilers hoist it out of
// loops), the bound is proven.
// Every instruction of the path from the first one the proof relies on
// to the jump must have no other way in (w.single, checked when the walk
// ends), so that the path is the only one to the jump.
func (a amd64) table(w *walk, pc uint64, in x86asm.Inst) []uint64 {
	h := hists(w, w.path(), pc, in)
	out, from := resolve(w, h)
	if out == nil {
		return nil
	}
	for _, x := range h[min(from, len(h)-1)+1:] {
		w.single(pc, x.pc)
	}
	if w.tables == nil {
		w.tables = map[uint64][]uint64{}
	}
	w.tables[pc] = append(w.tables[pc], out...)
	return out
}

// hists decodes path, then appends the jump in at pc.
func hists(w *walk, path []uint64, pc uint64, in x86asm.Inst) []hist {
	h := make([]hist, 0, len(path)+1)
	for _, p := range path {
		b := w.bytes(p)
		x, err := isa.AMD64(b)
		if err != nil && !isEndbr(b) {
			h = h[:0] // the path before an undecodable one is not used
			continue
		}
		h = append(h, hist{p, x})
	}
	return append(h, hist{pc, in})
}

// resolve runs h (a path, then the jump) and gives the jump's targets
// and the first instruction of h the proof relies on; nil when the jump
// is no table proven on this path.
func resolve(w *walk, h []hist) ([]uint64, int) {
	jmp := len(h) - 1
	in := h[jmp].in
	ts := newTableSim(w, h)
	for k := 0; k < jmp; k++ {
		ts.step(k)
	}
	var v sym
	switch arg := in.Args[0].(type) {
	case x86asm.Mem:
		v = ts.load(jmp, arg, 8, false)
	case x86asm.Reg:
		r, ok := reg64(arg)
		if !ok {
			return nil, 0
		}
		v = ts.regs[r]
	default:
		return nil, 0
	}
	var out []uint64
	switch {
	case v.kind == symTarget && v.tab.size == 4:
		out = ts.targets(v.tab, v.c)
	case v.kind == symEntry && v.tab.size == 8:
		out = ts.targets(v.tab, 0)
	}
	return out, v.from
}

// maxRoutes bounds the paths recheck follows back from one jump.
const maxRoutes = 64

// recheck proves the table at jump again on every path into it, when
// the one it was resolved on is not the only one (a second bounds check
// on another path, as clang and GCC emit for a switch reached from two
// places; a block the check and the table share). It follows the
// predecessors back from the jump, every one of each instruction (its
// rec's first and w.preds), and accepts a path as soon as the
// instructions from its oldest one to the jump prove a table whose
// targets the walk took: what the proof reads it reads on that path,
// whatever ran before (the simulation starts from unknown registers).
// A path that reaches the entry, or goes back histLen instructions,
// unproven fails the table; so does one over maxRoutes paths.
func (a amd64) recheck(w *walk, jump uint64) bool {
	in, err := isa.AMD64(w.bytes(jump))
	if err != nil {
		return false
	}
	took := map[uint64]bool{}
	for _, t := range w.tables[jump] {
		took[t] = true
	}
	budget := maxRoutes
	var back []uint64 // the path, nearest the jump first
	var proven func() bool
	proven = func() bool {
		path := make([]uint64, len(back))
		for i, p := range back {
			path[len(back)-1-i] = p
		}
		if out, _ := resolve(w, hists(w, path, jump, in)); out != nil {
			all := true
			for _, t := range out {
				all = all && took[t]
			}
			if all {
				return true
			}
		}
		at := jump
		if len(back) > 0 {
			at = back[len(back)-1]
		}
		i, ok := w.index[at]
		if !ok || !w.recs[i].hasPred || len(back) >= histLen {
			return false
		}
		for _, p := range append([]uint64{w.recs[i].pred}, w.preds[at]...) {
			if budget--; budget < 0 {
				return false
			}
			back = append(back, p)
			ok := proven()
			back = back[:len(back)-1]
			if !ok {
				return false
			}
		}
		return true
	}
	return proven()
}

// targets reads tab's entries: 64-bit addresses (size 8) or 32-bit
// offsets from base (size 4); nil when one is outside the function. A
// table no check bounds is read as scan says.
func (ts *tableSim) targets(tab *tableRef, base uint64) []uint64 {
	if !tab.content {
		if out := ts.all(tab, base); out != nil || !tab.capped {
			return out
		}
	}
	return ts.scan(tab, base)
}

// entry is the target of tab's entry at a (raw its bytes).
func (ts *tableSim) entry(tab *tableRef, base uint64, raw []byte) uint64 {
	order := ts.w.code.Order
	if order == nil {
		order = binary.LittleEndian
	}
	if tab.size == 4 {
		return base + uint64(int64(int32(order.Uint32(raw))))
	}
	return order.Uint64(raw)
}

// all reads tab's n entries, nil when one is outside the function.
func (ts *tableSim) all(tab *tableRef, base uint64) []uint64 {
	w := ts.w
	if w.code.Read == nil || tab.n <= 0 || tab.n > maxTable {
		return nil
	}
	raw := w.code.Read(tab.addr, tab.n*tab.size)
	if len(raw) < tab.n*tab.size {
		return nil
	}
	jump := ts.h[len(ts.h)-1].pc
	out := make([]uint64, 0, tab.n)
	for i := 0; i < tab.n; i++ {
		x := ts.entry(tab, base, raw[i*tab.size:])
		if !w.inside(jump, x) && !coldPart(w, jump, x) {
			return nil
		}
		out = append(out, x)
	}
	return out
}

// scan reads a table whose index no check bounds (clang's switch with
// no default, glibc's computed gotos), or whose index's width allows more
// entries than it has, by its content. The index is taken to be one the
// table has (the program's own premise: past the table, it would jump
// into whatever follows); what is left to prove is where the table ends,
// by rules each of which can only end it too soon or refuse it, never
// add an entry that is not one:
//
//   - The entries are read from read-only data outside the code (Read
//     gives non-writable sections only): what the jump reads when it
//     runs is what the file holds.
//   - An entry is taken while its target is inside the jump's function,
//     from its entry to its end (or to the next entry when the end is
//     not known): a real entry's target is code of the function. The
//     scan ends, the entries before kept, at a word whose target is
//     outside the jump's executable range, or at the end of the
//     read-only data: no entry of the table can be such a word, so the
//     table ended before it. A word whose target is in that range but
//     outside the function (a cold part, a neighbour) could be an entry
//     or not: the table is refused.
//   - The scan ends at any address the file references (Code.Refs: an
//     instruction's memory operand or a data word names it; built once
//     per file in internal/codeentry, one pass over the relocations and
//     the data words, 8 bytes per address kept, a binary search per
//     entry read): another object starts there, a second table of this
//     function or a constant, and a compiler references a table only at
//     its start, so this table has ended.
//   - maxTable entries with no end found: refused.
//
// So the scan does not stop inside the table (the worry of a table bounded
// so: a missed entry, a missed edge, a join that looks more known than
// it is), but at a reference inside it, which no compiler emits. Should
// that happen, scannedJoins still refuses a function in which a missed
// edge could change what is known: every join the table's targets reach
// must have the jump's frame. A target in the middle of an instruction,
// or one whose state another path contradicts, fails the function when
// the walk ends (code-data, code-states-differ), as any path's would.
func (ts *tableSim) scan(tab *tableRef, base uint64) []uint64 {
	w := ts.w
	refs := w.code.Refs
	jump := ts.h[len(ts.h)-1].pc
	if w.code.Read == nil || refs == nil || w.textRange(tab.addr) >= 0 {
		return nil
	}
	lo, hi := w.extent()
	if jump < lo || jump >= hi {
		return nil
	}
	var out []uint64
	for i := 0; ; i++ {
		a := tab.addr + uint64(i*tab.size)
		if i > 0 && isRef(refs, a) {
			break
		}
		if i == tab.n {
			if tab.content {
				return nil
			}
			break
		}
		raw := w.code.Read(a, tab.size)
		if len(raw) < tab.size {
			break
		}
		x := ts.entry(tab, base, raw)
		if lo <= x && x < hi {
			out = append(out, x)
			continue
		}
		if w.textRange(x) >= 0 && w.textRange(x) == w.textRange(jump) {
			return nil
		}
		break
	}
	if len(out) == 0 {
		return nil
	}
	if w.scanned == nil {
		w.scanned = map[uint64]bool{}
	}
	w.scanned[jump] = true
	return out
}

// isRef says refs (sorted) holds a.
func isRef(refs []uint64, a uint64) bool {
	_, ok := slices.BinarySearch(refs, a)
	return ok
}

// extent is the walk's function: its entry to its end, or to the next
// entry (or the end of its executable range) when the end is not known.
func (w *walk) extent() (lo, hi uint64) {
	lo, hi = w.entry.Addr, w.entry.End
	if hi != 0 {
		return lo, hi
	}
	if r := w.textRange(lo); r >= 0 {
		hi = w.code.Text[r].Addr + uint64(len(w.code.Text[r].Data))
	}
	es := w.code.Entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Addr > lo })
	if i < len(es) && es[i].Addr < hi {
		hi = es[i].Addr
	}
	return lo, hi
}

// coldPart says a target t outside the jump's function is still taken:
// in the jump's executable range. GCC moves a switch's rare cases to
// foo.cold, and its table points there; the bound is proven and the
// table read from read-only data, so t is where the jump goes, and the
// walk follows it as it follows a direct jump there (another entry's
// start is then a part of this function, or the walk fails there).
func coldPart(w *walk, jump, t uint64) bool {
	r := w.textRange(jump)
	return r >= 0 && r == w.textRange(t)
}

// written is the set of general registers in changes (bit n: DWARF
// number n), all of them when its effect cannot be run: its effect is run
// on a state where every register holds a distinct known value. ok is
// false when the effect failed.
func written(in x86asm.Inst) (set uint32, ok bool) {
	switch in.Op {
	case x86asm.CALL:
		for _, c := range callerSaved {
			set |= 1 << c
		}
		return set, true
	case x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return 1 << amdRCX, true
	}
	var s State
	for i := range s.Regs {
		s.Regs[i] = Val{Off: int64(i)*4096 + 1<<40, Known: true}
	}
	s.FP = Saved{Where: OnStack, Off: -16}
	s.RA = Saved{Where: OnStack, Off: -8}
	before := s.Regs
	if effect(in, &s) != nil {
		return 0xffff, false
	}
	for r := 0; r < 16; r++ {
		if s.Regs[r] != before[r] {
			set |= 1 << r
		}
	}
	return set, true
}

// symKind is what a register on the path before a jump is known to hold.
type symKind uint8

const (
	symValue  symKind = iota // a number: the low w bits of value id, zero-extended
	symAddr                  // the address c (a lea of the code's or data's address)
	symEntry                 // an entry of tab: 32-bit sign-extended (size 4) or 64-bit
	symTarget                // an entry of tab (32-bit, sign-extended) plus the address c
	symScaled                // the value *idx times c (a lea of an index with no base)
)

// sym is a register's symbolic value. Every value has an id of its own
// (a copy keeps it, any other write makes a new one), so that a check
// proven on an id holds wherever the id is found later on the path,
// however the value moved between registers.
type sym struct {
	kind  symKind
	id, w int
	c     uint64
	tab   *tableRef
	// zext: a 32-bit entry loaded as it is (GCC -O0's mov of the entry
	// to a 32-bit register), not yet sign-extended: only cltq or movslq
	// make it an offset to add.
	zext bool
	// idx is the index a symScaled value scales.
	idx *sym
	// from is the first instruction of the path (an index in h) what
	// the value is derived from relies on (a compared memory word, a
	// table read): it holds for every run of the path from there; never
	// for a value of which only its moves matter.
	from int
	// chain is the copies (indices in h) that took the value from the
	// register it was made in to this one: two registers holding one
	// value agree from the first copy their chains do not share.
	chain []int
	// made is the instruction (an index in h) that gave the value its
	// width w: a value of 12 bits or fewer, zero-extended, is its own
	// bound from there on (an opcode byte indexing 256 entries).
	made int
}

// tableRef is a table of n entries of size bytes at addr. content: no
// bound is proven, and the table's content bounds it (scan); capped: its
// index's width bounds it to n, and when not all n are entries the
// content bounds it within n.
type tableRef struct {
	addr            uint64
	n, size         int
	content, capped bool
}

// fact: the low w bits of a value are at most max (from the compare at
// and after from).
type fact struct {
	w     int
	max   uint64
	from  int
	chain []int // the compared register's
}

// memKey names a memory operand by the values of its registers.
type memKey struct {
	baseID, baseW, idxID, idxW int
	scale                      uint8
	disp                       int64 // the address itself when RIP-relative
	rip                        bool
}

// tableSim runs the path before a jump over symbolic values.
type tableSim struct {
	w     *walk
	h     []hist
	regs  [16]sym
	next  int
	facts map[int][]fact
	// cmp is the compare whose flags are live: the low cmpW bits of value
	// cmpV against cmpN.
	cmp     bool
	cmpV    sym
	cmpN    uint64
	cmpFrom int
	// mem is the memory word a compare read (its value memV), while
	// nothing may have stored to memory since.
	mem    bool
	memKey memKey
	memV   sym
}

// never is a from later than every instruction: a register's value at
// the start of the path, which no instruction has read yet.
const never = 1 << 30

func newTableSim(w *walk, h []hist) *tableSim {
	ts := &tableSim{w: w, h: h, facts: map[int][]fact{}}
	for r := range ts.regs {
		ts.regs[r] = sym{id: r, w: 64, from: never, made: never}
	}
	ts.next = len(ts.regs)
	return ts
}

// fresh is a new value h[k] writes. What a proof needs of it is how
// it moves between registers and where it is compared: the copies and
// compares it goes through give its from, not the instruction that made it.
func (ts *tableSim) fresh(k int) sym {
	ts.next++
	return sym{id: ts.next, w: 64, from: never, made: k}
}

// low is the value of the low width bits of register r read at h[k].
func (ts *tableSim) low(r, width, k int) sym {
	v := ts.regs[r]
	if width < v.w {
		v = sym{id: v.id, w: width, from: v.from, chain: v.chain, made: k}
	}
	return v
}

// copied is v moved into another register by h[k].
func copied(v sym, k int) sym {
	v.chain = append(append([]int(nil), v.chain...), k)
	return v
}

// diverge is the first copy of chains a and b they do not share, never
// when they name the same register's holding.
func diverge(a, b []int) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	r := never
	if i < len(a) {
		r = a[i]
	}
	if i < len(b) {
		r = min(r, b[i])
	}
	return r
}

// lowReg gives a general register's number and width, refusing ah, bh,
// ch, dh, whose bits are not a register's low ones.
func lowReg(a x86asm.Arg) (num, width int, ok bool) {
	r, isReg := a.(x86asm.Reg)
	if !isReg || r >= x86asm.AH && r <= x86asm.BH {
		return 0, 0, false
	}
	return gpr(r)
}

// step runs h[k] (not the jump).
func (ts *tableSim) step(k int) {
	in := ts.h[k].in
	set, ok := written(in)
	if !ok || mayStore(in) {
		ts.mem = false
	}
	dst, res := ts.result(k)
	for r := 0; r < 16; r++ {
		if set&(1<<r) != 0 {
			ts.regs[r] = ts.fresh(k)
		}
	}
	// A write to a 32-bit register clears the upper half.
	if n, width, ok := lowReg(in.Args[0]); ok && width == 32 && set&(1<<n) != 0 {
		ts.regs[n].w = 32
	}
	if dst >= 0 {
		ts.regs[dst] = res
	}
	switch {
	case in.Op == x86asm.CMP:
		ts.compare(k)
	case isBranch(in.Op):
		ts.branch(k)
	case !keepsFlags(in.Op):
		ts.cmp = false
	}
}

// result is the register h[k] writes with a value the table needs (a
// copy, an address, a load, an entry plus an address), -1 for none.
func (ts *tableSim) result(k int) (int, sym) {
	in := ts.h[k].in
	if in.Op == x86asm.CDQE {
		// cltq: eax sign-extended into rax (GCC -O0 after loading an
		// entry, or a bounded index).
		if v, ok := ts.signExtended(amdRAX, 32, k); ok {
			return amdRAX, v
		}
		return -1, sym{}
	}
	dst, dw, ok := lowReg(in.Args[0])
	if !ok || dw < 32 {
		return -1, sym{}
	}
	switch src := in.Args[1].(type) {
	case x86asm.Reg:
		sn, sw, ok := lowReg(src)
		if !ok {
			return -1, sym{}
		}
		switch {
		case in.Op == x86asm.MOV && sw == dw:
			return dst, copied(ts.low(sn, sw, k), k)
		case in.Op == x86asm.MOVZX && sw < 32:
			return dst, copied(ts.low(sn, sw, k), k)
		case in.Op == x86asm.MOVSXD && dw == 64 && sw == 32:
			if v, ok := ts.signExtended(sn, sw, k); ok {
				return dst, v
			}
		case in.Op == x86asm.ADD && dw == 64 && sw == 64:
			a, b := ts.regs[dst], ts.regs[sn]
			if a.kind == symAddr {
				a, b = b, a
			}
			if a.kind == symEntry && a.tab.size == 4 && !a.zext && b.kind == symAddr {
				ts.next++
				return dst, sym{kind: symTarget, id: ts.next, w: 64, c: b.c, tab: a.tab, from: min(a.from, b.from, k)}
			}
		}
	case x86asm.Mem:
		switch {
		case in.Op == x86asm.LEA && dw == 64 && src.Base == 0 && src.Index != 0 && src.Disp == 0 && src.Segment == 0 && in.AddrSize == 64:
			// lea 0(,%rI,4),%rD: the index scaled, for a load that adds
			// the table's address as the other register (GCC -O0).
			x, ok := reg64(src.Index)
			if !ok {
				return -1, sym{}
			}
			ts.next++
			idx := ts.regs[x]
			return dst, sym{kind: symScaled, id: ts.next, w: 64, c: uint64(src.Scale), idx: &idx, from: never, made: k}
		case in.Op == x86asm.LEA && dw == 64 && src.Base == x86asm.RIP && src.Index == 0 && src.Segment == 0:
			// The address is taken as the path shows it, not required of
			// every path (from stays never): compilers hoist the lea of a
			// table out of a loop whose head other paths join, and keep
			// the register for it on all of them.
			ts.next++
			return dst, sym{kind: symAddr, id: ts.next, w: 64, c: ts.ripAddr(k, src.Disp), from: never, made: k}
		case in.Op == x86asm.MOVZX, in.Op == x86asm.MOV && in.MemBytes*8 == dw:
			v := ts.load(k, src, in.MemBytes, false)
			if v.kind == symValue {
				// A zero-extending load, or a 32-bit one, clears the bits
				// above what it reads.
				if w := min(v.w, dw, in.MemBytes*8); w < v.w {
					v.w, v.made = w, k
				}
			}
			return dst, v
		case in.Op == x86asm.MOVSXD && dw == 64 && in.MemBytes == 4:
			return dst, ts.load(k, src, 4, true)
		}
	}
	return -1, sym{}
}

// signExtended is the value of register r's low width bits sign-extended
// to 64 bits at h[k] (cltq, movslq), when the simulation knows it: a
// 32-bit entry loaded as it is becomes one to add; a value whose sign
// bit is clear (fewer than 32 bits zero-extended, as python's opcode
// looked up in a byte table; or 32 bits a check bounded below 1<<31)
// stays as it is, the check then among what the value relies on.
func (ts *tableSim) signExtended(r, width, k int) (sym, bool) {
	if width != 32 {
		return sym{}, false
	}
	v := ts.low(r, width, k)
	switch {
	case v.kind == symEntry && v.zext && v.w == 32:
		v.zext, v.w = false, 64
		return v, true
	case v.kind != symValue:
		return sym{}, false
	case v.w < 32:
		return copied(v, k), true
	}
	fs := ts.facts[v.id]
	for i := len(fs) - 1; i >= 0; i-- {
		if f := fs[i]; f.w >= 32 && f.max < 1<<31 {
			c := copied(v, k)
			c.from = min(c.from, f.from, diverge(f.chain, v.chain))
			return c, true
		}
	}
	return sym{}, false
}

func (ts *tableSim) ripAddr(k int, disp int64) uint64 {
	x := ts.h[k]
	return x.pc + uint64(x.in.Len) + uint64(disp)
}

// key names memory operand m of h[k]; false for one the path cannot name
// (a segment, a 32-bit address).
func (ts *tableSim) key(k int, m x86asm.Mem) (memKey, bool) {
	if m.Segment != 0 || ts.h[k].in.AddrSize != 64 {
		return memKey{}, false
	}
	key := memKey{scale: m.Scale, disp: m.Disp, baseID: -1, idxID: -1}
	switch {
	case m.Base == x86asm.RIP:
		key.rip, key.disp = true, int64(ts.ripAddr(k, m.Disp))
	case m.Base != 0:
		b, ok := reg64(m.Base)
		if !ok {
			return memKey{}, false
		}
		key.baseID, key.baseW = ts.regs[b].id, ts.regs[b].w
	}
	if m.Index != 0 {
		x, ok := reg64(m.Index)
		if !ok {
			return memKey{}, false
		}
		key.idxID, key.idxW = ts.regs[x].id, ts.regs[x].w
	}
	return key, true
}

// load is the value h[k] reads from m, size bytes: the word a compare
// read (unchanged since: nothing stored), an entry of a table indexed by
// a proven index (size 4 signed, size 8), or the largest byte of a byte
// table so indexed; otherwise a new value.
func (ts *tableSim) load(k int, m x86asm.Mem, size int, signed bool) sym {
	key, ok := ts.key(k, m)
	if !ok {
		return ts.fresh(k)
	}
	if ts.mem && key == ts.memKey && !signed && size*8 <= ts.memV.w {
		return copied(sym{id: ts.memV.id, w: size * 8, from: ts.memV.from, made: k}, k)
	}
	tab, from, ok := ts.tableAt(k, m, size)
	if !ok || size == 1 && (signed || tab.content) || size == 2 {
		return ts.fresh(k)
	}
	if size == 4 && !signed {
		// The entry as it is, in a 32-bit register: cltq makes it one.
		ts.next++
		return sym{kind: symEntry, id: ts.next, w: 32, tab: tab, from: from, zext: true}
	}
	if size > 1 {
		ts.next++
		return sym{kind: symEntry, id: ts.next, w: 64, tab: tab, from: from}
	}
	raw := []byte(nil)
	if ts.w.code.Read != nil {
		raw = ts.w.code.Read(tab.addr, tab.n)
	}
	if len(raw) < tab.n {
		return ts.fresh(k)
	}
	v := ts.fresh(k)
	v.w, v.from = 8, from
	ts.facts[v.id] = []fact{{w: 8, max: uint64(slicesMax(raw)), from: from}}
	return v
}

func slicesMax(b []byte) byte {
	m := byte(0)
	for _, x := range b {
		m = max(m, x)
	}
	return m
}

// tableAt is the table m reads at h[k] with size-byte entries: at a
// known address (a displacement, an address register, the code's own
// when RIP-relative and then of one entry) indexed by a proven index,
// or by any index when the table's content is to bound it.
func (ts *tableSim) tableAt(k int, m x86asm.Mem, size int) (*tableRef, int, bool) {
	if m.Segment != 0 || ts.h[k].in.AddrSize != 64 {
		return nil, 0, false
	}
	var addr uint64
	from, made := k, k
	switch {
	case m.Base == x86asm.RIP:
		if m.Index != 0 {
			return nil, 0, false
		}
		return &tableRef{addr: ts.ripAddr(k, m.Disp), n: 1, size: size}, k, true
	case m.Base == 0:
		addr = uint64(m.Disp)
	default:
		b, ok := reg64(m.Base)
		if !ok {
			return nil, 0, false
		}
		base := ts.regs[b]
		if x, ok := reg64(m.Index); ok && m.Scale == 1 && base.kind != symAddr {
			// (%rScaled,%rT,1): the index scaled by a lea, the table's
			// address in the other register (GCC -O0), either way round.
			base = ts.regs[x]
			m.Index = m.Base
		}
		if base.kind != symAddr {
			return nil, 0, false
		}
		addr, from, made = base.c+uint64(m.Disp), min(from, base.from), min(k, base.made)
	}
	iv, ok := ts.indexOf(m, size)
	if !ok {
		return nil, 0, false
	}
	n, f, checked, ok := ts.bound(iv)
	if !ok {
		// No bound: the table's own content bounds it (targets). The
		// address, taken as the path shows it for a proven table, is
		// then what the proof relies on, from the lea that made it.
		return &tableRef{addr: addr, n: maxTable, size: size, content: true}, min(from, made), true
	}
	return &tableRef{addr: addr, n: n, size: size, capped: !checked}, min(from, f), true
}

// indexOf is the index m reads a table of size-byte entries with: its
// index register scaled by size, or the one a lea scaled by size into
// it (m's scale then 1).
func (ts *tableSim) indexOf(m x86asm.Mem, size int) (sym, bool) {
	x, ok := reg64(m.Index)
	if !ok {
		return sym{}, false
	}
	iv := ts.regs[x]
	if m.Scale == 1 && size > 1 && iv.kind == symScaled && iv.c == uint64(size) {
		return *iv.idx, true
	}
	return iv, int(m.Scale) == size
}

// bound is the entry count a proven check allows value v, and the first
// instruction the proof relies on. The check nearest the use is taken,
// as the one the compiler emitted for this table: an earlier, tighter
// one may hold on this path only.
func (ts *tableSim) bound(v sym) (n, from int, checked, ok bool) {
	fs := ts.facts[v.id]
	for i := len(fs) - 1; i >= 0; i-- {
		if f := fs[i]; f.w >= v.w && f.max < maxTable {
			return int(f.max) + 1, min(f.from, v.from, diverge(f.chain, v.chain)), true, true
		}
	}
	// No check: a value of few bits, zero-extended where it was made
	// (movzbl), cannot index past 1<<w entries, whatever it holds. The
	// proof needs the path from that instruction on.
	if v.kind == symValue && v.w <= 12 && v.made < never {
		return 1 << v.w, min(v.from, v.made), false, true
	}
	return 0, 0, false, false
}

// compare notes the flags of cmp $N,reg or cmp $N,mem at h[k].
func (ts *tableSim) compare(k int) {
	in := ts.h[k].in
	ts.cmp = false
	imm, ok := in.Args[1].(x86asm.Imm)
	if !ok {
		return
	}
	switch a := in.Args[0].(type) {
	case x86asm.Reg:
		n, width, ok := lowReg(a)
		if !ok {
			return
		}
		ts.cmp, ts.cmpV = true, ts.low(n, width, k)
		ts.cmpN = uint64(imm) & mask(width)
	case x86asm.Mem:
		key, ok := ts.key(k, a)
		if !ok || in.MemBytes <= 0 || in.MemBytes > 8 {
			return
		}
		v := ts.fresh(k)
		v.w, v.from = in.MemBytes*8, k // the word in memory from here on
		ts.mem, ts.memKey, ts.memV = true, key, v
		ts.cmp, ts.cmpV, ts.cmpN = true, v, uint64(imm)&mask(v.w)
	}
	ts.cmpFrom = min(ts.cmpV.from, k)
}

func mask(width int) uint64 {
	if width >= 64 {
		return ^uint64(0)
	}
	return 1<<width - 1
}

// branch takes the bound of the live compare when the path leaves the
// branch at h[k] on the side where the value is in range (unsigned).
func (ts *tableSim) branch(k int) {
	if !ts.cmp {
		return
	}
	n := count(ts.h, k, ts.cmpN)
	if n <= 0 || n > maxTable {
		return
	}
	v := ts.cmpV
	ts.facts[v.id] = append(ts.facts[v.id], fact{w: v.w, max: uint64(n - 1), from: ts.cmpFrom, chain: v.chain})
}

// count is the entries a bounds check of N allows, given the branch at
// h[j] after the compare: ja/jae leave the path when the value is over,
// jbe/jb stay on it when under; 0 for any other.
func count(h []hist, j int, n uint64) int {
	br := h[j]
	if j+1 >= len(h) || n >= maxTable {
		return 0
	}
	next := h[j+1].pc
	rel, ok := br.in.Args[0].(x86asm.Rel)
	if !ok {
		return 0
	}
	fall := br.pc + uint64(br.in.Len)
	taken := fall + uint64(int64(rel))
	switch {
	case br.in.Op == x86asm.JA && next == fall, br.in.Op == x86asm.JBE && next == taken && taken != fall:
		return int(n + 1)
	case br.in.Op == x86asm.JAE && next == fall, br.in.Op == x86asm.JB && next == taken && taken != fall:
		return int(n)
	}
	return 0
}

// keepsFlags says op leaves the flags as they were (the ones a compare
// and its branch may have between them).
func keepsFlags(op x86asm.Op) bool {
	switch op {
	case 0, x86asm.MOV, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD, x86asm.LEA, x86asm.NOP,
		x86asm.PUSH, x86asm.POP, x86asm.CDQE, x86asm.CWDE, x86asm.CDQ, x86asm.CQO:
		return true
	}
	return isBranch(op)
}

// mayStore says in may write memory: a compared word reloaded after it
// is not the word compared.
func mayStore(in x86asm.Inst) bool {
	switch in.Op {
	case 0, x86asm.NOP:
		return false
	case x86asm.CMP, x86asm.TEST, x86asm.BT:
		return false
	case x86asm.PUSH, x86asm.PUSHF, x86asm.PUSHFQ, x86asm.PUSHFD, x86asm.CALL, x86asm.ENTER,
		x86asm.XCHG, x86asm.XADD, x86asm.CMPXCHG, x86asm.CMPXCHG8B, x86asm.CMPXCHG16B,
		x86asm.SYSCALL, x86asm.INT:
		return true
	}
	if isBranch(in.Op) {
		return false
	}
	// A register destination: a load or an operation on registers. A
	// memory one, or none named (string operations name theirs), may store.
	_, isReg := in.Args[0].(x86asm.Reg)
	return !isReg
}

// scannedJoins fails the walk when a join that the targets of a table
// bounded by its content reach (following the walk's edges from them)
// has another frame than the jump's: where the stack and frame pointers
// are from the CFA, where the caller's frame pointer and return address
// are. An entry such a table had past where scan stopped would reach the
// code from the jump's state, and a path from it could join anywhere
// the table's cases go: where every such join has the jump's frame, a
// case that keeps the frame (as a switch's cases do between the dispatch
// and their join) arrives with what the walk knows there; where one has
// another, the rows there would hold for the paths seen only. Checked
// when the walk ends; the cost is one pass over the walk's edges.
func (w *walk) scannedJoins() *fail {
	if len(w.scanned) == 0 {
		return nil
	}
	succ := make([][]int32, len(w.recs))
	for i := range w.recs {
		r := &w.recs[i]
		if p, ok := w.index[r.pred]; ok && r.hasPred {
			succ[p] = append(succ[p], int32(i))
		}
	}
	for pc, ps := range w.preds {
		j := w.index[pc]
		for _, p := range ps {
			if pi, ok := w.index[p]; ok {
				succ[pi] = append(succ[pi], j)
			}
		}
	}
	jumps := make([]uint64, 0, len(w.scanned))
	for j := range w.scanned {
		jumps = append(jumps, j)
	}
	slices.Sort(jumps)
	for _, jump := range jumps {
		ji, ok := w.index[jump]
		if !ok {
			continue
		}
		js := &w.recs[ji].s
		seen := make([]bool, len(w.recs))
		var stack []int32
		for _, t := range w.tables[jump] {
			if i, ok := w.index[t]; ok && !seen[i] {
				seen[i] = true
				stack = append(stack, i)
			}
		}
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if r := &w.recs[i]; r.multi && !sameFrame(js, &r.s, w.regs) {
				return &fail{failure{ReasonIndirect, fmt.Sprintf("the jump table bounded by its content at %#x reaches the join at %#x with another frame: %s, the jump's %s",
					jump, r.pc, frameString(&r.s, w.regs), frameString(js, w.regs))}, jump}
			}
			for _, n := range succ[i] {
				if !seen[n] {
					seen[n] = true
					stack = append(stack, n)
				}
			}
		}
	}
	return nil
}

// sameFrame says x claims nothing of the frame that j does not: the
// stack and frame pointers, when known at x, are where they are at j,
// and the caller's frame pointer and return address are where they are
// at j.
func sameFrame(j, x *State, regs [2]int) bool {
	for _, k := range regs {
		if x.Regs[k].Known && x.Regs[k] != j.Regs[k] {
			return false
		}
	}
	return x.FP == j.FP && x.RA == j.RA
}
