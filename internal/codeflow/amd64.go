package codeflow

import (
	"fmt"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// DWARF numbers of the x86-64 registers the analysis names.
const (
	amdRAX = 0
	amdRDX = 1
	amdRCX = 2
	amdRBX = 3
	amdRSI = 4
	amdRDI = 5
	amdRBP = 6
	amdRSP = 7
	amdR8  = 8
	amdR9  = 9
	amdR10 = 10
	amdR11 = 11
)

// encToDwarf maps the x86 register encoding (rax rcx rdx rbx rsp rbp rsi
// rdi r8-r15) to DWARF numbers.
var encToDwarf = [16]int{0, 2, 1, 3, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15}

// callerSaved are the registers a call may change (SysV): frame
// addresses held there are unknown after it. The callee keeps rbx, rbp,
// rsp, r12-r15.
var callerSaved = []int{amdRAX, amdRDX, amdRCX, amdRSI, amdRDI, amdR8, amdR9, amdR10, amdR11}

type amd64 struct{}

func newAMD64() arch { return amd64{} }

// gpr gives a general register's DWARF number and width in bits; ok is
// false for every other register (vector, segment, rip).
func gpr(r x86asm.Reg) (num, width int, ok bool) {
	switch {
	case r >= x86asm.AL && r <= x86asm.R15B:
		// x86asm lists AL CL DL BL, AH CH DH BH (the high bytes of a-d),
		// SPB BPB SIB DIB, R8B-R15B: 20 names for 16 registers.
		i := int(r - x86asm.AL)
		switch {
		case i >= 4 && i < 8:
			i -= 4
		case i >= 8:
			i -= 4
		}
		return encToDwarf[i], 8, true
	case r >= x86asm.AX && r <= x86asm.R15W:
		return encToDwarf[r-x86asm.AX], 16, true
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return encToDwarf[r-x86asm.EAX], 32, true
	case r >= x86asm.RAX && r <= x86asm.R15:
		return encToDwarf[r-x86asm.RAX], 64, true
	}
	return 0, 0, false
}

// reg64 gives the DWARF number of a 64-bit general register argument.
func reg64(a x86asm.Arg) (int, bool) {
	r, ok := a.(x86asm.Reg)
	if !ok {
		return 0, false
	}
	n, w, ok := gpr(r)
	return n, ok && w == 64
}

func (amd64) entry() State {
	var s State
	s.Regs[amdRSP] = Val{Off: -8, Known: true}
	s.FP = Saved{Where: InReg}
	s.RA = Saved{Where: OnStack, Off: -8}
	return s
}

func (amd64) tail(s *State) bool {
	return s.Regs[amdRSP] == (Val{Off: -8, Known: true}) && s.FP.Where == InReg &&
		s.RA == (Saved{Where: OnStack, Off: -8})
}

// rule gives the CFA from RBP when RBP holds a known frame address and
// the caller's RBP is saved (a frame-pointer frame, as GCC's CFI gives it
// after mov %rsp,%rbp, and the only base left after and $-N,%rsp or an
// alloca), else from RSP.
func (amd64) rule(s *State) (Row, error) {
	if s.FP.Where == Lost {
		return Row{}, &failure{ReasonFPLost, "the caller's rbp is overwritten and not saved"}
	}
	if s.RA != (Saved{Where: OnStack, Off: -8}) {
		return Row{}, &failure{ReasonRALost, "the return address is not at CFA-8"}
	}
	r := Row{FP: s.FP, RA: s.RA, SP: s.Regs[amdRSP], FPVal: s.Regs[amdRBP]}
	if !setBase(&r, s) {
		return Row{}, &failure{ReasonCFALost, "neither rsp nor a frame rbp has a known distance from the CFA"}
	}
	return r, nil
}

// isEndbr says b starts with endbr64 or endbr32, which x86asm does not know.
func isEndbr(b []byte) bool {
	return len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb)
}

