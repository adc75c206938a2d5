package translate

import (
	"encoding/binary"
	"math"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/leb128"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// The direct path: most AMD64 FDEs only move the CFA between the stack
// and frame pointers and save registers on the stack. For those, the rows
// come straight from the FDE's program in one pass, with a state of five
// words, instead of executing it into a cfi.Table (every register's rule
// on every row) and translating the table row by row. It takes a program
// only when the result is certain to be what executing and translating
// it give (function): anything else, including every program that would
// fail to execute or get a diagnostic, is left to that path. Tests hold
// the two to the same rows over real files and fuzzed programs
// (TestDirectMatches, FuzzDirect).

// Bounds of the programs the direct path takes: a program of fewer bytes
// than directMaxAdvances has fewer advances, so executing it cannot reach
// cfi's cap on rows (65536) or the interpreter's cap on rule cells (64 registers a row
// at most, as only registers below 64 are taken); deeper remember_state
// nesting is left to the interpreter.
const (
	directMaxAdvances = 1 << 14
	directMaxDepth    = 8
)

// directState is the part of the CFI state an AMD64 SFrame row depends
// on. The CFA is a register plus an offset (the interpreter's last
// register offset is always the same offset then); the return address is
// either at its fixed slot or has no rule.
type directState struct {
	cfaReg  uint64
	cfaOff  int64
	fpOff   int64
	fpSaved bool
	raSaved bool
}

// directCIE caches the state a CIE's initial instructions leave, for the
// FDEs of that CIE that follow one another, and holds the remembered
// states of the FDE being run (no FDE's run starts by clearing them).
type directCIE struct {
	cie   *cfi.CIE
	ok    bool
	init  directState
	stack [directMaxDepth]directState
}

// directRows returns f's rows (in rows' memory) and true when f is in the
// direct path's reach, false otherwise. c caches the CIE's initial state.
func (a *abi) directRows(f *cfi.FDE, c *directCIE, rows []sframe.Row) ([]sframe.Row, bool) {
	cie := f.CIE
	if a.arch != arch.AMD64 || cie == nil || cie.RAColumn != a.ra || f.Size > math.MaxUint32 || f.End() < f.Start || len(f.Program) >= directMaxAdvances {
		return rows, false
	}
	if c.cie != cie {
		c.cie = cie
		c.init, c.ok = a.directInitial(cie)
	}
	if !c.ok {
		return rows, false
	}
	d := directRun{a: a, init: &c.init, s: c.init, stack: &c.stack, loc: f.Start, start: f.Start, end: f.End(),
		codeAlign: cie.CodeAlign, dataAlign: cie.DataAlign, order: a.order, rows: rows[:0], row: true}
	if !d.program(f.Program) {
		return d.rows, false
	}
	if !d.done && !d.flush() {
		return d.rows, false
	}
	return lastAdvanceRow(d.rows, f, d.lastAdvance), true
}

// directInitial runs a CIE's initial instructions when they only define
// the CFA and save registers on the stack.
func (a *abi) directInitial(cie *cfi.CIE) (directState, bool) {
	var s directState
	p := cie.Initial
	for i := 0; i < len(p); {
		op := p[i]
		i++
		var reg, u uint64
		var off int64
		var n int
		switch {
		case op&0xc0 == 0x80: // DW_CFA_offset
			reg = uint64(op & 0x3f)
			if u, n = leb128.Uleb(p[i:]); n == 0 {
				return s, false
			}
			i += n
			if !a.directSave(&s, reg, int64(u)*cie.DataAlign) {
				return s, false
			}
		case op == 0x05: // DW_CFA_offset_extended (Go's CIE saves the RA so)
			if reg, off, n = extendedSave(p[i:], false); n == 0 || !a.directSave(&s, reg, off*cie.DataAlign) {
				return s, false
			}
			i += n
		case op == 0x00: // DW_CFA_nop
		case op == 0x0c, op == 0x0d, op == 0x0e: // def_cfa, def_cfa_register, def_cfa_offset
			if n = directCFA(&s, op, p[i:]); n == 0 {
				return s, false
			}
			i += n
		default:
			return s, false
		}
	}
	return s, true
}

// directSave applies "reg saved at CFA+off"; false for a rule the direct
// path does not follow (the SP saved, the RA elsewhere than its slot).
func (a *abi) directSave(s *directState, reg uint64, off int64) bool {
	switch reg {
	case a.sp:
		return false
	case a.ra:
		if off != int64(a.fixedRA) {
			return false
		}
		s.raSaved = true
	case a.fp:
		s.fpSaved, s.fpOff = true, off
	}
	return true
}

// extendedSave reads the operands of DW_CFA_offset_extended (signed:
// _sf) at the start of p: the register, below 64, and its factored
// offset; n is 0 when they are truncated or the register is larger.
func extendedSave(p []byte, signed bool) (reg uint64, off int64, n int) {
	reg, n = leb128.Uleb(p)
	if n == 0 || reg >= 64 {
		return 0, 0, 0
	}
	var m int
	if signed {
		off, m = leb128.Sleb(p[n:])
	} else {
		var u uint64
		u, m = leb128.Uleb(p[n:])
		off = int64(u)
	}
	if m == 0 {
		return 0, 0, 0
	}
	return reg, off, n + m
}

// directCFA applies DW_CFA_def_cfa, def_cfa_register or def_cfa_offset
// with its operands at the start of p, and returns how many bytes they
// took (0 when truncated).
func directCFA(s *directState, op byte, p []byte) int {
	u, n := leb128.Uleb(p)
	if n == 0 {
		return 0
	}
	switch op {
	case 0x0c:
		off, m := leb128.Uleb(p[n:])
		if m == 0 {
			return 0
		}
		s.cfaReg, s.cfaOff = u, int64(off)
		return n + m
	case 0x0d:
		s.cfaReg = u
	default:
		s.cfaOff = int64(u)
	}
	return n
}

// directRun is one FDE's program on the direct path.
type directRun struct {
	a               *abi
	init            *directState
	s               directState
	stack           *[directMaxDepth]directState // the states remembered, depth of them
	depth           int
	loc, start, end uint64
	codeAlign       uint64
	dataAlign       int64
	order           binary.ByteOrder
	rows            []sframe.Row
	row             bool // an instruction since the last row starts one (GNU as's rule, touches)
	done            bool // an advance reached the end
	lastAdvance     uint64
	lastSet         bool // a row was recorded
	lastRA          bool // the last row's raSaved
}

// program runs the FDE's instructions; false when one is outside the
// direct path's reach.
func (d *directRun) program(p []byte) bool {
	for i := 0; i < len(p); {
		op := p[i]
		i++
		var u uint64
		var n int
		switch op & 0xc0 {
		case 0x40: // DW_CFA_advance_loc
			if !d.advance(uint64(op & 0x3f)) {
				return false
			}
			if d.done {
				return true
			}
			continue
		case 0x80: // DW_CFA_offset
			if u, n = leb128.Uleb(p[i:]); n == 0 {
				return false
			}
			i += n
			if !d.save(uint64(op&0x3f), int64(u)*d.dataAlign) {
				return false
			}
			continue
		case 0xc0: // DW_CFA_restore
			d.restore(uint64(op & 0x3f))
			continue
		}
		switch op {
		case 0x00: // DW_CFA_nop
		case 0x02, 0x03, 0x04: // DW_CFA_advance_loc1, 2, 4
			w := 1 << (op - 2)
			if len(p)-i < w {
				return false
			}
			switch w {
			case 1:
				u = uint64(p[i])
			case 2:
				u = uint64(d.order.Uint16(p[i:]))
			default:
				u = uint64(d.order.Uint32(p[i:]))
			}
			i += w
			if !d.advance(u) {
				return false
			}
			if d.done {
				return true
			}
		case 0x05: // DW_CFA_offset_extended
			reg, n := leb128.Uleb(p[i:])
			if n == 0 || reg >= 64 {
				return false
			}
			i += n
			if u, n = leb128.Uleb(p[i:]); n == 0 {
				return false
			}
			i += n
			if !d.save(reg, int64(u)*d.dataAlign) {
				return false
			}
		case 0x11: // DW_CFA_offset_extended_sf (Go's frame-pointer saves)
			reg, off, n := extendedSave(p[i:], true)
			if n == 0 || !d.save(reg, off*d.dataAlign) {
				return false
			}
			i += n
		case 0x13: // DW_CFA_def_cfa_offset_sf (every row of Go's programs)
			off, n := leb128.Sleb(p[i:])
			if n == 0 {
				return false
			}
			i += n
			d.s.cfaOff = off * d.dataAlign
			d.row = true
		case 0x08: // DW_CFA_same_value: Go's frame pointer back in its register
			reg, n := leb128.Uleb(p[i:])
			if n == 0 || reg != d.a.fp {
				return false // the RA's or SP's: the interpreter's rules
			}
			i += n
			d.s.fpSaved, d.s.fpOff = false, 0
			d.row = true
		case 0x06: // DW_CFA_restore_extended
			reg, n := leb128.Uleb(p[i:])
			if n == 0 || reg >= 64 {
				return false
			}
			i += n
			d.restore(reg)
		case 0x0a: // DW_CFA_remember_state
			if d.depth == directMaxDepth {
				return false
			}
			d.stack[d.depth] = d.s
			d.depth++
		case 0x0b: // DW_CFA_restore_state
			if d.depth == 0 {
				return false
			}
			d.depth--
			d.s = d.stack[d.depth]
			d.row = true
		case 0x0e: // DW_CFA_def_cfa_offset: most often a one-byte operand
			if i < len(p) && p[i] < 0x80 {
				d.s.cfaOff = int64(p[i])
				i++
				d.row = true
				continue
			}
			if n = directCFA(&d.s, op, p[i:]); n == 0 {
				return false
			}
			i += n
			d.row = true
		case 0x0c, 0x0d: // DW_CFA_def_cfa, def_cfa_register
			if n = directCFA(&d.s, op, p[i:]); n == 0 {
				return false
			}
			i += n
			d.row = true
		default:
			return false
		}
	}
	return true
}

// save is DW_CFA_offset in the program: setting the FP's or RA's rule
// starts a row.
func (d *directRun) save(reg uint64, off int64) bool {
	if !d.a.directSave(&d.s, reg, off) {
		return false
	}
	if reg == d.a.fp || reg == d.a.ra {
		d.row = true
	}
	return true
}

// restore is DW_CFA_restore: the register gets the CIE's rule back. For
// the FP that starts a row; for the RA on AMD64 it does not (touches).
func (d *directRun) restore(reg uint64) {
	switch reg {
	case d.a.fp:
		d.s.fpSaved, d.s.fpOff = d.init.fpSaved, d.init.fpOff
		d.row = true
	case d.a.ra:
		d.s.raSaved = d.init.raSaved
	}
}

// advance moves the location by delta code units, recording the row of
// the interval it leaves, as the interpreter's advance does.
func (d *directRun) advance(delta uint64) bool {
	to := d.loc + delta*d.codeAlign
	if to < d.loc {
		return false // the interpreter's "location moves backwards"
	}
	if to == d.loc {
		return true
	}
	if !d.flush() {
		return false
	}
	d.loc = to
	if to >= d.end {
		d.done = true
	} else {
		d.lastAdvance = to
	}
	return true
}

// flush records the row of the current state at loc, when an instruction
// since the last row starts one or the state differs from that row's (the
// rows function keeps); false when the state has no row the direct path
// writes (function would give a diagnostic or a flexible FDE).
func (d *directRun) flush() bool {
	s := &d.s
	// Without an instruction that starts a row, only restoring the RA
	// (which on AMD64 starts none) can have changed the state.
	if !d.row && d.lastSet && s.raSaved == d.lastRA {
		return true
	}
	a := d.a
	if !s.raSaved || (s.cfaReg != a.sp && s.cfaReg != a.fp) || !fitsInt32(s.cfaOff) || (s.fpSaved && !fitsInt32(s.fpOff)) {
		return false
	}
	d.rows = append(d.rows, sframe.Row{})
	r := &d.rows[len(d.rows)-1]
	r.Start = uint32(d.loc - d.start)
	r.CFA = sframe.Loc{Kind: sframe.LocReg, Reg: uint32(s.cfaReg), Offset: int32(s.cfaOff)}
	r.RA = sframe.Loc{Kind: sframe.LocFixed, Offset: int32(a.fixedRA)}
	if s.fpSaved {
		r.FP = sframe.Loc{Kind: sframe.LocCFA, Offset: int32(s.fpOff)}
	} else {
		r.FP = sframe.Loc{Kind: sframe.LocUnsaved}
	}
	d.lastRA, d.lastSet, d.row = s.raSaved, true, false
	return true
}
