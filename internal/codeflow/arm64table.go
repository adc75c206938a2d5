package codeflow

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// codeAt is the n bytes of executable code at addr, or nil.
func codeAt(c *Code, addr uint64, n int) []byte {
	if b := c.bytes(addr); len(b) >= n {
		return b[:n]
	}
	return nil
}

// inText says addr is in the executable code.
func inText(c *Code, addr uint64) bool { return codeAt(c, addr, 4) != nil }

// a64Decode decodes the instruction at pc again (a block's earlier one).
func a64Decode(c *Code, pc uint64) (arm64asm.Inst, bool) {
	b := codeAt(c, pc, 4)
	if b == nil {
		return arm64asm.Inst{}, false
	}
	in, err := isa.ARM64(b)
	return in, err == nil
}

// a64Bound is what an unsigned bounds check proves of the path after
// it: "cmp rI, #N" then b.hi or b.hs that the path falls through (rI <=
// N, or < N), or b.ls or b.lo that it takes. GCC and clang put a jump
// table's check so, often in the block before the table's (after it the
// prologue, or a move of the index).
type a64Bound struct {
	reg  int    // the index register, 0-30
	max  uint64 // rI <= max, as an unsigned value of rI's width
	wide bool   // the compare was on the 64-bit register
}

// a64FindBound looks back along w.block, the path before the jump, for
// the last bounds check: the bound and the index in w.block of its
// conditional branch (the path after it starts at k+1), or k < 0. The
// path is one of many until w.single holds it to be the only one.
func a64FindBound(w *walk, pc uint64) (a64Bound, int) {
	h := w.path()
	for k := len(h) - 1; k >= 1; k-- {
		br, ok := a64Decode(w.code, h[k])
		if !ok {
			return a64Bound{}, -1
		}
		c, isCond := br.Args[0].(arm64asm.Cond)
		if br.Op != arm64asm.B || !isCond {
			continue
		}
		after := pc
		if k+1 < len(h) {
			after = h[k+1]
		}
		target := pcRel(h[k], br.Args[1])
		if target == h[k]+4 {
			continue // both ways lead to the same place: nothing is proven
		}
		taken := after == target
		cmp, ok := a64Decode(w.code, h[k-1])
		if !ok || cmp.Op != arm64asm.CMP || h[k-1]+4 != h[k] {
			continue
		}
		r := a64Num(cmp.Args[0])
		is, ok := cmp.Args[1].(arm64asm.ImmShift)
		if r < 0 || r >= a64SP || !ok {
			continue
		}
		imm, ok := isa.ARM64ImmShift(is)
		if !ok || imm < 0 {
			continue
		}
		n := uint64(imm)
		switch cs := c.String(); {
		case cs == "HI" && !taken, cs == "LS" && taken:
		case (cs == "CS" && !taken || cs == "CC" && taken) && n > 0:
			n--
		default:
			continue
		}
		return a64Bound{reg: r, max: n, wide: a64Wide(cmp.Args[0])}, k
	}
	return a64Bound{}, -1
}

// tsym is what a jump table's block leaves in a register.
type tsym struct {
	kind uint8 // tNone, tAddr, tIndex, tEntry, tTarget
	addr uint64
	// tIndex: at most max; clean: as a 64-bit value too.
	max   uint64
	clean bool
	// tEntry: an entry of table addr, index scaled by << scale, size
	// bytes; signed: sign-extended, to 32 bits only when w32.
	scale       uint
	size        int
	signed, w32 bool
	// tTarget: base + ext(entry) << shift.
	base  uint64
	ext   string
	shift uint
	entry *tsym
}

const (
	tNone = iota
	tAddr
	tIndex
	tEntry
	tTarget
)

// a64MaxTable bounds the entries read for one table.
const a64MaxTable = 4096

