package codeflow

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// The reasons only AArch64 code gives.
const (
	// ReasonPACKeys: one function signs or authenticates its return
	// address with both the A and the B key (SFrame has one key per
	// function), or authenticates with the key it did not sign with.
	ReasonPACKeys Reason = "code-pac-keys"
	// ReasonPAC: a use of pointer authentication the rows cannot
	// describe: LR signed twice, signed while it does not hold the return
	// address or with SP away from the CFA, authenticated unsigned, a
	// return with LR still signed, PACM (FEAT_PAuth_LR).
	ReasonPAC Reason = "code-pac-state"
)

// DWARF numbers of the AArch64 registers the rows name.
const (
	a64FP = 29
	a64LR = 30
	a64SP = 31
)

// arm64Hist is what the AArch64 steps keep across the paths of one
// function's walk (walk.a64).
type arm64Hist struct {
	// keys: bit 0 the A key was used, bit 1 the B key.
	keys uint8
}

// arm64 is the AArch64 instruction set. Its instructions are always
// little-endian, in big-endian (aarch64_be) files too: the Arm ARM makes
// instruction fetch little-endian whatever SCTLR.EE says of data, and GNU
// as -EB emits .text little-endian. So words are decoded little-endian
// and only data (jump table entries) is read in Code.Order.
type arm64 struct{}

func newARM64() arch { return arm64{} }

func (arm64) entry() State {
	var s State
	s.Regs[a64SP] = Val{Known: true}
	s.FP = Saved{Where: InReg}
	s.RA = Saved{Where: InReg}
	return s
}

func (arm64) tail(s *State) bool {
	sp := s.Regs[a64SP]
	return sp.Known && sp.Off == 0 && s.FP.Where == InReg && s.RA.Where == InReg && !s.RASigned
}

func (arm64) rule(s *State) (Row, error) {
	r := Row{FP: s.FP, RA: s.RA, RASigned: s.RASigned, BKey: s.BKey, SP: s.Regs[a64SP], FPVal: s.Regs[a64FP]}
	if !setBase(&r, s) {
		return Row{}, &failure{ReasonCFALost, "neither SP nor FP is a known distance from the CFA"}
	}
	if s.RA.Where == Lost {
		return Row{}, &failure{ReasonRALost, "LR overwritten before it was saved"}
	}
	if s.FP.Where == Lost {
		return Row{}, &failure{ReasonFPLost, "x29 overwritten before it was saved"}
	}
	return r, nil
}

func failf(r Reason, format string, args ...any) error {
	return &failure{reason: r, detail: fmt.Sprintf(format, args...)}
}

func (a arm64) step(w *walk, b []byte, pc uint64, s *State) (next, error) {
	if len(b) < 4 {
		return next{}, failf(ReasonOutside, "%d bytes left at %#x", len(b), pc)
	}
	if pc%4 != 0 {
		return next{}, failf(ReasonUndecodable, "instruction at %#x not 4-aligned", pc)
	}
	word := binary.LittleEndian.Uint32(b)
	in, err := isa.ARM64(b[:4])
	if err != nil {
		return a.raw(w, word, pc, s)
	}
	n := next{len: 4}
	switch in.Op {
	case arm64asm.B:
		if _, ok := in.Args[0].(arm64asm.Cond); ok {
			n.flow, n.target = flowBranch, pcRel(pc, in.Args[1])
			return n, nil
		}
		n.flow, n.target = flowJump, pcRel(pc, in.Args[0])
	case arm64asm.CBZ, arm64asm.CBNZ:
		n.flow, n.target = flowBranch, pcRel(pc, in.Args[1])
	case arm64asm.TBZ, arm64asm.TBNZ:
		n.flow, n.target = flowBranch, pcRel(pc, in.Args[2])
	case arm64asm.BL, arm64asm.BLR:
		n.flow = flowCall
		if in.Op == arm64asm.BL {
			n.target = pcRel(pc, in.Args[0])
		}
		a64Call(s)
	case arm64asm.BR:
		r, _ := in.Args[0].(arm64asm.Reg)
		if t := a64Table(w, pc, a64Num(r)); t != nil {
			n.flow, n.targets = flowTable, t
		} else {
			n.flow = flowIndirect
		}
	case arm64asm.RET:
		if r, _ := in.Args[0].(arm64asm.Reg); r != arm64asm.X30 {
			// The return address is in another register, copied from
			// LR or not: no row can say so.
			return next{}, failf(ReasonReturn, "ret through %v at %#x", r, pc)
		}
		return a64Return(s, pc)
	case arm64asm.BRK, arm64asm.HLT, arm64asm.ERET, arm64asm.DRPS:
		n.flow = flowStop
	case arm64asm.SVC, arm64asm.HVC, arm64asm.SMC:
		a64Set(s, 0, Val{}) // the result; the kernel keeps the rest
	case arm64asm.HINT:
		h, _ := in.Args[0].(arm64asm.Imm_hint)
		if err := a64Hint(w, s, uint8(h), pc); err != nil {
			return next{}, err
		}
	default:
		a64Effect(in, s)
	}
	return n, nil
}

