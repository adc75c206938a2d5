// Package cfiexpr recognises the DWARF expressions of call-frame
// information that SFrame can carry: a register plus an offset, maybe
// dereferenced, and the x86-64 PLT CFA expression. translate decides with
// them what a function's SFrame rows are; verify and the tracer read the
// same forms back.
package cfiexpr

import "github.com/cfi2sframe/cfi2sframe/internal/leb128"

// DWARF expression opcodes used by the forms SFrame can carry.
const (
	opDeref  = 0x06
	opAnd    = 0x1a
	opPlus   = 0x22
	opShl    = 0x24
	opGe     = 0x2a
	opLit0   = 0x30
	opLit31  = 0x4f
	opBreg0  = 0x70
	opBreg31 = 0x8f
	opBregx  = 0x92
)

// SimpleExpr is the expression form `DW_OP_bregN off [DW_OP_deref]`:
// register Reg plus Offset, loaded from memory when Deref is set.
type SimpleExpr struct {
	Reg    uint64
	Offset int64
	Deref  bool
}

// ParseSimpleExpr recognises `DW_OP_bregN off`, `DW_OP_bregx reg off`,
// each optionally followed by `DW_OP_deref`, and nothing else.
func ParseSimpleExpr(expr []byte) (SimpleExpr, bool) {
	r := &reader{b: expr}
	var e SimpleExpr
	op := r.u8()
	switch {
	case op >= opBreg0 && op <= opBreg31:
		e.Reg = uint64(op - opBreg0)
	case op == opBregx:
		e.Reg = r.uleb()
	default:
		return SimpleExpr{}, false
	}
	e.Offset = r.sleb()
	if r.err {
		return SimpleExpr{}, false
	}
	if r.left() > 0 {
		if r.u8() != opDeref || r.left() != 0 {
			return SimpleExpr{}, false
		}
		e.Deref = true
	}
	return e, true
}

// PLTExpr is the CFA expression GNU ld and lld give x86-64 lazy PLT
// entries: CFA = SPReg+SPOffset, plus Extra once (PCReg & Mask) >=
// Threshold, because the entry pushes its relocation index part-way
// through:
//
//	DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0; DW_OP_litM; DW_OP_and;
//	DW_OP_litK; DW_OP_ge; DW_OP_litS; DW_OP_shl; DW_OP_plus
//
// with M = 15, K = 11 (10 for some layouts), S = 3 (Extra = 8).
type PLTExpr struct {
	SPReg     uint64
	SPOffset  int64
	PCReg     uint64
	Mask      uint8
	Threshold uint8
	Extra     uint64
}

// ParsePLTExpr recognises the x86-64 PLT CFA expression.
func ParsePLTExpr(expr []byte) (PLTExpr, bool) {
	r := &reader{b: expr}
	var p PLTExpr
	lit := func() (uint8, bool) {
		op := r.u8()
		if op < opLit0 || op > opLit31 {
			return 0, false
		}
		return op - opLit0, true
	}
	op := r.u8()
	if op < opBreg0 || op > opBreg31 {
		return PLTExpr{}, false
	}
	p.SPReg = uint64(op - opBreg0)
	p.SPOffset = r.sleb()
	op = r.u8()
	if op < opBreg0 || op > opBreg31 || r.sleb() != 0 {
		return PLTExpr{}, false
	}
	p.PCReg = uint64(op - opBreg0)
	var ok bool
	if p.Mask, ok = lit(); !ok || r.u8() != opAnd {
		return PLTExpr{}, false
	}
	if p.Threshold, ok = lit(); !ok || r.u8() != opGe {
		return PLTExpr{}, false
	}
	s, ok := lit()
	if !ok || r.u8() != opShl || r.u8() != opPlus || r.err || r.left() != 0 || s > 16 {
		return PLTExpr{}, false
	}
	p.Extra = 1 << s
	return p, true
}

// reader reads an expression's bytes; the first read past the end is
// sticky in err.
type reader struct {
	b   []byte
	off int
	err bool
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) u8() uint8 {
	if r.err || r.off >= len(r.b) {
		r.err = true
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// uleb reads an unsigned LEB128 number (bits past 64 dropped).
func (r *reader) uleb() uint64 {
	if r.err {
		return 0
	}
	v, n := leb128.Uleb(r.b[r.off:])
	r.take(n)
	return v
}

// sleb reads a signed LEB128 number (bits past 64 dropped).
func (r *reader) sleb() int64 {
	if r.err {
		return 0
	}
	v, n := leb128.Sleb(r.b[r.off:])
	r.take(n)
	return v
}

// take moves past the n bytes of a number, or fails the reader when the
// number ran past the end (n 0).
func (r *reader) take(n int) {
	if n == 0 {
		r.off, r.err = len(r.b), true
		return
	}
	r.off += n
}