func (a amd64) step(w *walk, b []byte, pc uint64, s *State) (next, error) {
	if isEndbr(b) {
		return next{len: 4}, nil
	}
	if len(b) > 0 && (b[0] == 0xc4 || b[0] == 0xc5 || b[0] == 0x62) {
		return vecStep(b, s)
	}
	in, err := isa.AMD64(b)
	if err != nil {
		return next{}, &failure{ReasonUndecodable, fmt.Sprintf("bytes % x", b[:min(len(b), 8)])}
	}
	n := isa.LenAMD64(in, b)
	nx := next{len: n}
	end := pc + uint64(n)
	switch in.Op {
	case x86asm.UD0, x86asm.UD1, x86asm.UD2, x86asm.HLT:
		nx.flow = flowStop
		return nx, nil
	case x86asm.INT:
		if in.Args[0] == x86asm.Imm(3) { // int3 (cc); int $0x80 goes on
			nx.flow = flowStop
			return nx, nil
		}
	case x86asm.RET:
		nx.flow = flowReturn
		return nx, nil
	case x86asm.JMP:
		if rel, ok := in.Args[0].(x86asm.Rel); ok {
			nx.flow, nx.target = flowJump, end+uint64(int64(rel))
			return nx, nil
		}
		if t := a.table(w, pc, in); t != nil {
			nx.flow, nx.targets = flowTable, t
			return nx, nil
		}
		nx.flow = flowIndirect
		return nx, nil
	case x86asm.CALL:
		nx.flow = flowCall
		if rel, ok := in.Args[0].(x86asm.Rel); ok {
			nx.target = end + uint64(int64(rel))
		}
		for _, r := range callerSaved {
			clobber(s, r)
		}
		return nx, nil
	}
	if isBranch(in.Op) {
		rel, ok := in.Args[0].(x86asm.Rel)
		if !ok {
			return nx, &failure{ReasonUndecodable, "a branch without a relative target: " + in.String()}
		}
		if in.Op == x86asm.LOOP || in.Op == x86asm.LOOPE || in.Op == x86asm.LOOPNE {
			clobber(s, amdRCX)
		}
		nx.flow, nx.target = flowBranch, end+uint64(int64(rel))
		return nx, nil
	}
	if err := effect(in, s); err != nil {
		return nx, err
	}
	return nx, nil
}

func isBranch(op x86asm.Op) bool {
	switch op {
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JG, x86asm.JGE, x86asm.JL,
		x86asm.JLE, x86asm.JNE, x86asm.JNO, x86asm.JNP, x86asm.JNS, x86asm.JO, x86asm.JP, x86asm.JS,
		x86asm.JCXZ, x86asm.JECXZ, x86asm.JRCXZ, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return true
	}
	return false
}

// vecStep is step for a VEX or EVEX instruction (c4, c5, 62 are no
// other instruction in 64-bit mode), decoded by isa.DecodeVec, which
// knows every one x86asm knows and the BMI, FMA4 and AVX-512 forms it
// does not, with the general registers they write, named or not
// (vpcmpestri's rcx, mulx's two). One it refuses ends the function:
// x86asm's operands would not show such unnamed writes. None of them
// branches. A store through a frame address is held to the saved slots
// (16 bytes at least; an EVEX load's compressed displacement is not
// exact, but loads write no memory).
func vecStep(b []byte, s *State) (next, error) {
	v, err := isa.DecodeVec(b)
	if err != nil {
		return next{}, &failure{ReasonUndecodable, fmt.Sprintf("bytes % x: %v", b[:min(len(b), 8)], err)}
	}
	for _, g := range []int{v.GPR, v.GPR2} {
		if g >= 0 && g < 16 {
			clobber(s, encToDwarf[g])
		}
	}
	if v.Store && v.MemBase >= 0 && v.MemBase < 16 && v.DispExact {
		if base := s.Regs[encToDwarf[v.MemBase]]; base.Known {
			if err := store(s, base.Off+v.MemDisp, 16); err != nil {
				return next{}, err
			}
		}
	}
	return next{len: v.Len}, nil
}

// clobber makes register r unknown. Overwriting rbp while it still holds
// the caller's frame pointer loses that (no row can be given after).
func clobber(s *State, r int) { set(s, r, Val{}) }

