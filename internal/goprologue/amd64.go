package goprologue

import (
	"errors"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

func init() {
	arches[AMD64] = &arch{cfa: 8, decode: decodeAMD64, effect: effectAMD64}
}

// decodeAMD64 decodes code in address order. x86 instructions have no
// fixed length, so nothing after a byte that does not decode can be
// split: that insn takes the rest of the code.
func decodeAMD64(code []byte, pc uint64, sc *scratch) []insn {
	// Room for instructions of 4 bytes on average, and the decoded ones
	// in one array: boxed one by one (insn.raw), they were a third of
	// the time of an analysis. Both are sc's, and go back to it (an
	// array outgrown stays where the insns before point).
	out := room(sc.insns, len(code)/4+1)
	insts := room(sc.x86, len(code)/4+1)
	defer func() { sc.insns, sc.x86 = out, insts }()
	for off := 0; off < len(code); {
		in, err := isa.AMD64(code[off:])
		if err == nil && in.Op == 0 {
			// x86asm v0.33.0 returns a prefix with no opcode and no error
			// for some instructions it lacks (66 4c 0f 38 f6 10, ADCX).
			err = errors.New("no opcode decoded")
		}
		if err != nil {
			return append(out, insn{pc: pc + uint64(off), size: len(code) - off, err: err})
		}
		at := pc + uint64(off)
		in.Len = isa.LenAMD64(in, code[off:])
		insts = append(insts, in)
		out = append(out, insn{pc: at, size: in.Len, raw: &insts[len(insts)-1]})
		off += in.Len
	}
	return out
}

// conditional jumps of x86.
var jccAMD64 = map[x86asm.Op]bool{
	x86asm.JA: true, x86asm.JAE: true, x86asm.JB: true, x86asm.JBE: true,
	x86asm.JCXZ: true, x86asm.JE: true, x86asm.JECXZ: true, x86asm.JG: true,
	x86asm.JGE: true, x86asm.JL: true, x86asm.JLE: true, x86asm.JNE: true,
	x86asm.JNO: true, x86asm.JNP: true, x86asm.JNS: true, x86asm.JO: true,
	x86asm.JP: true, x86asm.JRCXZ: true, x86asm.JS: true,
	x86asm.LOOP: true, x86asm.LOOPE: true, x86asm.LOOPNE: true,
}

// readsArg0AMD64 are the instructions that only read their first
// operand when it is a register.
var readsArg0AMD64 = map[x86asm.Op]bool{
	x86asm.CMP: true, x86asm.TEST: true, x86asm.PUSH: true, x86asm.BT: true,
	x86asm.CALL: true, x86asm.JMP: true, x86asm.NOP: true,
}

// effectAMD64 says what an x86-64 instruction does to control flow, the
// frame pointer (BP) and the stack pointer (SP). x86 Go code reaches
// its frame through SP, so no register is tracked.
func effectAMD64(in insn, delta int64, _ map[int]value) effect {
	x := *in.raw.(*x86asm.Inst)
	e := flowAMD64(x, in.pc+uint64(in.size))
	e.nop = x.Op == x86asm.NOP
	sp := -delta // the stack pointer, relative to the entry's
	switch x.Op {
	case x86asm.PUSH, x86asm.PUSHF, x86asm.PUSHFQ:
		e.spWrite, e.spKnown, e.spDelta = true, true, 8
		if x.Args[0] == x86asm.RBP {
			e.fp, e.addr, e.addrKnown = fpStore, sp-8, true
		}
		return e
	case x86asm.POP, x86asm.POPF, x86asm.POPFQ:
		e.spWrite, e.spKnown, e.spDelta = true, true, -8
		if x.Args[0] == x86asm.RBP {
			e.fp, e.addr, e.addrKnown = fpLoad, sp, true
		} else if isBP(x.Args[0]) {
			e.fp = fpWrite
		} else if isSP(x.Args[0]) {
			e.spKnown = false
		}
		return e
	case x86asm.MOV:
		if m, ok := x.Args[0].(x86asm.Mem); ok && x.Args[1] == x86asm.RBP {
			e.fp = fpStore
			e.addr, e.addrKnown = spAddrAMD64(m, sp)
			return e
		}
		if m, ok := x.Args[1].(x86asm.Mem); ok && x.Args[0] == x86asm.RBP {
			e.fp = fpLoad
			e.addr, e.addrKnown = spAddrAMD64(m, sp)
			return e
		}
	case x86asm.LEAVE, x86asm.ENTER:
		e.fp, e.spWrite = fpWrite, true
		return e
	case x86asm.XCHG, x86asm.XADD:
		if isBP(x.Args[1]) {
			e.fp = fpWrite
		}
		if isSP(x.Args[1]) {
			e.spWrite = true
		}
	}
	if readsArg0AMD64[x.Op] || jccAMD64[x.Op] {
		return e
	}
	if isBP(x.Args[0]) {
		e.fp = fpWrite
	}
	if isSP(x.Args[0]) {
		e.spWrite = true
		e.spDelta, e.spKnown = spAdjustAMD64(x)
	}
	return e
}

// flowAMD64 is where control goes after x; next is the address after it.
func flowAMD64(x x86asm.Inst, next uint64) effect {
	rel, direct := x.Args[0].(x86asm.Rel)
	target := next + uint64(int64(rel))
	switch {
	case x.Op == x86asm.RET || x.Op == x86asm.LRET:
		return effect{flow: flowReturn}
	case x.Op == x86asm.CALL:
		return effect{flow: flowCall}
	case x.Op == x86asm.JMP && direct:
		return effect{flow: flowJump, target: target}
	case x.Op == x86asm.JMP:
		return effect{flow: flowIndirect}
	case jccAMD64[x.Op]:
		return effect{flow: flowBranch, target: target}
	case x.Op == x86asm.INT || x.Op == x86asm.UD0 || x.Op == x86asm.UD1 ||
		x.Op == x86asm.UD2 || x.Op == x86asm.HLT:
		return effect{flow: flowStop}
	}
	return effect{flow: flowNext}
}

// spAddrAMD64 is the address m names relative to the entry's stack
// pointer, when it is SP plus a displacement; sp is SP's own.
func spAddrAMD64(m x86asm.Mem, sp int64) (int64, bool) {
	if m.Base != x86asm.RSP || m.Index != 0 || m.Segment != 0 {
		return 0, false
	}
	return sp + m.Disp, true
}

// spAdjustAMD64 is how many bytes x moves SP down when it is a constant:
// ADD or SUB of an immediate, or LEA of a displacement from SP.
func spAdjustAMD64(x x86asm.Inst) (int64, bool) {
	if x.DataSize != 64 {
		return 0, false
	}
	switch x.Op {
	case x86asm.ADD, x86asm.SUB:
		imm, ok := x.Args[1].(x86asm.Imm)
		if !ok {
			return 0, false
		}
		if x.Op == x86asm.ADD {
			return -int64(imm), true
		}
		return int64(imm), true
	case x86asm.LEA:
		m, ok := x.Args[1].(x86asm.Mem)
		if !ok || m.Base != x86asm.RSP || m.Index != 0 {
			return 0, false
		}
		return -m.Disp, true
	}
	return 0, false
}

func isBP(a x86asm.Arg) bool {
	r, ok := a.(x86asm.Reg)
	return ok && (r == x86asm.RBP || r == x86asm.EBP || r == x86asm.BP || r == x86asm.BPB)
}

func isSP(a x86asm.Arg) bool {
	r, ok := a.(x86asm.Reg)
	return ok && (r == x86asm.RSP || r == x86asm.ESP || r == x86asm.SP || r == x86asm.SPB)
}