// pcRel is the address a PC-relative operand names.
func pcRel(pc uint64, arg arm64asm.Arg) uint64 {
	rel, _ := arg.(arm64asm.PCRel)
	return pc + uint64(int64(rel))
}

// a64Return checks that a return leaves the entry's state. A state that
// gives no row fails for why it gives none (x29 overwritten unsaved, SP
// and x29 both unknown): that is where the function went wrong, not at
// the return, which may well be right.
func a64Return(s *State, pc uint64) (next, error) {
	if _, err := (arm64{}).rule(s); err != nil {
		return next{}, err
	}
	switch {
	case s.RA.Where == Lost:
		return next{}, failf(ReasonRALost, "return at %#x with LR overwritten", pc)
	case s.RA.Where != InReg:
		return next{}, failf(ReasonReturn, "return at %#x with the return address not back in LR", pc)
	case s.RASigned:
		return next{}, failf(ReasonPAC, "return at %#x with LR still signed", pc)
	case s.FP.Where != InReg:
		return next{}, failf(ReasonReturn, "return at %#x with the caller's x29 not restored", pc)
	case !s.Regs[a64SP].Known || s.Regs[a64SP].Off != 0:
		return next{}, failf(ReasonReturn, "return at %#x with SP not at the CFA", pc)
	}
	return next{len: 4, flow: flowReturn}, nil
}

// a64Call is what a call does to the state: LR holds the call's return
// address, the registers the procedure call standard lets a callee
// change (x0-x18) hold what it left there.
func a64Call(s *State) {
	for r := 0; r <= 18; r++ {
		s.Regs[r] = Val{}
	}
	a64Set(s, a64LR, Val{})
}

// a64Set writes register r (0-31, 31 SP): the caller's x29 or return
// address is lost when its register is overwritten before a save.
func a64Set(s *State, r int, v Val) {
	if r < 0 || r > a64SP {
		return
	}
	if !v.Known {
		v = Val{} // one unknown, so that paths' states compare equal
	}
	switch {
	case r == a64FP && s.FP.Where == InReg:
		s.FP = Saved{Where: Lost}
	case r == a64LR && s.RA.Where == InReg:
		s.RA = Saved{Where: Lost}
		s.RASigned, s.BKey = false, false
	}
	s.Regs[r] = v
}

// a64Num is the DWARF number of a general register operand (W or X, 31
// for SP and WSP), or -1 (the zero register, other registers).
func a64Num(arg arm64asm.Arg) int {
	var r arm64asm.Reg
	switch x := arg.(type) {
	case arm64asm.Reg:
		r = x
	case arm64asm.RegSP:
		r = arm64asm.Reg(x)
		if r == arm64asm.SP || r == arm64asm.WSP {
			return a64SP
		}
	default:
		return -1
	}
	switch {
	case r >= arm64asm.X0 && r <= arm64asm.X30:
		return int(r - arm64asm.X0)
	case r >= arm64asm.W0 && r <= arm64asm.W30:
		return int(r - arm64asm.W0)
	}
	return -1
}

// a64Wide says arg is a 64-bit general register (or SP).
func a64Wide(arg arm64asm.Arg) bool {
	switch x := arg.(type) {
	case arm64asm.Reg:
		return x >= arm64asm.X0 && x <= arm64asm.X30
	case arm64asm.RegSP:
		r := arm64asm.Reg(x)
		return r == arm64asm.SP || r >= arm64asm.X0 && r <= arm64asm.X30
	}
	return false
}

