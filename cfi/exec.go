package cfi

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// DW_CFA opcodes (DWARF 5 §6.4.2, plus GNU and AArch64 extensions).
const (
	opAdvanceLoc = 0x40 // high two bits
	opOffset     = 0x80
	opRestore    = 0xc0

	opNop                        = 0x00
	opSetLoc                     = 0x01
	opAdvanceLoc1                = 0x02
	opAdvanceLoc2                = 0x03
	opAdvanceLoc4                = 0x04
	opOffsetExtended             = 0x05
	opRestoreExtended            = 0x06
	opUndefined                  = 0x07
	opSameValue                  = 0x08
	opRegister                   = 0x09
	opRememberState              = 0x0a
	opRestoreState               = 0x0b
	opDefCFA                     = 0x0c
	opDefCFARegister             = 0x0d
	opDefCFAOffset               = 0x0e
	opDefCFAExpression           = 0x0f
	opExpression                 = 0x10
	opOffsetExtendedSF           = 0x11
	opDefCFASF                   = 0x12
	opDefCFAOffsetSF             = 0x13
	opValOffset                  = 0x14
	opValOffsetSF                = 0x15
	opValExpression              = 0x16
	opMIPSAdvanceLoc8            = 0x1d
	opAArch64NegateRAStateWithPC = 0x2c
	opGNUWindowSave              = 0x2d // AArch64: DW_CFA_AARCH64_negate_ra_state
	opGNUArgsSize                = 0x2e
	opGNUNegativeOffsetExtended  = 0x2f
)

// Limits that keep hostile input from taking unbounded memory. Every row
// needs at least one advance byte, so rows are also bounded by the FDE's
// length; these caps bound what one FDE can take whatever its length
// (about 130 bytes a row and 56 a rule cell).
const (
	maxStateDepth = 1 << 10 // remember_state nesting
	maxRuleCells  = 1 << 21 // rows × registers kept for one FDE
	// maxRows is the most rows one FDE may produce, whether or not they
	// set a register rule; real functions have at most a few thousand.
	maxRows = 1 << 16
)

// state is the rule set at one point of the program.
type state struct {
	cfa CFA
	// lastOff is the offset of the most recent register-based CFA rule,
	// kept while the CFA is an expression: def_cfa_register then returns
	// to register+lastOff, as libgcc's unwinder and readelf do.
	lastOff  int64
	regs     []RegRule // sorted by Reg
	mangled  bool
	withPC   bool
	argsSize uint64
}

