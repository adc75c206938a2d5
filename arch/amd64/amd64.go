// Package amd64 holds the x86-64 facts cfi2sframe needs: DWARF register
// numbers, where the System V ABI keeps the return address, and the shapes
// of the PLT stubs GNU ld and LLVM lld emit, with a small simulator that
// derives each stub's stack height from its instructions.
package amd64

// DWARF register numbers (System V AMD64 psABI, figure 3.36).
const (
	RAX = 0
	RDX = 1
	RCX = 2
	RBX = 3
	RSI = 4
	RDI = 5
	RBP = 6 // frame pointer
	RSP = 7 // stack pointer
	R8  = 8
	R12 = 12
	R13 = 13
	R14 = 14
	R15 = 15
	RIP = 16 // return address column
)

// Register facts used by the translator.
const (
	SP = RSP
	FP = RBP
	RA = RIP
)

// FixedRAOffset is where the return address lives relative to the CFA at
// every instruction of a function: the call pushed it just below the CFA.
const FixedRAOffset = -8

// CalleeSaved lists the registers a callee must preserve (psABI 3.2.1).
var CalleeSaved = []int{RBX, RBP, R12, R13, R14, R15}

// RegName returns the conventional name of a DWARF register number, or ""
// when there is none.
func RegName(r int) string {
	if r >= 0 && r < len(regNames) {
		return regNames[r]
	}
	return ""
}

var regNames = [...]string{
	"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
}