// a64Stores are the instructions whose registers before the memory
// operand are stored, not loaded; a64Status those whose first register
// is a status written back (the store exclusives).
var a64Stores = map[arm64asm.Op]bool{
	arm64asm.STR: true, arm64asm.STRB: true, arm64asm.STRH: true,
	arm64asm.STUR: true, arm64asm.STURB: true, arm64asm.STURH: true,
	arm64asm.STP: true, arm64asm.STNP: true, arm64asm.STLR: true,
	arm64asm.STLRB: true, arm64asm.STLRH: true, arm64asm.STTR: true,
	arm64asm.STTRB: true, arm64asm.STTRH: true, arm64asm.ST1: true,
	arm64asm.ST2: true, arm64asm.ST3: true, arm64asm.ST4: true,
	arm64asm.STXR: true, arm64asm.STXRB: true, arm64asm.STXRH: true,
	arm64asm.STLXR: true, arm64asm.STLXRB: true, arm64asm.STLXRH: true,
	arm64asm.STXP: true, arm64asm.STLXP: true,
	arm64asm.PRFM: true, arm64asm.PRFUM: true,
}

var a64Status = map[arm64asm.Op]bool{
	arm64asm.STXR: true, arm64asm.STXRB: true, arm64asm.STXRH: true,
	arm64asm.STLXR: true, arm64asm.STLXRB: true, arm64asm.STLXRH: true,
	arm64asm.STXP: true, arm64asm.STLXP: true,
}

// a64NoDest are the instructions without a memory operand whose first
// operand is read, not written. Any other instruction is taken to write
// its first operand: a guess too many costs a row, one too few could
// give a wrong one.
var a64NoDest = map[arm64asm.Op]bool{
	arm64asm.CMP: true, arm64asm.CMN: true, arm64asm.TST: true,
	arm64asm.CCMP: true, arm64asm.CCMN: true, arm64asm.FCMP: true,
	arm64asm.FCMPE: true, arm64asm.FCCMP: true, arm64asm.FCCMPE: true,
	arm64asm.MSR: true, arm64asm.SYS: true, arm64asm.NOP: true,
	arm64asm.DMB: true, arm64asm.DSB: true, arm64asm.ISB: true,
	arm64asm.CLREX: true, arm64asm.YIELD: true, arm64asm.WFE: true,
	arm64asm.WFI: true, arm64asm.SEV: true, arm64asm.SEVL: true,
	arm64asm.DC: true, arm64asm.IC: true, arm64asm.TLBI: true,
	arm64asm.AT: true,
}

// a64Mem is in's memory operand and its index, or -1.
func a64Mem(in arm64asm.Inst) (arm64asm.Arg, int) {
	for i, arg := range in.Args {
		switch arg.(type) {
		case arm64asm.MemImmediate, arm64asm.MemExtend:
			return arg, i
		}
	}
	return nil, -1
}

// a64Effect applies an instruction that does not branch: its loads and
// stores of the caller's x29 and LR, its register writes, its base
// register's write-back.
func a64Effect(in arm64asm.Inst, s *State) {
	mem, mi := a64Mem(in)
	if mi < 0 {
		if !a64NoDest[in.Op] {
			a64Set(s, a64Num(in.Args[0]), a64Value(in, s))
		}
		return
	}
	addr, known := Val{}, false
	m, isImm := mem.(arm64asm.MemImmediate)
	if isImm {
		base := a64Num(m.Base)
		imm, ok := memImm(m)
		if base >= 0 && ok && s.Regs[base].Known {
			addr, known = s.Regs[base], true
			if m.Mode != arm64asm.AddrPostIndex {
				addr.Off += imm
			}
		}
	}
	first := 0
	if a64Status[in.Op] {
		a64Set(s, a64Num(in.Args[0]), Val{})
		first = 1
	}
	off := int64(0)
	for i := first; i < mi; i++ {
		size := a64Size(in.Args[i])
		r := a64Num(in.Args[i])
		if a64Stores[in.Op] {
			a64Store(s, r, size, addr.Off+off, known)
		} else {
			a64Load(s, r, size, addr.Off+off, known)
		}
		off += size
	}
	if isImm && m.Mode != arm64asm.AddrOffset {
		base := a64Num(m.Base)
		imm, ok := memImm(m)
		if base >= 0 {
			v := s.Regs[base]
			v.Off += imm
			v.Known = v.Known && ok && m.Mode != arm64asm.AddrPostReg
			a64Set(s, base, v)
		}
	}
}