func set(s *State, r int, v Val) {
	if r == amdRBP && s.FP.Where == InReg {
		s.FP = Saved{Where: Lost}
	}
	s.Regs[r] = v
}

// memAddr is a memory operand's address as a distance from the CFA, when
// its base holds a known frame address and it has no index.
func memAddr(m x86asm.Mem, s *State) (int64, bool) {
	if m.Index != 0 || m.Base == 0 || (m.Segment != 0 && m.Segment != x86asm.SS && m.Segment != x86asm.DS) {
		return 0, false
	}
	b, ok := reg64(m.Base)
	if !ok || !s.Regs[b].Known {
		return 0, false
	}
	return s.Regs[b].Off + m.Disp, true
}

// store fails a write of size bytes at CFA+off that covers the return
// address or the caller's saved frame pointer: the rows after it would
// name a slot that no longer holds them.
func store(s *State, off int64, size int) error {
	if size <= 0 {
		size = 8
	}
	over := func(slot int64) bool { return off < slot+8 && slot < off+int64(size) }
	if over(-8) {
		return &failure{ReasonRALost, fmt.Sprintf("a store at CFA%+d covers the return address", off)}
	}
	if s.FP.Where == OnStack && over(s.FP.Off) {
		return &failure{ReasonFPLost, fmt.Sprintf("a store at CFA%+d covers the saved rbp", off)}
	}
	return nil
}

// readsFirst are the operations whose first operand is only read.
var readsFirst = map[x86asm.Op]bool{
	x86asm.CMP: true, x86asm.TEST: true, x86asm.BT: true, x86asm.NOP: true, x86asm.PUSH: true,
	x86asm.PREFETCHNTA: true, x86asm.PREFETCHT0: true, x86asm.PREFETCHT1: true, x86asm.PREFETCHT2: true,
	x86asm.PREFETCHW: true, x86asm.CLFLUSH: true, x86asm.UCOMISS: true, x86asm.UCOMISD: true,
	x86asm.COMISS: true, x86asm.COMISD: true, x86asm.PTEST: true, x86asm.OUT: true,
}

// implicit lists the general registers operations write without naming
// them as their first operand.
var implicit = map[x86asm.Op][]int{
	x86asm.CPUID: {amdRAX, amdRBX, amdRCX, amdRDX}, x86asm.RDTSC: {amdRAX, amdRDX},
	x86asm.RDTSCP: {amdRAX, amdRDX, amdRCX}, x86asm.RDPMC: {amdRAX, amdRDX}, x86asm.XGETBV: {amdRAX, amdRDX},
	x86asm.RDMSR: {amdRAX, amdRDX}, x86asm.SYSCALL: {amdRAX, amdRCX, amdR11},
	x86asm.MUL: {amdRAX, amdRDX}, x86asm.IMUL: {amdRAX, amdRDX}, x86asm.DIV: {amdRAX, amdRDX}, x86asm.IDIV: {amdRAX, amdRDX},
	x86asm.CWD: {amdRDX}, x86asm.CDQ: {amdRDX}, x86asm.CQO: {amdRDX},
	x86asm.CBW: {amdRAX}, x86asm.CWDE: {amdRAX}, x86asm.CDQE: {amdRAX}, x86asm.LAHF: {amdRAX}, x86asm.XLATB: {amdRAX},
	x86asm.CMPXCHG: {amdRAX}, x86asm.CMPXCHG8B: {amdRAX, amdRDX}, x86asm.CMPXCHG16B: {amdRAX, amdRDX},
	x86asm.MOVSB: {amdRSI, amdRDI, amdRCX}, x86asm.MOVSW: {amdRSI, amdRDI, amdRCX}, x86asm.MOVSD: {amdRSI, amdRDI, amdRCX},
	x86asm.MOVSQ: {amdRSI, amdRDI, amdRCX}, x86asm.STOSB: {amdRDI, amdRCX}, x86asm.STOSW: {amdRDI, amdRCX},
	x86asm.STOSD: {amdRDI, amdRCX}, x86asm.STOSQ: {amdRDI, amdRCX}, x86asm.LODSB: {amdRAX, amdRSI, amdRCX},
	x86asm.LODSW: {amdRAX, amdRSI, amdRCX}, x86asm.LODSD: {amdRAX, amdRSI, amdRCX}, x86asm.LODSQ: {amdRAX, amdRSI, amdRCX},
	x86asm.SCASB: {amdRDI, amdRCX}, x86asm.SCASW: {amdRDI, amdRCX}, x86asm.SCASD: {amdRDI, amdRCX}, x86asm.SCASQ: {amdRDI, amdRCX},
	x86asm.CMPSB: {amdRSI, amdRDI, amdRCX}, x86asm.CMPSW: {amdRSI, amdRDI, amdRCX}, x86asm.CMPSD: {amdRSI, amdRDI, amdRCX},
	x86asm.CMPSQ: {amdRSI, amdRDI, amdRCX}, x86asm.INSB: {amdRDI, amdRCX}, x86asm.OUTSB: {amdRSI, amdRCX},
	x86asm.IN: {amdRAX}, x86asm.INT: {amdRAX},
}

