package arch

// x86-64 DWARF register numbers (System V AMD64 psABI, figure 3.36).
const (
	amd64RBP   = 6  // frame pointer
	amd64RSP   = 7  // stack pointer
	amd64RIP   = 16 // return address column
	amd64NRegs = 17
)

// amd64Entry is the CFA offset from RSP at a function's first
// instruction: the call pushed the return address.
const amd64Entry = 8

func amd64RegName(r uint64) string {
	if r < uint64(len(amd64RegNames)) {
		return amd64RegNames[r]
	}
	return ""
}

var amd64RegNames = [amd64NRegs]string{
	"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip",
}