// a64Store stores register r (-1: not a general register) of size bytes
// at CFA+at (when known): a save of the caller's x29 or LR still in its
// register, else a store that may overwrite a saved one.
func a64Store(s *State, r int, size, at int64, known bool) {
	if !known {
		return // through a pointer the analysis does not follow
	}
	switch {
	case r == a64FP && size == 8 && s.FP.Where == InReg:
		s.FP = Saved{Where: OnStack, Off: at}
		return
	case r == a64LR && size == 8 && s.RA.Where == InReg:
		s.RA = Saved{Where: OnStack, Off: at}
		return
	}
	over := func(slot Saved) bool {
		return slot.Where == OnStack && at < slot.Off+8 && slot.Off < at+size
	}
	if over(s.FP) {
		s.FP = Saved{Where: Lost}
	}
	if over(s.RA) {
		s.RA = Saved{Where: Lost}
	}
}

// a64Load loads register r from CFA+at (when known): the caller's x29 or
// LR back from its slot, or a write of some other value.
func a64Load(s *State, r int, size, at int64, known bool) {
	switch {
	case r < 0:
		return
	case r == a64FP && known && size == 8 && s.FP.Where == OnStack && s.FP.Off == at:
		s.FP, s.Regs[r] = Saved{Where: InReg}, Val{}
	case r == a64LR && known && size == 8 && s.RA.Where == OnStack && s.RA.Off == at:
		s.RA, s.Regs[r] = Saved{Where: InReg}, Val{}
	default:
		a64Set(s, r, Val{})
	}
}

// a64Size is how many bytes a transfer register moves (SIMD lists: the
// most four Q registers could).
func a64Size(arg arm64asm.Arg) int64 {
	switch x := arg.(type) {
	case arm64asm.Reg:
		switch {
		case x >= arm64asm.W0 && x <= arm64asm.WZR:
			return 4
		case x >= arm64asm.X0 && x <= arm64asm.XZR:
			return 8
		case x >= arm64asm.B0 && x <= arm64asm.B31:
			return 1
		case x >= arm64asm.H0 && x <= arm64asm.H31:
			return 2
		case x >= arm64asm.S0 && x <= arm64asm.S31:
			return 4
		case x >= arm64asm.D0 && x <= arm64asm.D31:
			return 8
		}
		return 16
	}
	return 64
}

// a64Value is the frame address an instruction without a memory operand
// leaves in its first operand, when it is one: MOV from SP or a register
// holding one, ADD and SUB of an immediate to one. A 32-bit result never
// is.
func a64Value(in arm64asm.Inst, s *State) Val {
	if !a64Wide(in.Args[0]) {
		return Val{}
	}
	src := func(arg arm64asm.Arg) Val {
		if r := a64Num(arg); r >= 0 && a64Wide(arg) {
			return s.Regs[r]
		}
		return Val{}
	}
	switch in.Op {
	case arm64asm.MOV:
		return src(in.Args[1])
	case arm64asm.ADD, arm64asm.SUB:
		v := src(in.Args[1])
		is, ok := in.Args[2].(arm64asm.ImmShift)
		if !ok || in.Args[3] != nil {
			return Val{}
		}
		imm, ok := isa.ARM64ImmShift(is)
		if !ok {
			return Val{}
		}
		if in.Op == arm64asm.SUB {
			imm = -imm
		}
		v.Off += imm
		return v
	}
	return Val{}
}

// The immediates of arm64asm's operands are not exported; they are read
// back from the operands' text, whose form the package fixes.

