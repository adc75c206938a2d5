package goprologue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

func init() {
	arches[ARM64] = &arch{cfa: 0, below: 8, decode: decodeARM64, effect: effectARM64}
}

// decodeARM64 decodes each 4-byte word; Go's arm64 code has padding and
// literal words between functions and after their last branch, which do
// not decode and which no path reaches.
func decodeARM64(code []byte, pc uint64, sc *scratch) []insn {
	out := room(sc.insns, len(code)/4+1) // see decodeAMD64
	insts := room(sc.a64, len(code)/4+1)
	defer func() { sc.insns, sc.a64 = out, insts }()
	for off := 0; off < len(code); off += 4 {
		at := pc + uint64(off)
		if len(code)-off < 4 {
			return append(out, insn{pc: at, size: len(code) - off, err: errors.New("truncated instruction")})
		}
		a, err := isa.ARM64(code[off : off+4])
		if err != nil {
			w := binary.LittleEndian.Uint32(code[off:])
			if r, ok := classifyARM64(w); ok {
				out = append(out, insn{pc: at, size: 4, raw: r})
				continue
			}
			out = append(out, insn{pc: at, size: 4, err: err})
			continue
		}
		insts = append(insts, a)
		out = append(out, insn{pc: at, size: 4, raw: &insts[len(insts)-1]})
	}
	return out
}

// noDestARM64 are the instructions whose first operand is not written.
var noDestARM64 = map[arm64asm.Op]bool{
	arm64asm.STR: true, arm64asm.STRB: true, arm64asm.STRH: true,
	arm64asm.STUR: true, arm64asm.STURB: true, arm64asm.STURH: true,
	arm64asm.STP: true, arm64asm.STNP: true, arm64asm.STLR: true,
	arm64asm.STLRB: true, arm64asm.STLRH: true, arm64asm.STTR: true,
	arm64asm.STTRB: true, arm64asm.STTRH: true, arm64asm.ST1: true,
	arm64asm.ST2: true, arm64asm.ST3: true, arm64asm.ST4: true,
	arm64asm.CMP: true, arm64asm.CMN: true, arm64asm.TST: true,
	arm64asm.CCMP: true, arm64asm.CCMN: true, arm64asm.FCMP: true,
	arm64asm.FCMPE: true, arm64asm.FCCMP: true, arm64asm.FCCMPE: true,
	arm64asm.B: true, arm64asm.BL: true, arm64asm.BR: true,
	arm64asm.BLR: true, arm64asm.RET: true, arm64asm.CBZ: true,
	arm64asm.CBNZ: true, arm64asm.TBZ: true, arm64asm.TBNZ: true,
	arm64asm.BRK: true, arm64asm.HLT: true, arm64asm.SVC: true,
	arm64asm.HVC: true, arm64asm.SMC: true, arm64asm.MSR: true,
	arm64asm.SYS: true, arm64asm.NOP: true, arm64asm.HINT: true,
	arm64asm.DMB: true, arm64asm.DSB: true, arm64asm.ISB: true,
	arm64asm.PRFM: true, arm64asm.PRFUM: true, arm64asm.CLREX: true,
	arm64asm.YIELD: true, arm64asm.WFE: true, arm64asm.WFI: true,
	arm64asm.SEV: true, arm64asm.SEVL: true, arm64asm.DC: true,
	arm64asm.IC: true, arm64asm.TLBI: true, arm64asm.AT: true,
}

// pairARM64 are the loads that write their second operand too.
var pairARM64 = map[arm64asm.Op]bool{
	arm64asm.LDP: true, arm64asm.LDNP: true, arm64asm.LDPSW: true,
	arm64asm.LDXP: true, arm64asm.LDAXP: true,
}