func (s *state) set(reg uint64, r Rule) {
	lo, hi := 0, len(s.regs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.regs[m].Reg < reg {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(s.regs) && s.regs[lo].Reg == reg {
		s.regs[lo].Rule = r
		return
	}
	s.regs = append(s.regs, RegRule{})
	copy(s.regs[lo+1:], s.regs[lo:])
	s.regs[lo] = RegRule{Reg: reg, Rule: r}
}

func (s *state) del(reg uint64) {
	for i := range s.regs {
		if s.regs[i].Reg == reg {
			s.regs = append(s.regs[:i], s.regs[i+1:]...)
			return
		}
	}
}

func (s *state) copyFrom(o *state) {
	regs := append(s.regs[:0], o.regs...)
	*s = *o
	s.regs = regs
}

func ruleEqual(a, b Rule) bool {
	return a.Kind == b.Kind && a.Reg == b.Reg && a.Offset == b.Offset && bytes.Equal(a.Expr, b.Expr)
}

func cfaEqual(a, b CFA) bool {
	return a.Kind == b.Kind && a.Reg == b.Reg && a.Offset == b.Offset && bytes.Equal(a.Expr, b.Expr)
}

func (s *state) equalRow(r *Row) bool {
	if !cfaEqual(s.cfa, r.CFA) || s.mangled != r.MangledRA || s.withPC != r.RAStateWithPC || s.argsSize != r.ArgsSize || len(s.regs) != len(r.Regs) {
		return false
	}
	for i := range s.regs {
		if s.regs[i].Reg != r.Regs[i].Reg || !ruleEqual(s.regs[i].Rule, r.Regs[i].Rule) {
			return false
		}
	}
	return true
}

// interpreter executes CFA programs, reusing its scratch memory between
// calls (a Context's). It is not safe for concurrent use.
type interpreter struct {
	cur     state
	initial state
	stack   []state
	// initCIE is the CIE whose initial instructions left initial, when
	// that CIE was parsed from a section (immutable) and remembered no
	// state: the next FDE of that CIE starts from initial without running
	// them again.
	initCIE *CIE
}

// execute fills t with f's rows (Context.Execute).
func (in *interpreter) execute(f *FDE, t *Table) error {
	t.FDE = f
	t.LastAdvance = 0
	t.Rows = t.Rows[:0]
	t.regs = t.regs[:0]
	t.regOff = t.regOff[:0]
	if f == nil || f.CIE == nil {
		return &Error{Section: kindEH.String(), Msg: "FDE without CIE"}
	}
	in.cur = state{regs: in.cur.regs[:0]}
	in.stack = in.stack[:0]
	sec := f.sec
	progOff, initOff := f.progOff, f.CIE.initOff
	if sec == nil {
		// A hand-built FDE: run its byte slices as they are.
		sec = &Section{kind: kindEH, order: binary.LittleEndian, ptrSize: 8}
		progOff, initOff = 0, 0
	}
	x := &executor{in: in, f: f, t: t, loc: f.Start, sec: sec}
	if err := x.initial(initOff); err != nil {
		return err
	}
	if err := x.run(f.Program, progOff, false); err != nil {
		return err
	}
	x.flush()
	// Rows point into t.regs, which may have moved while growing.
	for i := range t.Rows {
		o, k := int(t.regOff[i]), len(t.Rows[i].Regs)
		t.Rows[i].Regs = t.regs[o : o+k : o+k]
	}
	return nil
}

type executor struct {
	in    *interpreter
	f     *FDE
	t     *Table
	sec   *Section
	loc   uint64
	done  bool  // an advance went past the FDE's end
	touch touch // rules set since the last row
	// hidden: since the last row, a rule changed that touch does not
	// record (a register above 63, DW_CFA_GNU_args_size), so only a
	// comparison tells whether the state is still the last row's.
	hidden bool
	init   bool // running the CIE's initial instructions
}

// flush records the current state as the row starting at loc. Every
// change to the state since the last row sets touch or hidden, so without
// either the state is the last row's; a row that changed no register rule
// shares the last row's Regs instead of copying them.
//
// The touch and the CFA rule are read and copied field by field: the
// instructions have just stored them a field at a time, and a copy of the
// whole struct reads them back in wider loads the processor cannot serve
// from those stores (a stall on every row).
func (x *executor) flush() {
	if x.done {
		return
	}
	t, s, tc := x.t, &x.in.cur, &x.touch
	n := len(t.Rows)
	share := false
	if n > 0 {
		last := &t.Rows[n-1]
		switch {
		case last.Loc == x.loc:
			// Two advances to one PC (or none yet): the later rules win.
			*tc = tc.or(last.touched)
			if !t.sharesRegs(n - 1) {
				t.regs = t.regs[:len(t.regs)-len(last.Regs)]
			}
			t.Rows, t.regOff = t.Rows[:n-1], t.regOff[:n-1]
			n--
		case tc.none() && (!x.hidden || s.equalRow(last)):
			x.hidden = false
			return
		default:
			share = !x.hidden && tc.set == 0 && tc.restored == 0 && !tc.restoreState
		}
	}
	var regs []RegRule
	if share {
		regs = t.Rows[n-1].Regs
		t.regOff = append(t.regOff, t.regOff[n-1])
	} else {
		start := len(t.regs)
		t.regs = append(t.regs, s.regs...)
		regs = t.regs[start:len(t.regs):len(t.regs)]
		t.regOff = append(t.regOff, int32(start))
	}
	// Filled in place, every field: a Row built apart and copied in
	// costs two copies of its 120 bytes.
	if len(t.Rows) < cap(t.Rows) {
		t.Rows = t.Rows[:len(t.Rows)+1]
	} else {
		t.Rows = append(t.Rows, Row{})
	}
	r := &t.Rows[len(t.Rows)-1]
	r.Loc, r.Regs = x.loc, regs
	r.CFA.Kind, r.CFA.Reg, r.CFA.Offset, r.CFA.Expr = s.cfa.Kind, s.cfa.Reg, s.cfa.Offset, s.cfa.Expr
	r.MangledRA, r.RAStateWithPC, r.ArgsSize = s.mangled, s.withPC, s.argsSize
	r.touched.cfa, r.touched.raState, r.touched.restoreState = tc.cfa, tc.raState, tc.restoreState
	r.touched.set, r.touched.restored = tc.set, tc.restored
	x.touch, x.hidden = touch{}, false
}

// set gives reg a rule and records the touch.
func (x *executor) set(reg uint64, r Rule) {
	x.in.cur.set(reg, r)
	if !x.init {
		x.touch.set |= bit(reg)
		x.hidden = x.hidden || reg >= 64
	}
}

func (x *executor) touchCFA() {
	if !x.init {
		x.touch.cfa = true
	}
}

func (x *executor) advance(to uint64) error {
	if to < x.loc {
		return fmt.Errorf("location moves backwards from %#x to %#x", x.loc, to)
	}
	if to == x.loc {
		return nil
	}
	x.flush()
	x.loc = to
	if to >= x.f.End() {
		x.done = true
	} else {
		x.t.LastAdvance = to
	}
	if len(x.t.regs) > maxRuleCells {
		return fmt.Errorf("more than %d rules in one FDE", maxRuleCells)
	}
	if len(x.t.Rows) >= maxRows {
		return fmt.Errorf("more than %d rows in one FDE", maxRows)
	}
	return nil
}

// initial sets the state the CIE's initial instructions give, running
// them unless the last FDE executed had the same parsed CIE.
func (x *executor) initial(off int) error {
	in, cie := x.in, x.f.CIE
	if x.f.sec != nil && in.initCIE == cie {
		in.cur.copyFrom(&in.initial)
		return nil
	}
	in.initCIE = nil
	if err := x.run(cie.Initial, off, true); err != nil {
		return err
	}
	in.initial.copyFrom(&in.cur)
	if x.f.sec != nil && len(in.stack) == 0 {
		in.initCIE = cie
	}
	return nil
}

// run executes one instruction stream. In the CIE's initial instructions
// location advances are ignored (they make no sense there).
func (x *executor) run(prog []byte, off int, initial bool) error {
	cie := x.f.CIE
	s := &x.in.cur
	data := prog
	if x.f.sec != nil {
		data = x.sec.data[:off+len(prog)]
	} else {
		off = 0
	}
	// r.off is a section offset, so errors and pcrel operands are right.
	r := newReader(data, off, x.sec.order)
	x.init = initial
	for r.off < len(data) && !x.done {
		at := r.off
		op := r.u8()
		var err error
		switch op & 0xc0 {
		case opAdvanceLoc:
			if !initial {
				err = x.advance(x.loc + uint64(op&0x3f)*cie.CodeAlign)
			}
			goto next
		case opOffset:
			x.set(uint64(op&0x3f), Rule{Kind: Offset, Offset: int64(r.uleb()) * cie.DataAlign})
			goto next
		case opRestore:
			x.restore(uint64(op&0x3f), initial)
			goto next
		}
		switch op {
		case opNop:
		case opSetLoc:
			if initial {
				err = fmt.Errorf("DW_CFA_set_loc in CIE initial instructions")
				break
			}
			err = x.setLoc(r)
		case opAdvanceLoc1, opAdvanceLoc2, opAdvanceLoc4, opMIPSAdvanceLoc8:
			var d uint64
			switch op {
			case opAdvanceLoc1:
				d = uint64(r.u8())
			case opAdvanceLoc2:
				d = uint64(r.u16())
			case opAdvanceLoc4:
				d = uint64(r.u32())
			default:
				d = r.u64()
			}
			if r.err == nil && !initial {
				err = x.advance(x.loc + d*cie.CodeAlign)
			}
		case opOffsetExtended:
			reg := r.uleb()
			x.set(reg, Rule{Kind: Offset, Offset: int64(r.uleb()) * cie.DataAlign})
		case opOffsetExtendedSF:
			reg := r.uleb()
			x.set(reg, Rule{Kind: Offset, Offset: r.sleb() * cie.DataAlign})
		case opGNUNegativeOffsetExtended:
			reg := r.uleb()
			x.set(reg, Rule{Kind: Offset, Offset: -int64(r.uleb()) * cie.DataAlign})
		case opValOffset:
			reg := r.uleb()
			x.set(reg, Rule{Kind: ValOffset, Offset: int64(r.uleb()) * cie.DataAlign})
		case opValOffsetSF:
			reg := r.uleb()
			x.set(reg, Rule{Kind: ValOffset, Offset: r.sleb() * cie.DataAlign})
		case opRestoreExtended:
			x.restore(r.uleb(), initial)
		case opUndefined:
			x.set(r.uleb(), Rule{Kind: Undefined})
		case opSameValue:
			x.set(r.uleb(), Rule{Kind: SameValue})
		case opRegister:
			reg := r.uleb()
			x.set(reg, Rule{Kind: Register, Reg: r.uleb()})
		case opExpression, opValExpression:
			reg := r.uleb()
			n := r.uleb()
			if r.err == nil && n > uint64(r.left()) {
				err = fmt.Errorf("expression of %d bytes runs past the program", n)
				break
			}
			k := Expression
			if op == opValExpression {
				k = ValExpression
			}
			x.set(reg, Rule{Kind: k, Expr: r.bytes(int(n))})
		case opRememberState:
			if len(x.in.stack) >= maxStateDepth {
				err = fmt.Errorf("DW_CFA_remember_state nested more than %d deep", maxStateDepth)
				break
			}
			x.in.stack = append(x.in.stack, state{})
			x.in.stack[len(x.in.stack)-1].copyFrom(s)
		case opRestoreState:
			if !initial {
				x.touch.restoreState = true
			}
			n := len(x.in.stack)
			if n == 0 {
				err = fmt.Errorf("DW_CFA_restore_state without a remembered state")
				break
			}
			s.copyFrom(&x.in.stack[n-1])
			x.in.stack = x.in.stack[:n-1]
		case opDefCFA:
			x.touchCFA()
			reg := r.uleb()
			s.cfa = CFA{Kind: CFARegOffset, Reg: reg, Offset: int64(r.uleb())}
			s.lastOff = s.cfa.Offset
		case opDefCFASF:
			x.touchCFA()
			reg := r.uleb()
			s.cfa = CFA{Kind: CFARegOffset, Reg: reg, Offset: r.sleb() * cie.DataAlign}
			s.lastOff = s.cfa.Offset
		case opDefCFARegister:
			x.touchCFA()
			// DWARF allows this only after a register-based rule; libgcc
			// and readelf accept it after an expression too, going back
			// to register + the last offset. Hand-written assembly relies
			// on that (libgcrypt), so do the same.
			reg := r.uleb()
			s.cfa = CFA{Kind: CFARegOffset, Reg: reg, Offset: s.lastOff}
		case opDefCFAOffset, opDefCFAOffsetSF:
			x.touchCFA()
			var off int64
			if op == opDefCFAOffset {
				off = int64(r.uleb())
			} else {
				off = r.sleb() * cie.DataAlign
			}
			// After an expression this only records the offset (libgcc
			// and readelf): the CFA stays the expression.
			s.lastOff = off
			if s.cfa.Kind == CFARegOffset {
				s.cfa.Offset = off
			}
		case opDefCFAExpression:
			x.touchCFA()
			n := r.uleb()
			if r.err == nil && n > uint64(r.left()) {
				err = fmt.Errorf("expression of %d bytes runs past the program", n)
				break
			}
			s.cfa = CFA{Kind: CFAExpression, Expr: r.bytes(int(n))}
		case opGNUArgsSize:
			s.argsSize = r.uleb()
			x.hidden = true
		case opGNUWindowSave:
			s.mangled = !s.mangled
			x.touch.raState = !initial
		case opAArch64NegateRAStateWithPC:
			s.mangled = !s.mangled
			x.touch.raState = !initial
			s.withPC = true
		default:
			err = fmt.Errorf("unknown DW_CFA opcode %#x", op)
		}
	next:
		if err == nil && r.err != nil {
			err = fmt.Errorf("truncated operand of DW_CFA opcode %#x", op)
		}
		if err != nil {
			return &Error{Section: x.sec.kind.String(), Off: int64(at), Msg: fmt.Sprintf("FDE at offset %#x: %v", x.f.Offset, err)}
		}
	}
	return nil
}

func (x *executor) restore(reg uint64, initial bool) {
	s := &x.in.cur
	if !initial {
		x.touch.restored |= bit(reg)
		x.hidden = x.hidden || reg >= 64
	}
	if initial {
		s.del(reg)
		return
	}
	for _, rr := range x.in.initial.regs {
		if rr.Reg == reg {
			s.set(reg, rr.Rule)
			return
		}
	}
	s.del(reg)
}

func (x *executor) setLoc(r *reader) error {
	var to uint64
	if x.sec.kind == kindEH {
		// Encoded like the FDE's start address; pcrel is relative to the
		// operand's own address.
		v, err := readEncoded(r, x.f.CIE.fdeEnc, ptrCtx{sec: x.sec, ptrSize: x.sec.ptrSize, funcStart: x.f.Start})
		if err != nil {
			return fmt.Errorf("DW_CFA_set_loc operand: %v", err)
		}
		to = v
	} else {
		size := x.sec.ptrSize
		if x.f.CIE.addrSize != 0 {
			size = int(x.f.CIE.addrSize)
		}
		to = r.uN(size)
		if r.err != nil {
			return nil // reported as a truncated operand
		}
	}
	return x.advance(to)
}