// memImm is the offset of m: "[SP,#-32]!", "[X29,#16]", "[SP],#16", "[X1]".
func memImm(m arm64asm.MemImmediate) (int64, bool) {
	if m.Mode == arm64asm.AddrPostReg {
		return 0, false
	}
	s := m.String()
	i := strings.IndexByte(s, '#')
	if i < 0 {
		return 0, true
	}
	v, err := strconv.ParseInt(strings.TrimRight(s[i+1:], "]!"), 10, 64)
	return v, err == nil
}

// a64Hint is a HINT-space instruction: the PAC instructions on LR among
// them (arm64asm shows them as HINT #n).
func a64Hint(w *walk, s *State, h uint8, pc uint64) error {
	switch {
	case h >= 24 && h <= 27: // paciaz, paciasp, pacibz, pacibsp
		return a64Sign(w, s, h&2 != 0, h&1 != 0, pc)
	case h >= 28 && h <= 31: // autiaz, autiasp, autibz, autibsp
		return a64Auth(w, s, h&2 != 0, pc)
	case h == 8 || h == 10 || h == 12 || h == 14: // pac/aut[ab]1716
		a64Set(s, 17, Val{})
	case h == 39:
		return failf(ReasonPAC, "pacm at %#x: the signing includes the PC, which SFrame cannot say", pc)
	case h == 40: // chkfeat x16
		a64Set(s, 16, Val{})
	}
	// xpaclri (7) strips LR: the unwinder strips it as well, so the
	// state stays; bti, nop and the others change nothing.
	return nil
}

// a64Key notes a use of key b in the walk: SFrame has one key per
// function.
func a64Key(w *walk, b bool, pc uint64) error {
	bit := uint8(1)
	if b {
		bit = 2
	}
	w.a64.keys |= bit
	if w.a64.keys == 3 {
		return failf(ReasonPACKeys, "the A and the B key both used (at %#x)", pc)
	}
	return nil
}

// a64Sign signs LR with key b, SP (sp) or zero its modifier.
func a64Sign(w *walk, s *State, b, sp bool, pc uint64) error {
	if err := a64Key(w, b, pc); err != nil {
		return err
	}
	switch {
	case s.RASigned:
		return failf(ReasonPAC, "LR signed twice at %#x", pc)
	case s.RA.Where != InReg:
		return failf(ReasonPAC, "LR signed at %#x while it does not hold the return address", pc)
	case sp && (!s.Regs[a64SP].Known || s.Regs[a64SP].Off != 0):
		// An unwinder authenticates with the CFA as the modifier.
		return failf(ReasonPAC, "LR signed at %#x with SP away from the CFA", pc)
	}
	s.RASigned, s.BKey = true, b
	return nil
}

// a64Auth authenticates LR with key b.
func a64Auth(w *walk, s *State, b bool, pc uint64) error {
	if err := a64Key(w, b, pc); err != nil {
		return err
	}
	switch {
	case !s.RASigned || s.RA.Where != InReg:
		return failf(ReasonPAC, "LR authenticated at %#x while it holds no signed return address", pc)
	case s.BKey != b:
		return failf(ReasonPACKeys, "LR authenticated at %#x with the key it was not signed with", pc)
	}
	s.RASigned, s.BKey = false, false
	return nil
}

// The encodings arm64asm v0.30.0 does not decode but that the walk must
// know (the Arm Architecture Reference Manual's field layouts): the
// FEAT_PAuth branches, returns, register forms and loads, UDF, and the
// FEAT_LSE atomics, which compilers emit for -march=armv8.1-a and later.
const (
	retaa, retab = 0xd65f0bff, 0xd65f0fff
	// braa, brab (register modifier): 1101011 1000 11111 0000 1 M Rn Rm.
	braMask, braBits = 0xfffff800, 0xd71f0800
	// braaz, brabz: 1101011 0000 11111 0000 1 M Rn 11111.
	brazMask, brazBits = 0xfffff81f, 0xd61f081f
	// blraa, blrab; blraaz, blrabz.
	blraMask, blraBits   = 0xfffff800, 0xd73f0800
	blrazMask, blrazBits = 0xfffff81f, 0xd63f081f
	// pacia ... autdb, paciza ... xpacd: 1101101011000001 00 Z opc Rn Rd.
	pacMask, pacBits = 0xffffc000, 0xdac10000
	xpaci, xpacd     = 0xdac143e0, 0xdac147e0
	// ldraa, ldrab: 11111000 M S 1 imm9 W 1 Rn Rt.
	ldraMask, ldraBits = 0xff200400, 0xf8200400
	// udf #imm16: all zero above the immediate.
	udfMask = 0xffff0000
	// atomics (ldadd, swp, ...): size 111000 A R 1 Rs o3 opc 00 Rn Rt.
	atomMask, atomBits = 0x3f200c00, 0x38200000
	// cas: size 0010001 L 1 Rs o0 11111 Rn Rt; casp: 0 sz 001000 0 L 1 ...
	casMask, casBits   = 0x3fa07c00, 0x08a07c00
	caspMask, caspBits = 0xbfa07c00, 0x08207c00
)