// pushSize is the bytes a push or pop of in moves the stack pointer: 2
// with an operand-size prefix or a 16-bit register, else 8.
func pushSize(in x86asm.Inst) int64 {
	if r, ok := in.Args[0].(x86asm.Reg); ok {
		if _, w, ok := gpr(r); ok && w == 16 {
			return 2
		}
		if ok {
			return 8
		}
	}
	if in.DataSize == 16 {
		return 2
	}
	return 8
}

// effect applies the effect of an instruction that does not change the
// flow of control.
func effect(in x86asm.Inst, s *State) error {
	sp := &s.Regs[amdRSP]
	switch in.Op {
	case x86asm.PUSH, x86asm.PUSHF, x86asm.PUSHFQ, x86asm.PUSHFD:
		return push(in, s)
	case x86asm.POP, x86asm.POPF, x86asm.POPFQ, x86asm.POPFD:
		return pop(in, s)
	case x86asm.LEAVE:
		*sp = s.Regs[amdRBP]
		return popRBP(s, 8)
	case x86asm.ENTER:
		size, _ := in.Args[0].(x86asm.Imm)
		level, _ := in.Args[1].(x86asm.Imm)
		if err := pushRBP(s, 8); err != nil {
			return err
		}
		set(s, amdRBP, *sp)
		if level != 0 || !sp.Known {
			*sp = Val{} // a nesting level pushes frame pointers too
		} else {
			sp.Off -= int64(size)
		}
		return nil
	}
	if m, ok := in.Args[0].(x86asm.Mem); ok && !readsFirst[in.Op] {
		if off, ok := memAddr(m, s); ok {
			if err := store(s, off, in.MemBytes); err != nil {
				return err
			}
			saveRBP(in, off, s)
		}
	}
	for _, r := range implicit[in.Op] {
		clobber(s, r)
	}
	dst, width, isReg := 0, 0, false
	if r, ok := in.Args[0].(x86asm.Reg); ok {
		dst, width, isReg = gpr(r)
	}
	if !isReg || readsFirst[in.Op] {
		return nil
	}
	if width != 64 {
		clobber(s, dst)
		return nil
	}
	if restoreRBP(in, dst, s) {
		return nil
	}
	set(s, dst, value(in, dst, s))
	return nil
}

// restoreRBP takes a mov from the caller's rbp's slot into rbp as its
// restore: the caller's rbp is back in its register. (Made in value, the
// set after it took the restored rbp as overwritten: a function that
// saves and restores rbp with movs was left out as fp-lost.)
func restoreRBP(in x86asm.Inst, dst int, s *State) bool {
	m, ok := in.Args[1].(x86asm.Mem)
	if in.Op != x86asm.MOV || !ok || dst != amdRBP || s.FP.Where != OnStack {
		return false
	}
	if off, ok := memAddr(m, s); !ok || off != s.FP.Off {
		return false
	}
	s.FP = Saved{Where: InReg}
	s.Regs[amdRBP] = Val{}
	return true
}

