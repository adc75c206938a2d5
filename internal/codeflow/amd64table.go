package codeflow

import (
	"encoding/binary"

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
// Two forms are known:
//
//	lea T(%rip),%rA; movslq (%rA,%rI,4),%rB; add %rA,%rB; jmp *%rB
//	  (GCC's and clang's PIC tables, the add either way round: entries
//	  are 32-bit offsets from T)
//	jmp *T(,%rI,8)   (absolute 64-bit entries)
//
// The entry count comes from the bounds check of the index, cmp $N,%rI
// then ja/jae (or jbe/jb to the table's block), found on the path before
// the jump with only copies of the index (mov, movzx) between; the
// instructions after the check must have no other way in (w.single).
func (a amd64) table(w *walk, pc uint64, in x86asm.Inst) []uint64 {
	h := make([]hist, 0, len(w.block)+1)
	for _, p := range w.block {
		b := w.bytes(p)
		x, err := isa.AMD64(b)
		if err != nil && !isEndbr(b) {
			h = h[:0] // the path before an undecodable one is not used
			continue
		}
		h = append(h, hist{p, x})
	}
	h = append(h, hist{pc, in})
	jmp := len(h) - 1
	switch arg := in.Args[0].(type) {
	case x86asm.Mem:
		idx, ok := reg64(arg.Index)
		if arg.Base != 0 || !ok || arg.Scale != 8 || arg.Segment != 0 && arg.Segment != x86asm.DS {
			return nil
		}
		return a.entries(w, h, jmp, idx, uint64(arg.Disp), 8)
	case x86asm.Reg:
		rj, ok := reg64(arg)
		if !ok {
			return nil
		}
		add := lastDef(h, jmp, rj)
		if add < 0 || h[add].in.Op != x86asm.ADD {
			return nil
		}
		rk, ok := reg64(h[add].in.Args[1])
		if !ok {
			return nil
		}
		// One of rj, rk is the loaded entry, the other T.
		for _, p := range [][2]int{{rj, rk}, {rk, rj}} {
			ld := lastDef(h, add, p[0])
			if ld < 0 || h[ld].in.Op != x86asm.MOVSXD {
				continue
			}
			m, ok := h[ld].in.Args[1].(x86asm.Mem)
			base, okb := reg64(m.Base)
			idx, oki := reg64(m.Index)
			if !ok || !okb || !oki || base != p[1] || m.Scale != 4 || m.Disp != 0 || m.Segment != 0 {
				continue
			}
			// T must reach the add unchanged from the lea before the load.
			lea := lastDef(h, ld, base)
			if lea < 0 || lastDef(h, add, base) != lea || h[lea].in.Op != x86asm.LEA {
				continue
			}
			lm, ok := h[lea].in.Args[1].(x86asm.Mem)
			if !ok || lm.Base != x86asm.RIP || lm.Index != 0 {
				continue
			}
			t := h[lea].pc + uint64(h[lea].in.Len) + uint64(lm.Disp)
			return a.entries(w, h, ld, idx, t, 4)
		}
	}
	return nil
}

// entries reads the table at t of size-byte entries indexed by register
// idx at h[use], with the count from the bounds check before it.
func (amd64) entries(w *walk, h []hist, use, idx int, t uint64, size int) []uint64 {
	n, check := bounds(h, use, idx)
	if n <= 0 || n > maxTable || w.code.Read == nil {
		return nil
	}
	raw := w.code.Read(t, n*size)
	if len(raw) < n*size {
		return nil
	}
	order := w.code.Order
	if order == nil {
		order = binary.LittleEndian
	}
	jump := h[len(h)-1].pc
	out := make([]uint64, 0, n)
	for i := 0; i < n; i++ {
		var x uint64
		if size == 4 {
			x = t + uint64(int64(int32(order.Uint32(raw[4*i:]))))
		} else {
			x = order.Uint64(raw[8*i:])
		}
		if !w.inside(jump, x) {
			return nil
		}
		out = append(out, x)
	}
	for _, x := range h[check+1:] {
		w.single(jump, x.pc)
	}
	return out
}

// bounds finds the check that bounds index register idx used at h[use]:
// the entry count and the index in h of the compare.
func bounds(h []hist, use, idx int) (int, int) {
	for k := use - 1; k >= 0; k-- {
		in := h[k].in
		if in.Op == x86asm.CMP && k+1 < len(h) {
			if r, ok := in.Args[0].(x86asm.Reg); ok {
				if n, _, ok := gpr(r); ok && n == idx {
					imm, ok := in.Args[1].(x86asm.Imm)
					if !ok || imm < 0 {
						return 0, -1
					}
					return count(h, k+1, int64(imm)), k
				}
			}
		}
		if !writes(in, idx) {
			continue
		}
		// A copy of the index keeps its bound: follow its source.
		if in.Op != x86asm.MOV && in.Op != x86asm.MOVZX {
			return 0, -1
		}
		r, ok := in.Args[1].(x86asm.Reg)
		if !ok {
			return 0, -1
		}
		n, _, ok := gpr(r)
		if !ok {
			return 0, -1
		}
		idx = n
	}
	return 0, -1
}

// count is the entries a bounds check of N allows, given the branch at
// h[j] after the compare: ja/jae leave the path when the index is over,
// jbe/jb stay on it when under.
func count(h []hist, j int, n int64) int {
	br := h[j]
	next := uint64(0)
	if j+1 < len(h) {
		next = h[j+1].pc
	} else {
		return 0
	}
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

// lastDef is the index of the last instruction before h[before] that
// writes register r, or -1.
func lastDef(h []hist, before, r int) int {
	for k := before - 1; k >= 0; k-- {
		if writes(h[k].in, r) {
			return k
		}
	}
	return -1
}

// writes says in changes register r: its effect is run on a state where
// every register holds a distinct known value.
func writes(in x86asm.Inst, r int) bool {
	var s State
	for i := range s.Regs {
		s.Regs[i] = Val{Off: int64(i)*4096 + 1<<40, Known: true}
	}
	s.FP = Saved{Where: OnStack, Off: -16}
	s.RA = Saved{Where: OnStack, Off: -8}
	before := s.Regs[r]
	switch in.Op {
	case x86asm.CALL:
		for _, c := range callerSaved {
			if c == r {
				return true
			}
		}
		return false
	case x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return r == amdRCX
	}
	if effect(in, &s) != nil {
		return true
	}
	return s.Regs[r] != before
}
