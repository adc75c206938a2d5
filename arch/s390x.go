package arch

// s390x DWARF register numbers. 0-15 are the general registers; 16-31 the
// floating-point registers, in the ABI's order (f0, f2, f4, f6, f1, f3,
// f5, f7, f8, f10, f12, f14, f9, f11, f13, f15), which leaf functions use
// to keep the return address, the frame pointer or the stack pointer
// instead of saving them on the stack.
const (
	s390xR11 = 11 // frame pointer
	s390xR14 = 14 // return address
	s390xR15 = 15 // stack pointer
	s390xF0  = 16
	s390xF15 = 31
)

// s390xEntry is the CFA offset from SP at a function's first instruction:
// the ELF ABI defines the CFA as the SP at the call site plus 160, the
// size of the register save area every caller provides.
const s390xEntry = 160

// s390xFPROrder maps DWARF numbers 16-31 to floating-point register
// numbers.
var s390xFPROrder = [16]int{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}

func s390xRegName(r uint64) string {
	switch {
	case r <= 15:
		return "r" + itoa(int(r))
	case r >= s390xF0 && r <= s390xF15:
		return "f" + itoa(s390xFPROrder[r-s390xF0])
	}
	return ""
}
