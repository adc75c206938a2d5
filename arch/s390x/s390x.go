// Package s390x holds the s390x facts cfi2sframe needs so far: the DWARF
// numbers of the registers SFrame names (s390x ELF ABI supplement; the
// SFrame specification's s390x rules).
package s390x

// DWARF register numbers of the general registers SFrame names.
const (
	R11 = 11 // frame pointer
	R14 = 14 // return address
	R15 = 15 // stack pointer
)

// Register facts used by the readers of SFrame.
const (
	SP = R15
	FP = R11
	RA = R14
)