// effectARM64 says what an arm64 instruction does to control flow, the
// frame pointer (R29) and the stack pointer. Large frames are reached
// through a register (R20 = RSP - R27), so regs tracks constants and
// stack addresses in the general registers.
func effectARM64(in insn, delta int64, regs map[int]value) effect {
	if r, ok := in.raw.(rawARM64); ok {
		return r.effect(regs)
	}
	a := *in.raw.(*arm64asm.Inst)
	e := flowARM64(a, in.pc)
	e.nop = a.Op == arm64asm.NOP
	if e.flow == flowCall {
		return e
	}
	sp := value{stack: true, v: -delta}
	memoryARM64(a, sp, regs, &e)
	var dests []arm64asm.Arg
	if !noDestARM64[a.Op] {
		dests = append(dests, a.Args[0])
	}
	if pairARM64[a.Op] {
		dests = append(dests, a.Args[1])
	}
	for _, d := range dests {
		r, isSP := regARM64(d)
		switch {
		case isSP:
			e.spWrite = true
			if v, ok := computeARM64(a, sp, regs); ok && v.stack {
				e.spKnown, e.spDelta = true, -v.v-delta
			}
		case r == arm64asm.X29 || r == arm64asm.W29:
			if e.fp == fpLoad {
				break
			}
			e.fp = fpWrite
			if v, ok := computeARM64(a, sp, regs); ok && r == arm64asm.X29 && v.stack && v.v == -8 {
				e.fp = fpCaller
			}
		case r != 0:
			v, ok := computeARM64(a, sp, regs)
			if ok && r >= arm64asm.X0 && r <= arm64asm.X30 && len(dests) == 1 {
				regs[int(r)] = v
			} else {
				delete(regs, int(r))
			}
		}
	}
	return e
}

// flowARM64 is where control goes after a, which is at pc.
func flowARM64(a arm64asm.Inst, pc uint64) effect {
	target := func(arg arm64asm.Arg) uint64 {
		rel, _ := arg.(arm64asm.PCRel)
		return pc + uint64(int64(rel))
	}
	switch a.Op {
	case arm64asm.RET:
		return effect{flow: flowReturn}
	case arm64asm.BL, arm64asm.BLR:
		return effect{flow: flowCall}
	case arm64asm.BR:
		return effect{flow: flowIndirect}
	case arm64asm.B:
		if _, ok := a.Args[0].(arm64asm.Cond); ok {
			return effect{flow: flowBranch, target: target(a.Args[1])}
		}
		return effect{flow: flowJump, target: target(a.Args[0])}
	case arm64asm.CBZ, arm64asm.CBNZ:
		return effect{flow: flowBranch, target: target(a.Args[1])}
	case arm64asm.TBZ, arm64asm.TBNZ:
		return effect{flow: flowBranch, target: target(a.Args[2])}
	case arm64asm.BRK, arm64asm.HLT:
		return effect{flow: flowStop}
	}
	return effect{flow: flowNext}
}

// memoryARM64 fills e with what a load or store through an immediate
// address does: the frame pointer stored or loaded at a stack address,
// and the base register's write-back.
func memoryARM64(a arm64asm.Inst, sp value, regs map[int]value, e *effect) {
	var mem arm64asm.MemImmediate
	n := -1
	for i, arg := range a.Args {
		if m, ok := arg.(arm64asm.MemImmediate); ok {
			mem, n = m, i
			break
		}
	}
	if n < 0 {
		return
	}
	imm, immOK := memImmARM64(mem)
	base, baseOK := sp, true
	if arm64asm.Reg(mem.Base) != arm64asm.SP {
		base, baseOK = regs[int(mem.Base)]
		baseOK = baseOK && base.stack
	}
	addr := base.v
	if mem.Mode != arm64asm.AddrPostIndex {
		addr += imm
	}
	known := baseOK && immOK
	load := a.Op == arm64asm.LDR || a.Op == arm64asm.LDUR || a.Op == arm64asm.LDP || a.Op == arm64asm.LDNP
	store := a.Op == arm64asm.STR || a.Op == arm64asm.STUR || a.Op == arm64asm.STP || a.Op == arm64asm.STNP
	for i := 0; i < n; i++ {
		if r, _ := a.Args[i].(arm64asm.Reg); r == arm64asm.X29 && (store || load) {
			e.fp, e.addr, e.addrKnown = fpStore, addr+int64(8*i), known
			if load {
				e.fp = fpLoad
			}
		}
	}
	if mem.Mode == arm64asm.AddrOffset {
		return
	}
	if arm64asm.Reg(mem.Base) == arm64asm.SP {
		e.spWrite = true
		e.spKnown, e.spDelta = immOK && mem.Mode != arm64asm.AddrPostReg, -imm
		return
	}
	if v, ok := regs[int(mem.Base)]; ok && immOK && mem.Mode != arm64asm.AddrPostReg {
		regs[int(mem.Base)] = value{stack: v.stack, v: v.v + imm}
	} else {
		delete(regs, int(mem.Base))
	}
}

