package unwind

import (
	"strconv"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

// sigLayout says where the kernel saved the interrupted registers, as
// offsets from the stack pointer of the signal trampoline's frame (the
// restorer the handler returns to).
type sigLayout struct {
	pc   int64
	regs [numRegs]int64 // by DWARF register number
	have uint32         // bit n set: regs[n] is saved
}

// Linux x86-64: the handler is entered with its return address (the
// restorer, rt_sigframe.pretcode) on top of the stack, followed by the
// ucontext (struct rt_sigframe { pretcode; ucontext uc; siginfo info }).
// Returning pops pretcode, so at the restorer SP points at uc.
// struct ucontext { u64 uc_flags; ucontext *uc_link; stack_t uc_stack (24
// bytes); struct sigcontext uc_mcontext; ... } puts uc_mcontext at 40;
// sigcontext starts with r8..r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp,
// rip (8 bytes each), the same order as glibc's gregs (REG_R8 = 0 ...
// REG_RIP = 16).
var linuxAMD64 = func() sigLayout {
	const mc = 40
	var l sigLayout
	set := func(dwarf uint32, slot int64) {
		l.regs[dwarf] = mc + 8*slot
		l.have |= 1 << dwarf
	}
	for i := uint32(0); i < 8; i++ {
		set(8+i, int64(i)) // r8..r15
	}
	set(5, 8)  // rdi
	set(4, 9)  // rsi
	set(6, 10) // rbp
	set(3, 11) // rbx
	set(1, 12) // rdx
	set(0, 13) // rax
	set(2, 14) // rcx
	set(7, 15) // rsp
	l.pc = mc + 8*16
	return l
}()

// Linux AArch64: the handler returns through LR to the vDSO's
// __kernel_rt_sigreturn with SP pointing at struct rt_sigframe { siginfo
// info (128 bytes); struct ucontext uc; }. The kernel's ucontext is
// uc_flags (8), uc_link (8), uc_stack (24), uc_sigmask (8), 120 bytes of
// room for a larger sigset, then uc_mcontext aligned to 16: at 176.
// struct sigcontext { u64 fault_address; u64 regs[31]; u64 sp; u64 pc;
// u64 pstate; ... }.
var linuxARM64 = func() sigLayout {
	const sc = 128 + 176
	var l sigLayout
	for i := uint32(0); i < 31; i++ {
		l.regs[i] = sc + 8 + 8*int64(i)
		l.have |= 1 << i
	}
	sp := arch.ARM64.SP()
	l.regs[sp] = sc + 8 + 8*31
	l.have |= 1 << sp
	l.pc = sc + 8 + 8*32
	return l
}()

// Linux s390x: the handler returns through r14 to the restorer with r15
// pointing at struct rt_sigframe { u8 callee_used_stack[160]; u16
// svc_insn; siginfo info (at 168); struct ucontext_extended uc (at 296) }.
// The ucontext is uc_flags (8), uc_link (8), uc_stack (24), then
// uc_mcontext (_sigregs, at 336): psw { mask; addr }, gprs[16], acrs[16]
// (4 bytes each), fpregs { fpc; pad; fprs[16] } (fprs at 216), f0 to f15
// (whose DWARF numbers are 16-31 in another order: package arch).
var linuxS390X = func() sigLayout {
	const mc = 168 + 128 + 40
	var l sigLayout
	for i := uint32(0); i < 16; i++ {
		l.regs[i] = mc + 16 + 8*int64(i)
		l.have |= 1 << i
	}
	for d := uint32(16); d < 32; d++ {
		n, _ := strconv.Atoi(arch.S390X.RegName(uint64(d))[1:]) // "f2": fprs[2]
		l.regs[d] = mc + 216 + 8*int64(n)
		l.have |= 1 << d
	}
	l.pc = mc + 8
	return l
}()

// linuxSigLayout returns the Linux signal frame layout of an
// architecture.
func linuxSigLayout(a *arch.Arch) *sigLayout {
	switch a {
	case arch.ARM64:
		return &linuxARM64
	case arch.S390X:
		return &linuxS390X
	}
	return &linuxAMD64
}

// signalStep continues from a signal trampoline's frame into the
// interrupted one, whose every general register is then known.
func (u *Unwinder) signalStep(f *Frame) Reason {
	l := linuxSigLayout(u.Arch)
	sp, ok := f.Reg(u.Arch.SP())
	if !ok {
		return ReasonNeedsRegister
	}
	pc, ok := u.read(sp + uint64(l.pc))
	if !ok {
		return ReasonBadRead
	}
	var n Frame
	for r := uint32(0); r < numRegs; r++ {
		if l.have&(1<<r) == 0 {
			continue
		}
		v, ok := u.read(sp + uint64(l.regs[r]))
		if !ok {
			return ReasonBadRead
		}
		n.SetReg(r, v)
	}
	if pc == 0 {
		return ReasonOutermost
	}
	n.PC = pc
	n.Top = true
	*f = n
	return ReasonOK
}