// raw is the step of a word isa.ARM64 does not decode.
func (arm64) raw(w *walk, word uint32, pc uint64, s *State) (next, error) {
	n := next{len: 4}
	rd, rn := int(word&31), int(word>>5&31)
	switch {
	case word == retaa || word == retab:
		if err := a64Auth(w, s, word == retab, pc); err != nil {
			return next{}, err
		}
		return a64Return(s, pc)
	case word&braMask == braBits || word&brazMask == brazBits:
		n.flow = flowIndirect
	case word&blraMask == blraBits || word&blrazMask == blrazBits:
		n.flow = flowCall
		a64Call(s)
	case word&^31 == xpaci || word&^31 == xpacd:
		if rd != a64LR { // xpaci x30 strips LR as xpaclri does
			a64Set(s, a64Reg31(rd), Val{})
		}
	case word&pacMask == pacBits:
		if err := a64PACReg(w, s, word, pc); err != nil {
			return next{}, err
		}
	case word&ldraMask == ldraBits:
		a64Load(s, a64Reg31(rd), 8, 0, false)
		if word&(1<<11) != 0 { // write-back: a pointer SP is not
			a64Set(s, rn, Val{})
		}
	case word&udfMask == 0:
		n.flow = flowStop
	case word&atomMask == atomBits:
		a64Set(s, a64Reg31(rd), Val{})
	case word&casMask == casBits:
		a64Set(s, a64Reg31(int(word>>16&31)), Val{})
	case word&caspMask == caspBits:
		a64Set(s, a64Reg31(int(word>>16&31)), Val{})
		a64Set(s, a64Reg31(int(word>>16&31)+1), Val{})
	default:
		return next{}, failf(ReasonUndecodable, "%#08x at %#x", word, pc)
	}
	return n, nil
}

// a64Reg31 is r as a data register number: 31 is the zero register.
func a64Reg31(r int) int {
	if r >= 31 {
		return -1
	}
	return r
}

// a64PACReg is a PAC instruction of the register form: on LR with SP as
// the modifier (pacia x30, sp), or PACIZA x30, it signs or authenticates
// the return address as paciasp and paciaz do; xpaci x30 strips it (as
// xpaclri); any other on LR is a modifier no row can name.
func a64PACReg(w *walk, s *State, word uint32, pc uint64) error {
	rd, rn := int(word&31), int(word>>5&31)
	z, opc := word>>13&1 == 1, word>>10&7
	if rd != a64LR {
		a64Set(s, a64Reg31(rd), Val{})
		return nil
	}
	switch {
	case z && opc == 0b000 && rn == 31: // paciza
		return a64Sign(w, s, false, false, pc)
	case z && opc == 0b001 && rn == 31: // pacizb
		return a64Sign(w, s, true, false, pc)
	case !z && opc == 0b000 && rn == 31: // pacia x30, sp
		return a64Sign(w, s, false, true, pc)
	case !z && opc == 0b001 && rn == 31:
		return a64Sign(w, s, true, true, pc)
	case !z && opc == 0b100 && rn == 31: // autia x30, sp
		return a64Auth(w, s, false, pc)
	case !z && opc == 0b101 && rn == 31:
		return a64Auth(w, s, true, pc)
	case z && opc == 0b100 && rn == 31: // autiza
		return a64Auth(w, s, false, pc)
	case z && opc == 0b101 && rn == 31:
		return a64Auth(w, s, true, pc)
	}
	return failf(ReasonPAC, "%#08x at %#x: LR signed or authenticated with a modifier other than SP", word, pc)
}