// saveRBP takes a mov of the caller's rbp to the frame slot CFA+off as
// its save, as a push is: hand-written prologues (OpenBLAS's kernels)
// save the callee-saved registers with movs below a sub of rsp, then use
// rbp as a general register. Without it, a loop head reached before and
// after rbp is overwritten had two frames (the caller's rbp in its
// register, then lost) and the function was left out as states-differ.
// The slot is held to it as a pushed one is (store), and a load of it
// back into rbp restores it (value).
func saveRBP(in x86asm.Inst, off int64, s *State) {
	if in.Op == x86asm.MOV && in.Args[1] == x86asm.RBP && s.FP.Where == InReg {
		s.FP = Saved{Where: OnStack, Off: off}
	}
}

// value is what a 64-bit general register holds after in writes it:
// copies and constant adjustments of a frame address stay known,
// anything else is unknown (the caller's rbp reloaded from its slot:
// restoreRBP). The second operand of an exchange is made unknown too.
func value(in x86asm.Inst, dst int, s *State) Val {
	cur := s.Regs[dst]
	switch in.Op {
	case x86asm.MOV:
		if src, ok := reg64(in.Args[1]); ok {
			return s.Regs[src]
		}
	case x86asm.LEA:
		if m, ok := in.Args[1].(x86asm.Mem); ok && m.Base != x86asm.RIP && m.Segment == 0 {
			if off, ok := memAddr(m, s); ok {
				return Val{Off: off, Known: true}
			}
		}
	case x86asm.ADD, x86asm.SUB:
		if imm, ok := in.Args[1].(x86asm.Imm); ok && cur.Known {
			if in.Op == x86asm.SUB {
				imm = -imm
			}
			return Val{Off: cur.Off + int64(imm), Known: true}
		}
	case x86asm.XCHG, x86asm.XADD, x86asm.CMPXCHG:
		if r, ok := in.Args[1].(x86asm.Reg); ok {
			if n, _, ok := gpr(r); ok {
				clobber(s, n)
			}
		}
	}
	return Val{}
}

// push moves the stack pointer down. Pushing rbp while it holds the
// caller's frame pointer saves that at the new top of the stack.
func push(in x86asm.Inst, s *State) error {
	size := pushSize(in)
	if r, ok := in.Args[0].(x86asm.Reg); ok && r == x86asm.RBP {
		return pushRBP(s, size)
	}
	sp := &s.Regs[amdRSP]
	if sp.Known {
		sp.Off -= size
		return store(s, sp.Off, int(size))
	}
	return nil
}

func pushRBP(s *State, size int64) error {
	sp := &s.Regs[amdRSP]
	if !sp.Known {
		return nil
	}
	sp.Off -= size
	if err := store(s, sp.Off, int(size)); err != nil {
		return err
	}
	if s.FP.Where == InReg {
		s.FP = Saved{Where: OnStack, Off: sp.Off}
	}
	return nil
}

// pop moves the stack pointer up and writes its destination.
func pop(in x86asm.Inst, s *State) error {
	size := pushSize(in)
	sp := &s.Regs[amdRSP]
	switch a := in.Args[0].(type) {
	case x86asm.Reg:
		if a == x86asm.RBP {
			return popRBP(s, size)
		}
		if n, _, ok := gpr(a); ok {
			if n == amdRSP {
				*sp = Val{}
				return nil
			}
			clobber(s, n)
		}
	case x86asm.Mem:
		if sp.Known {
			sp.Off += size
		}
		if off, ok := memAddr(a, s); ok {
			return store(s, off, in.MemBytes)
		}
		return nil
	}
	if sp.Known {
		sp.Off += size
	}
	return nil
}

// popRBP pops into rbp: from the slot the caller's rbp was saved in, it
// is back in its register; from elsewhere rbp is unknown.
func popRBP(s *State, size int64) error {
	sp := &s.Regs[amdRSP]
	if s.FP.Where == OnStack && sp.Known && sp.Off == s.FP.Off && size == 8 {
		s.FP = Saved{Where: InReg}
		s.Regs[amdRBP] = Val{}
	} else {
		clobber(s, amdRBP)
	}
	if sp.Known {
		sp.Off += size
	}
	return nil
}