// a64Table resolves br x<reg> at pc as a jump table: the path from the
// last bounds check to the jump, replayed, must compute base + entry << k
// from an adr/adrp address and an entry loaded from a table at an
// adrp(+add) address, indexed by the register the check bounds or an
// unchanged copy of it. Any other form, or an instruction that changes
// those registers otherwise, leaves the jump unresolved; so does a
// target outside the function. The check's branch and every
// instruction after it up to the jump must have no other way in
// (w.single): another path could bring an index the check never saw.
func a64Table(w *walk, pc uint64, reg int) []uint64 {
	if reg < 0 || reg >= a64SP {
		return nil
	}
	bound, k := a64FindBound(w, pc)
	if k < 0 || bound.max >= a64MaxTable {
		return nil
	}
	var regs [32]tsym
	regs[bound.reg] = tsym{kind: tIndex, max: bound.max, clean: bound.wide}
	for _, at := range w.path()[k+1:] {
		in, ok := a64Decode(w.code, at)
		if !ok {
			return nil
		}
		a64TableStep(in, at, &regs)
	}
	t := regs[reg]
	if t.kind != tTarget {
		return nil
	}
	out := a64Entries(w.code, t, bound.max)
	for _, to := range out {
		if !w.inside(pc, to) {
			return nil
		}
	}
	if out != nil {
		w.single(pc, w.path()[k:]...)
		w.single(pc, pc)
	}
	return out
}

// a64TableStep replays one instruction of a jump table's block.
func a64TableStep(in arm64asm.Inst, pc uint64, regs *[32]tsym) {
	d := a64Num(in.Args[0])
	var v tsym
	switch in.Op {
	case arm64asm.ADRP:
		rel, _ := in.Args[1].(arm64asm.PCRel)
		v = tsym{kind: tAddr, addr: pc&^0xfff + uint64(int64(rel))}
	case arm64asm.ADR:
		v = tsym{kind: tAddr, addr: pcRel(pc, in.Args[1])}
	case arm64asm.MOV:
		if n := a64Num(in.Args[1]); n >= 0 && n < a64SP {
			v = regs[n]
			if v.kind == tIndex && !a64Wide(in.Args[0]) {
				v.clean = true // a 32-bit move zeroes the upper half
			}
			if v.kind != tIndex && !a64Wide(in.Args[0]) {
				v = tsym{}
			}
		}
	case arm64asm.ADD:
		v = a64TableAdd(in, regs)
	case arm64asm.LDRB, arm64asm.LDRH, arm64asm.LDR, arm64asm.LDRSB, arm64asm.LDRSH, arm64asm.LDRSW:
		v = a64TableLoad(in, regs)
		a64TableClobber(in, regs) // a write-back of the base
	case arm64asm.B, arm64asm.CBZ, arm64asm.CBNZ, arm64asm.TBZ, arm64asm.TBNZ:
		return // a branch the path went on from writes nothing
	case arm64asm.HINT:
		// pac/aut[ab]1716 write x17, chkfeat x16; the others nothing.
		regs[16], regs[17] = tsym{}, tsym{}
		return
	case arm64asm.BL, arm64asm.BLR:
		for r := 0; r <= 18; r++ {
			regs[r] = tsym{}
		}
		regs[a64LR] = tsym{}
		return
	default:
		a64TableClobber(in, regs)
		return
	}
	if d >= 0 && d < a64SP {
		regs[d] = v
	}
}

// a64TableClobber forgets the registers in writes.
func a64TableClobber(in arm64asm.Inst, regs *[32]tsym) {
	mem, mi := a64Mem(in)
	if mi < 0 {
		if !a64NoDest[in.Op] {
			if d := a64Num(in.Args[0]); d >= 0 && d < a64SP {
				regs[d] = tsym{}
			}
		}
		return
	}
	if !a64Stores[in.Op] || a64Status[in.Op] {
		for i := 0; i < mi; i++ {
			if d := a64Num(in.Args[i]); d >= 0 && d < a64SP {
				regs[d] = tsym{}
			}
		}
	}
	if m, ok := mem.(arm64asm.MemImmediate); ok && m.Mode != arm64asm.AddrOffset {
		if d := a64Num(m.Base); d >= 0 && d < a64SP {
			regs[d] = tsym{}
		}
	}
}