// computeARM64 is the value a writes to its first operand when it is a
// constant or a stack address: MOV and ORR of an immediate, MOVK into a
// known constant, MOV of a register, ADD and SUB of an immediate or of a
// register holding a constant.
func computeARM64(a arm64asm.Inst, sp value, regs map[int]value) (value, bool) {
	src := func(arg arm64asm.Arg) (value, bool) {
		switch r := arg.(type) {
		case arm64asm.RegSP:
			if arm64asm.Reg(r) == arm64asm.SP {
				return sp, true
			}
			v, ok := regs[int(r)]
			return v, ok
		case arm64asm.Reg:
			if r == arm64asm.XZR {
				return value{}, true
			}
			v, ok := regs[int(r)]
			return v, ok
		case arm64asm.Imm64:
			return value{v: int64(r.Imm)}, true
		case arm64asm.ImmShift:
			v, ok := immShiftARM64(r)
			return value{v: v}, ok
		case arm64asm.RegExtshiftAmount:
			reg, ok := plainRegARM64(r)
			if !ok {
				return value{}, false
			}
			v, ok := regs[int(reg)]
			return v, ok && !v.stack
		}
		return value{}, false
	}
	switch a.Op {
	case arm64asm.MOV:
		return src(a.Args[1])
	case arm64asm.ORR:
		x, ok1 := src(a.Args[1])
		y, ok2 := src(a.Args[2])
		if ok1 && ok2 && !x.stack && x.v == 0 && !y.stack {
			return y, true
		}
	case arm64asm.MOVK:
		return movkARM64(a, regs)
	case arm64asm.ADD, arm64asm.SUB:
		x, ok1 := src(a.Args[1])
		y, ok2 := src(a.Args[2])
		if !ok1 || !ok2 || y.stack || a.Args[3] != nil {
			return value{}, false
		}
		if a.Op == arm64asm.SUB {
			y.v = -y.v
		}
		return value{stack: x.stack, v: x.v + y.v}, true
	}
	return value{}, false
}

// movkARM64 is the constant a MOVK leaves in a register that held one.
func movkARM64(a arm64asm.Inst, regs map[int]value) (value, bool) {
	r, _ := a.Args[0].(arm64asm.Reg)
	old, ok := regs[int(r)]
	is, isOK := a.Args[1].(arm64asm.ImmShift)
	if !ok || old.stack || !isOK {
		return value{}, false
	}
	imm, shift, ok := splitImmShiftARM64(is)
	if !ok {
		return value{}, false
	}
	mask := int64(0xffff) << shift
	return value{v: old.v&^mask | imm<<shift}, true
}

// regARM64 is the general register arg names, and whether it is SP.
func regARM64(arg arm64asm.Arg) (arm64asm.Reg, bool) {
	switch r := arg.(type) {
	case arm64asm.RegSP:
		if arm64asm.Reg(r) == arm64asm.SP || arm64asm.Reg(r) == arm64asm.WSP {
			return 0, true
		}
		return arm64asm.Reg(r), false
	case arm64asm.Reg:
		if r == arm64asm.XZR || r == arm64asm.WZR {
			return 0, false
		}
		return r, false
	}
	return 0, false
}

// The immediates of these operands are not exported by arm64asm; they
// are read from the operands' own text.

