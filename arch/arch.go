// Package arch describes the instruction sets cfi2sframe knows, one Arch
// each: x86-64 (AMD64), AArch64 (ARM64) and s390x (S390X). An Arch holds
// the ABI facts that converting CFI to SFrame, reading SFrame and walking
// a stack need: the DWARF numbers of the stack pointer, frame pointer and
// return-address column, where the return address is at a function's
// entry, how the caller's stack pointer follows from the CFA, how SFrame
// stores a CFA offset, and the register names.
//
// Look one up by its ELF machine (ForMachine) or by the SFrame header's
// ABI id (ForSFrameABI).
package arch

import (
	"debug/elf"
	"encoding/binary"
	"strconv"
)

// Arch is the ABI of one instruction set. Its facts are read through its
// methods; the three values are AMD64, ARM64 and S390X.
type Arch struct {
	name    string
	machine elf.Machine
	// The SFrame abi_arch ids in each byte order (the same id twice for
	// an ABI that has one byte order).
	sframeLE, sframeBE uint8
	sp, fp, ra         uint32
	// callerSP is the caller's SP minus the CFA.
	callerSP int64
	// fixedRA is where the return address is relative to the CFA at
	// every instruction; 0: at entry it is in register ra.
	fixedRA int64
	// cfaScale divides a CFA offset (adjusted by callerSP) in SFrame.
	cfaScale int64
	pac      bool
	regName  func(r uint64) string // "" when the register has no name
}

// The instruction sets.
var (
	// AMD64 is x86-64 under the System V psABI: the call pushes the
	// return address just below the CFA.
	AMD64 = &Arch{
		name: "x86-64", machine: elf.EM_X86_64, sframeLE: 3, sframeBE: 3,
		sp: amd64RSP, fp: amd64RBP, ra: amd64RIP,
		fixedRA: -amd64Entry, cfaScale: 1,
		regName: amd64RegName,
	}
	// ARM64 is AArch64 under AAPCS64: the return address is in the link
	// register x30 at entry, and may be signed (pointer authentication).
	ARM64 = &Arch{
		name: "AArch64", machine: elf.EM_AARCH64, sframeLE: 2, sframeBE: 1,
		sp: arm64SP, fp: arm64X29, ra: arm64X30,
		cfaScale: 1, pac: true,
		regName: arm64RegName,
	}
	// S390X is s390x under its ELF ABI supplement: the CFA is the stack
	// pointer at the call site plus 160, the register save area every
	// caller provides; the return address is in r14 at entry.
	S390X = &Arch{
		name: "s390x", machine: elf.EM_S390, sframeLE: 4, sframeBE: 4,
		sp: s390xR15, fp: s390xR11, ra: s390xR14,
		callerSP: -s390xEntry, cfaScale: 8,
		regName: s390xRegName,
	}
)

var all = [...]*Arch{AMD64, ARM64, S390X}

// ForMachine returns the Arch of an ELF machine, or nil.
func ForMachine(m elf.Machine) *Arch {
	for _, a := range all {
		if a.machine == m {
			return a
		}
	}
	return nil
}

// ForSFrameABI returns the Arch of an SFrame header's ABI id (abi_arch, as
// sframe.ABI holds it), or nil.
func ForSFrameABI[ID ~uint8](id ID) *Arch {
	if int(id) < len(bySFrameABI) {
		return bySFrameABI[id]
	}
	return nil
}

// bySFrameABI indexes the Archs by SFrame ABI id, for the readers'
// lookups.
var bySFrameABI = func() (t [5]*Arch) {
	for _, a := range all {
		t[a.sframeLE], t[a.sframeBE] = a, a
	}
	return t
}()

// String returns the instruction set's name: "x86-64", "AArch64" or
// "s390x".
func (a *Arch) String() string { return a.name }

// SFrameABI returns the SFrame abi_arch id of the ABI in a byte order:
// AArch64 has one per byte order, x86-64 (little-endian) and s390x
// (big-endian) have one for both.
func (a *Arch) SFrameABI(order binary.ByteOrder) uint8 {
	if order == binary.BigEndian {
		return a.sframeBE
	}
	return a.sframeLE
}

// SP returns the DWARF number of the stack pointer.
func (a *Arch) SP() uint32 { return a.sp }

// FP returns the DWARF number of the frame pointer (rbp, x29, r11).
func (a *Arch) FP() uint32 { return a.fp }

// RA returns the DWARF number of the return-address column (rip, x30,
// r14).
func (a *Arch) RA() uint32 { return a.ra }

// CallerSPOffset returns the caller's stack pointer relative to the CFA:
// 0, but -160 on s390x (SFRAME_S390X_SP_VAL_OFFSET).
func (a *Arch) CallerSPOffset() int64 { return a.callerSP }

// FixedRAOffset returns where the return address is relative to the CFA
// at every instruction of a function: -8 on x86-64, where the call pushed
// it. It is 0 on the others, where the return address is in the RA
// register at entry and each row says where it went.
func (a *Arch) FixedRAOffset() int64 { return a.fixedRA }

// PointerAuth reports whether return addresses may be signed (AArch64
// pointer authentication): SFrame rows then say when the return address
// is mangled, and functions which key signed it.
func (a *Arch) PointerAuth() bool { return a.pac }

// EncodeCFAOffset returns the SFrame form of a CFA offset and whether the
// offset has one. It is the offset itself, but on s390x the offset plus
// the caller's SP offset, divided by 8 (SFRAME_S390X_CFA_OFFSET_ADJUSTMENT
// and _ALIGNMENT_FACTOR: the usual 160 is stored as 0), which needs an
// 8-byte aligned offset.
func (a *Arch) EncodeCFAOffset(off int64) (int64, bool) {
	adj := off + a.callerSP
	if adj%a.cfaScale != 0 {
		return 0, false
	}
	return adj / a.cfaScale, true
}

// DecodeCFAOffset returns the CFA offset an SFrame data word w stores
// (EncodeCFAOffset's inverse, in 32-bit arithmetic as the readers do it).
func (a *Arch) DecodeCFAOffset(w int32) int32 {
	return w*int32(a.cfaScale) - int32(a.callerSP)
}

// RegName returns the conventional name of a DWARF register number
// ("rbp", "x19", "lr", "f2"), or "r" and the number when it has none.
func (a *Arch) RegName(r uint64) string {
	if n := a.regName(r); n != "" {
		return n
	}
	return "r" + strconv.FormatUint(r, 10)
}

func itoa(n int) string { return strconv.Itoa(n) }