// a64TableAdd: adrp's page plus its low 12 bits, or a branch base plus
// an extended, shifted table entry.
func a64TableAdd(in arm64asm.Inst, regs *[32]tsym) tsym {
	n := a64Num(in.Args[1])
	if n < 0 || n >= a64SP || regs[n].kind != tAddr || !a64Wide(in.Args[0]) {
		return tsym{}
	}
	base := regs[n].addr
	switch x := in.Args[2].(type) {
	case arm64asm.ImmShift:
		imm, ok := isa.ARM64ImmShift(x)
		if !ok || in.Args[3] != nil {
			return tsym{}
		}
		return tsym{kind: tAddr, addr: base + uint64(imm)}
	case arm64asm.Reg, arm64asm.RegExtshiftAmount:
		name, ext, _ := strings.Cut(fmt.Sprint(x), ", ")
		r, err := strconv.Atoi(name[1:])
		if err != nil || r >= a64SP || regs[r].kind != tEntry {
			return tsym{}
		}
		kind, amt, _ := strings.Cut(ext, " #")
		shift, err := strconv.ParseUint("0"+amt, 10, 3)
		if err != nil || shift > 4 {
			return tsym{}
		}
		switch kind {
		case "", "LSL", "UXTX", "SXTX":
			if name[0] != 'X' {
				return tsym{}
			}
		case "UXTB", "SXTB", "UXTH", "SXTH", "UXTW", "SXTW":
		default:
			return tsym{}
		}
		e := regs[r]
		return tsym{kind: tTarget, base: base, ext: kind, shift: uint(shift), entry: &e}
	}
	return tsym{}
}

// a64TableLoad: a load of an entry, [table, index, extend #scale].
func a64TableLoad(in arm64asm.Inst, regs *[32]tsym) tsym {
	m, ok := in.Args[1].(arm64asm.MemExtend)
	if !ok {
		return tsym{}
	}
	b := a64Num(m.Base)
	if b < 0 || b >= a64SP || regs[b].kind != tAddr {
		return tsym{}
	}
	ix := a64Num(m.Index)
	if ix < 0 || ix >= a64SP || regs[ix].kind != tIndex {
		return tsym{}
	}
	idx := regs[ix]
	switch ext := m.Extend.String(); {
	case !a64Wide(m.Index) && ext == "UXTW":
	case !a64Wide(m.Index) && ext == "SXTW" && idx.max < 1<<31:
	case a64Wide(m.Index) && (ext == "LSL" || ext == "UXTX") && idx.clean:
	default:
		return tsym{}
	}
	e := tsym{kind: tEntry, addr: regs[b].addr, w32: !a64Wide(in.Args[0])}
	if !m.ShiftMustBeZero {
		e.scale = uint(m.Amount)
	}
	switch in.Op {
	case arm64asm.LDRB:
		e.size = 1
	case arm64asm.LDRSB:
		e.size, e.signed = 1, true
	case arm64asm.LDRH:
		e.size = 2
	case arm64asm.LDRSH:
		e.size, e.signed = 2, true
	case arm64asm.LDRSW:
		e.size, e.signed = 4, true
	case arm64asm.LDR:
		e.size = 4
		if !e.w32 {
			e.size = 8
		}
	}
	return e
}

// a64Entries reads a table's max+1 entries and turns them into the
// distinct targets, each 4-aligned and in the code; nil if any is not.
func a64Entries(c *Code, t tsym, max uint64) []uint64 {
	if c.Read == nil || c.Order == nil {
		return nil
	}
	e := t.entry
	var out []uint64
	seen := make(map[uint64]bool)
	for i := uint64(0); i <= max; i++ {
		b := c.Read(e.addr+i<<e.scale, e.size)
		if len(b) != e.size {
			return nil
		}
		var v uint64
		switch e.size {
		case 1:
			v = uint64(b[0])
			if e.signed {
				v = uint64(int64(int8(b[0])))
			}
		case 2:
			v = uint64(c.Order.Uint16(b))
			if e.signed {
				v = uint64(int64(int16(v)))
			}
		case 4:
			v = uint64(c.Order.Uint32(b))
			if e.signed {
				v = uint64(int64(int32(v)))
			}
		case 8:
			v = c.Order.Uint64(b)
		}
		if e.w32 {
			v &= 0xffffffff // a load into a W register zeroes the upper half
		}
		switch t.ext {
		case "UXTB":
			v &= 0xff
		case "SXTB":
			v = uint64(int64(int8(v)))
		case "UXTH":
			v &= 0xffff
		case "SXTH":
			v = uint64(int64(int16(v)))
		case "UXTW":
			v &= 0xffffffff
		case "SXTW":
			v = uint64(int64(int32(v)))
		}
		to := t.base + v<<t.shift
		if to%4 != 0 || !inText(c, to) {
			return nil
		}
		if !seen[to] {
			seen[to] = true
			out = append(out, to)
		}
	}
	return out
}