// memImmARM64 is the immediate of m: "[SP,#-8]", "[SP,#-32]!",
// "[SP],#32" or "[X20]".
func memImmARM64(m arm64asm.MemImmediate) (int64, bool) {
	if m.Mode == arm64asm.AddrPostReg {
		return 0, false
	}
	s := m.String()
	i := strings.IndexByte(s, '#')
	if i < 0 {
		return 0, true
	}
	s = strings.TrimRight(s[i+1:], "]!")
	v, err := strconv.ParseInt(s, 0, 64)
	return v, err == nil
}

// immShiftARM64 is the value of an ADD or SUB immediate: "#0x20" or
// "#0x1, LSL #12".
func immShiftARM64(is arm64asm.ImmShift) (int64, bool) {
	imm, shift, ok := splitImmShiftARM64(is)
	return imm << shift, ok
}

func splitImmShiftARM64(is arm64asm.ImmShift) (imm int64, shift uint, ok bool) {
	s := is.String()
	head, tail, shifted := strings.Cut(s, ", LSL #")
	imm, err := strconv.ParseInt(strings.TrimPrefix(head, "#"), 0, 64)
	if err != nil {
		return 0, 0, false
	}
	if shifted {
		n, err := strconv.ParseUint(tail, 10, 8)
		if err != nil {
			return 0, 0, false
		}
		shift = uint(n)
	}
	return imm, shift, true
}

// plainRegARM64 is the register of an extended-register operand that
// neither extends nor shifts it, such as "X27" or "X27, UXTX".
func plainRegARM64(r arm64asm.RegExtshiftAmount) (arm64asm.Reg, bool) {
	name, ext, _ := strings.Cut(r.String(), ", ")
	if ext != "" && ext != "UXTX" && ext != "LSL #0" {
		return 0, false
	}
	if !strings.HasPrefix(name, "X") {
		return 0, false
	}
	n, err := strconv.Atoi(name[1:])
	if err != nil || n > 30 {
		return 0, false
	}
	return arm64asm.X0 + arm64asm.Reg(n), true
}

// rawARM64 is an instruction that arm64asm v0.33.0 does not decode but
// that Go emits: the ARMv8.1 atomics (LDADD, LDCLR, LDEOR, LDSET, SWP
// and the rest of their group, which Go's sync/atomic and runtime use
// when the CPU has them) and CAS, and MSR of a PSTATE field such as DIT.
// Only the registers they write are taken from the word, by the field
// layout of the Arm Architecture Reference Manual; none writes back its
// base register or branches.
type rawARM64 struct {
	word   uint32
	class  string
	writes []int // register numbers 0-30 (31, the zero register, left out)
}

func (r rawARM64) String() string {
	return fmt.Sprintf("%s (%#08x)", r.class, r.word)
}

// The encoding classes of rawARM64: a mask of fixed bits and their value.
const (
	// size 111 V=0 00 A R 1 Rs o3 opc 00 Rn Rt: atomic memory operations,
	// which write Rt.
	atomicMask, atomicBits = 0x3f200c00, 0x38200000
	// size 0010001 L 1 Rs o0 11111 Rn Rt: CAS, which writes Rs.
	casMask, casBits = 0x3fa07c00, 0x08a07c00
	// 1101010100000 op1 0100 CRm op2 11111: MSR to a PSTATE field.
	msrMask, msrBits = 0xfff8f01f, 0xd500401f
)

func classifyARM64(w uint32) (rawARM64, bool) {
	reg := func(shift uint) []int {
		if n := int(w>>shift) & 31; n != 31 {
			return []int{n}
		}
		return nil
	}
	switch {
	case w&atomicMask == atomicBits:
		return rawARM64{word: w, class: "atomic", writes: reg(0)}, true
	case w&casMask == casBits:
		return rawARM64{word: w, class: "CAS", writes: reg(16)}, true
	case w&msrMask == msrBits:
		return rawARM64{word: w, class: "MSR", writes: nil}, true
	}
	return rawARM64{}, false
}

// effect of r: it only writes general registers.
func (r rawARM64) effect(regs map[int]value) effect {
	e := effect{flow: flowNext}
	for _, n := range r.writes {
		if n == 29 {
			e.fp = fpWrite
		}
		delete(regs, int(arm64asm.X0)+n)
		delete(regs, int(arm64asm.W0)+n)
	}
	return e
}
