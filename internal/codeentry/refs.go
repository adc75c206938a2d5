package codeentry

import (
	"debug/elf"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Addresses taken without a relocation. A PIE takes a static function's
// address with a RIP-relative lea (x86-64) or an adrp+add pair (AArch64);
// a non-PIE executable with an absolute immediate (mov $fn) or an 8-byte
// word in its data, neither relocated. They are not all functions: a
// non-PIC jump table holds the addresses of case blocks, a computed
// goto's table (an interpreter's dispatch) the addresses of labels, and
// a number may look like an address. So a taken address is an entry
// (FromPointer) only when the code around it says a function starts
// there: it is an instruction start of the sweep; the instruction before
// it, padding aside, ends its path (a function's start is never fallen
// into); no direct jump targets it (case blocks and labels are often
// jumped to, a function is called); it is 16-byte aligned, as GCC and
// Clang align every function they do not optimise for size on both
// machines (case blocks and labels are aligned only when a few bytes of
// padding do it; hand-written assembly's functions may be aligned less,
// and are lost); and a data word is no part of a table of code addresses
// the code indexes (tableWords). The risk left: a case block or
// label that passes all of these and whose function is not walked, the
// walk of a function that is ending at a conflict (two walks reaching the
// same code are both left out).

// a64Half is what an AArch64 instruction gives towards an address: adrp
// a page into reg, or add reg+imm into dst; kind 0 is neither.
type a64Half struct {
	kind     uint8 // a64Adrp, a64Add
	reg, dst int8
	val      uint64 // the page, or the immediate
}

const (
	a64Adrp = 1 + iota
	a64Add
)

// a64Pair is the sweep's memory of the last adrp: its page and register,
// for an add up to a64PairWindow instructions later that writes nothing
// else in between.
type a64Pair struct {
	reg  int8
	page uint64
	left int // instructions the adrp is still good for; 0: none
}

const a64PairWindow = 4

// amd64Refs fills the address fields of in's insn.
func amd64Refs(in *x86asm.Inst, pc uint64, out *insn) {
	for _, a := range in.Args {
		// A jump or a load through the table (not a call: a table of
		// functions, whose words are what refEntries looks for).
		if m, ok := a.(x86asm.Mem); ok && m.Base == 0 && m.Index != 0 && m.Scale == 8 && m.Disp > 0 &&
			(in.Op == x86asm.JMP || in.Op == x86asm.MOV) {
			out.table = uint64(m.Disp)
		}
	}
	for _, a := range in.Args {
		// Any address of data the instruction names (dataRefs).
		if m, ok := a.(x86asm.Mem); ok && m.Segment == 0 {
			switch {
			case m.Base == x86asm.RIP && m.Index == 0:
				out.data = pc + uint64(in.Len) + uint64(m.Disp)
			case m.Base == 0 && m.Disp > 0:
				out.data = uint64(m.Disp)
			}
		}
	}
	switch in.Op {
	case x86asm.LEA:
		if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RIP && m.Index == 0 {
			out.lea = pc + uint64(in.Len) + uint64(m.Disp)
		}
	case x86asm.MOV:
		if v, ok := in.Args[1].(x86asm.Imm); ok && v > 0 {
			out.imm = uint64(v)
		}
	}
}

// arm64Refs fills in the halves of an address in's insn holds, and an
// adr's target (which needs no pair) as out.lea.
func arm64Refs(in *arm64asm.Inst, pc uint64, out *insn) {
	out.a64.dst = -1
	switch in.Op {
	case arm64asm.ADRP:
		r, ok := a64X(in.Args[0])
		rel, ok2 := in.Args[1].(arm64asm.PCRel)
		if ok && ok2 {
			out.a64 = a64Half{kind: a64Adrp, reg: r, val: pc&^0xfff + uint64(int64(rel))}
		}
	case arm64asm.ADR:
		if rel, ok := in.Args[1].(arm64asm.PCRel); ok {
			out.lea = pc + uint64(int64(rel))
		}
	case arm64asm.ADD:
		d, ok := a64X(in.Args[0])
		s, ok2 := a64X(in.Args[1])
		is, ok3 := in.Args[2].(arm64asm.ImmShift)
		if ok && ok2 && ok3 {
			if v, ok := isa.ARM64ImmShift(is); ok && v >= 0 {
				out.a64 = a64Half{kind: a64Add, reg: s, dst: d, val: uint64(v)}
			}
		}
	}
	if out.a64.kind == 0 && in.Args[0] != nil {
		// Any other instruction whose first operand is a register may
		// write it (a store only reads it: taken as a write, it costs a
		// pair, no more); noteRefs ends an adrp's pair there.
		if d, ok := a64X(in.Args[0]); ok {
			out.a64.dst = d
		}
	}
}

// a64X is the number of an X register argument (as a Reg or RegSP).
func a64X(a arm64asm.Arg) (int8, bool) {
	var r arm64asm.Reg
	switch v := a.(type) {
	case arm64asm.Reg:
		r = v
	case arm64asm.RegSP:
		r = arm64asm.Reg(v)
	default:
		return 0, false
	}
	if r >= arm64asm.X0 && r <= arm64asm.X30 {
		return int8(r - arm64asm.X0), true
	}
	return 0, false
}

// noteRefs records in out the addresses in takes and the jump tables it
// reads.
func noteRefs(m elf.Machine, in *insn, p *a64Pair, out *sweepOut) {
	if in.lea != 0 {
		out.refs = append(out.refs, in.lea)
	}
	if in.imm != 0 {
		out.refs = append(out.refs, in.imm)
	}
	if in.table != 0 {
		out.tables = append(out.tables, in.table)
	}
	if in.data != 0 {
		out.data = append(out.data, in.data)
	}
	if in.imm != 0 {
		out.data = append(out.data, in.imm)
	}
	if m != elf.EM_AARCH64 {
		return
	}
	h := in.a64
	switch {
	case in.stop || in.isJump || in.isCall:
		*p = a64Pair{}
	case h.kind == a64Adrp:
		*p = a64Pair{reg: h.reg, page: h.val, left: a64PairWindow}
	case h.kind == a64Add && p.left > 0 && h.reg == p.reg:
		out.refs = append(out.refs, p.page+h.val)
		if h.dst == p.reg {
			*p = a64Pair{}
		}
	case p.left > 0 && h.dst == p.reg:
		*p = a64Pair{} // the page's register written
	}
	if p.left > 0 {
		p.left--
	}
}

// stoppedAt says the instruction before addr, padding aside, ends its
// path, or calls a function that does not return.
func (sw *sweepResult) stoppedAt(addr uint64, noret map[uint64]bool) bool {
	i := sw.img.textAt(addr)
	if i < 0 || sw.stopped[i] == nil {
		return false
	}
	off := addr - sw.img.text[i].addr
	if sw.stopped[i][off/64]&(1<<(off%64)) != 0 {
		return true
	}
	if sw.padAt == nil {
		sw.padAt = make(map[uint64]int, len(sw.pads))
		for j, p := range sw.pads {
			sw.padAt[p.addr] = j
		}
	}
	j, ok := sw.padAt[addr]
	return ok && sw.pads[j].predCall != 0 && noret[sw.pads[j].predCall]
}

// functionLike says a taken address looks like a function's start (see
// the comment at the top of the file).
func (sw *sweepResult) functionLike(addr uint64, noret map[uint64]bool) bool {
	if addr%16 != 0 {
		return false
	}
	return sw.isStart(addr) && !sw.jumpedTo(addr) && sw.stoppedAt(addr, noret)
}

// refEntries gives the taken addresses that look like functions: those
// the code takes, and in a non-PIE executable the words of its data.
func (sw *sweepResult) refEntries(f *elfread.File, c *collector, noret map[uint64]bool) {
	take := func(v uint64) {
		if c.img.textAt(v) < 0 || c.img.inPLT(v) {
			return
		}
		if !sw.functionLike(v, noret) {
			c.notes.Found[codeflow.FromPointer]++
			c.notes.Rejected[RejectTaken]++
			return
		}
		if c.taken == nil {
			c.taken = map[uint64]bool{}
		}
		c.taken[v] = true
		c.add(v, 0, codeflow.FromPointer)
	}
	for v := range sw.refs {
		take(v)
	}
	if f.ELF.Type != elf.ET_EXEC {
		return // a PIE's or a library's data pointers are relocated: pointerEntries has them
	}
	order := f.ELF.ByteOrder
	skip := sw.tableWords(order)
	for _, r := range c.img.all {
		if !dataSection(r.name) {
			continue
		}
		for off := uint64(0); off+8 <= uint64(len(r.data)); off += 8 {
			if !skip[r.addr+off] {
				take(order.Uint64(r.data[off:]))
			}
		}
	}
}

// dataSection says the words of a section may be function pointers
// worth reading.
func dataSection(name string) bool {
	switch name {
	case ".data", ".data.rel.ro", ".rodata", ".init_array", ".fini_array", ".preinit_array":
		return true
	}
	return false
}

// tableWords are the words of the tables of code addresses the code may
// index: from each base, the run of words that point into the text. A
// base is the operand of an indexed jump or load, or any address outside
// the text the code takes: a PIE's and AArch64's jump tables and
// computed gotos load the base into a register first (lea, adrp+add),
// then index it. A table of functions whose base is taken so is lost
// with them; a structure's words after a first that is not code (a
// name, a count) are not.
func (sw *sweepResult) tableWords(order interface{ Uint64([]byte) uint64 }) map[uint64]bool {
	out := map[uint64]bool{}
	bases := make([]uint64, 0, len(sw.tables))
	for b := range sw.tables {
		bases = append(bases, b)
	}
	for b := range sw.refs {
		if sw.img.textAt(b) < 0 {
			bases = append(bases, b)
		}
	}
	for _, base := range bases {
		for a := base; ; a += 8 {
			v, ok := sw.img.word(a, order)
			if !ok || sw.img.textAt(v) < 0 {
				break
			}
			out[a] = true
		}
	}
	return out
}
