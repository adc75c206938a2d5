// Package unwind walks user-space stacks with SFrame.
//
// An Unwinder walks the stacks of one instruction set, an arch.Arch
// (arch.ForMachine of the sampled program's ELF machine), which says
// which DWARF registers are SP, FP and RA and where the return address is
// at a function's entry. A Frame holds a PC and the registers known in
// that frame (by DWARF number). Step looks the PC up in the SFrame table of the object that
// maps it (a Space of mappings, each with its load bias) and computes the
// caller's frame, reading the stack through a Memory. It does not
// allocate.
//
// What is known in which frame follows the SFrame V3 specification: the
// topmost frame may know any register (the caller fills them), a caller
// frame knows only its SP (the CFA) and FP (recovered or unchanged, FP is
// callee-saved); so a flexible FDE whose rule names any other register
// (the DRAP register, LR on AArch64) is only usable in the topmost frame,
// and Step says ReasonNeedsRegister elsewhere. A frame interrupted by a
// signal knows every general register again (they are read from the
// kernel's signal frame), so it counts as topmost.
//
// On s390x the CFA is the caller's SP plus 160 (the register save area
// every caller provides below its SP is part of the callee's CFA), so the
// caller's SP is the CFA minus 160; the return address is r14 until a
// function saves it, so an FRE that leaves it in r14 (or in a
// floating-point register, in a flexible FDE) is usable in the topmost
// frame only, as on AArch64 with LR.
//
// Non-topmost frames are looked up at PC-1: their PC is a return address,
// which may be the first instruction after the end of the calling
// function (a call to a noreturn function) or of a different row.
//
// A sampler makes a Space from the executable mappings of the process,
// each with the Table of its file (sframe.OpenFile) and its load bias, a
// Memory over the stack it read, and walks from the registers it
// sampled (Topmost); see ExampleUnwinder_Walk.
package unwind

import (
	"math/bits"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// numRegs is the number of registers a Frame tracks (DWARF 0..31).
const numRegs = 32

// Frame is one frame of a stack: its PC and the registers known in it
// (Reg, SetReg).
type Frame struct {
	PC    uint64
	regs  [numRegs]uint64 // by DWARF register number
	valid uint32          // bit n set: regs[n] is known
	// Top: PC is the next instruction to run (the topmost frame, or one
	// interrupted by a signal), not a return address; it is looked up as
	// is rather than at PC-1.
	Top bool
}

// Reg returns register n and whether it is known in this frame.
func (f *Frame) Reg(n uint32) (uint64, bool) {
	if n >= numRegs || f.valid&(1<<n) == 0 {
		return 0, false
	}
	return f.regs[n], true
}

// SetReg sets register n (DWARF number, below 32) as known.
func (f *Frame) SetReg(n uint32, v uint64) {
	f.regs[n] = v
	f.valid |= 1 << n
}

// Topmost returns the topmost frame from the registers a sampler has: PC,
// SP, FP and the link register (AArch64 LR, s390x r14; ignored on AMD64).
// More registers (for flexible FDEs that name them, such as the s390x
// floating-point registers a leaf keeps RA or FP in) can be added with
// SetReg.
func Topmost(a *arch.Arch, pc, sp, fp, lr uint64) (f Frame) {
	// Built in the result itself: a Frame is 280 bytes.
	f.PC, f.Top = pc, true
	f.SetReg(a.SP(), sp)
	f.SetReg(a.FP(), fp)
	if r, ok := lrReg(a); ok {
		f.SetReg(r, lr)
	}
	return f
}

// Reset makes f the frame Topmost(a, pc, sp, fp, lr) returns, in place:
// for a sampler that walks many stacks with one Frame, it clears only the
// registers f knew (SetReg, or a step) rather than all 32.
func (f *Frame) Reset(a *arch.Arch, pc, sp, fp, lr uint64) {
	f.forget(f.valid)
	f.valid = 0
	f.PC, f.Top = pc, true
	f.SetReg(a.SP(), sp)
	f.SetReg(a.FP(), fp)
	if r, ok := lrReg(a); ok {
		f.SetReg(r, lr)
	}
}

// forget zeroes the registers of mask in regs (valid is the caller's to
// set): a frame clears only what it knew, rather than all of regs.
func (f *Frame) forget(mask uint32) {
	for ; mask != 0; mask &= mask - 1 {
		f.regs[bits.TrailingZeros32(mask)] = 0
	}
}

// lrReg is the register the return address is in at a function's entry,
// on the architectures that keep it in one (AArch64's LR, s390x's r14)
// rather than at a fixed stack slot.
func lrReg(a *arch.Arch) (uint32, bool) {
	return a.RA(), a.FixedRAOffset() == 0
}

// Memory reads the stack of the process being walked.
type Memory interface {
	// ReadWord returns the 8-byte word at addr in the target's byte
	// order, or false when it cannot be read.
	ReadWord(addr uint64) (uint64, bool)
}

// Reason says why Step stopped (ReasonOK: it did not).
type Reason uint8

const (
	ReasonOK Reason = iota
	// ReasonOutermost: the SFrame data marks the frame outermost (RA
	// undefined, or a V3 default FDE without FREs), or the return address
	// is zero.
	ReasonOutermost
	// ReasonNoObject: no mapping of the Space holds the PC (or its
	// object has no .sframe).
	ReasonNoObject
	// ReasonNoFDE: the object has no SFrame FDE for the PC, or the PC is
	// before the function's first row.
	ReasonNoFDE
	// ReasonBadRead: a stack read failed.
	ReasonBadRead
	// ReasonNeedsRegister: the rule needs a register this frame does not
	// know (a flexible-FDE rule or an AArch64 RA still in LR outside the
	// topmost frame).
	ReasonNeedsRegister
	// ReasonBadFrame: malformed SFrame data, a rule the unwinder cannot
	// apply, or a caller SP below the frame's SP (the walk would go
	// backwards).
	ReasonBadFrame
)

var reasonNames = [...]string{"ok", "outermost", "no object", "no FDE", "bad read", "needs register", "bad frame"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Mapping is one executable mapping of an object with a .sframe section:
// PCs in [Lo, Hi) are looked up at PC-Bias in Table.
type Mapping struct {
	Lo, Hi uint64
	Bias   uint64
	Table  *sframe.Table
	// Obj is the caller's handle for the object (a name, an index), not
	// used by the unwinder.
	Obj int
}

// Space is the set of mappings of one address space, sorted by Lo and not
// overlapping.
type Space []Mapping

// Find returns the mapping holding pc, or nil.
func (s Space) Find(pc uint64) *Mapping {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m].Lo <= pc {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo > 0 && pc < s[lo-1].Hi {
		return &s[lo-1]
	}
	return nil
}

// Unwinder walks stacks of one architecture (Linux's signal frames
// included) through a Space. Arch, Space and Mem are required; Mem may be
// replaced between walks, and the Space may grow.
type Unwinder struct {
	Arch  *arch.Arch
	Space *Space
	Mem   Memory
	// PACMask, on AArch64, is the set of pointer-authentication bits to
	// clear from a return address the FRE marks mangled (what the kernel
	// reports as the insn mask of NT_ARM_PAC_MASK). Zero means the
	// top-bits rule for 48-bit user virtual addresses: clear bits 48-63,
	// which holds the PAC field (bits 48-54) and the tag byte (56-63) of a
	// user-space code address.
	PACMask uint64
}

// stripPAC removes the pointer-authentication code from an AArch64 return
// address.
func (u *Unwinder) stripPAC(ra uint64) uint64 {
	if u.PACMask != 0 {
		return ra &^ u.PACMask
	}
	return ra & (1<<48 - 1)
}

// Step replaces f by its caller's frame and returns ReasonOK, or leaves f
// unchanged and says why it cannot. On success it also returns the
// mapping used for f, for symbolization.
func (u *Unwinder) Step(f *Frame) (Reason, *Mapping) {
	return u.step(f, nil)
}

// step is Step, trying mapping m (when not nil) before searching the
// Space: a walk's next frame is most often in the object of the last.
func (u *Unwinder) step(f *Frame, m *Mapping) (Reason, *Mapping) {
	pc := f.PC
	if !f.Top {
		pc--
	}
	if m == nil || pc-m.Lo >= m.Hi-m.Lo {
		m = u.Space.Find(pc)
	}
	if m == nil || m.Table == nil {
		return ReasonNoObject, nil
	}
	// The common rows (CFA from SP or FP, RA and FP saved at fixed
	// offsets from it or unchanged) take the fast path; flexible FDEs,
	// signal frames, the outermost marker and errors the general one.
	var s sframe.StepRule
	if m.Table.LookupStep(pc-m.Bias, &s) {
		return u.fast(f, &s), m
	}
	r, err := m.Table.Lookup(pc - m.Bias)
	switch {
	case err == sframe.ErrNoFDE || err == sframe.ErrNoFRE:
		return ReasonNoFDE, m
	case err != nil:
		return ReasonBadFrame, m
	}
	if r.Signal {
		return u.signalStep(f), m
	}
	if r.RAUndefined {
		return ReasonOutermost, m
	}
	return u.apply(f, &r), m
}

func (u *Unwinder) apply(f *Frame, r *sframe.Rule) Reason {
	cfa, why := u.loc(f, r.CFA, 0, true)
	if why != ReasonOK {
		return why
	}
	var ra uint64
	switch r.RA.Kind {
	case sframe.LocFixed:
		v, ok := u.read(cfa + uint64(int64(r.RA.Offset)))
		if !ok {
			return ReasonBadRead
		}
		ra = v
	case sframe.LocUnsaved, sframe.LocDefault:
		// The ABI's default place: the fixed slot on AMD64, LR on
		// AArch64, r14 on s390x.
		if lr, ok := lrReg(u.Arch); ok {
			v, ok := f.Reg(lr)
			if !ok {
				return ReasonNeedsRegister
			}
			ra = v
		} else {
			off := int64(r.RA.Offset) // the header's fixed offset, if any
			if off == 0 {
				off = u.Arch.FixedRAOffset()
			}
			v, ok := u.read(cfa + uint64(off))
			if !ok {
				return ReasonBadRead
			}
			ra = v
		}
	default:
		ra, why = u.loc(f, r.RA, cfa, false)
		if why != ReasonOK {
			return why
		}
	}
	fp, _ := f.Reg(u.Arch.FP())
	fpValid := f.valid&(1<<u.Arch.FP()) != 0
	switch r.FP.Kind {
	case sframe.LocUnsaved, sframe.LocDefault:
	default:
		fp, why = u.loc(f, r.FP, cfa, false)
		if why != ReasonOK {
			return why
		}
		fpValid = true
	}
	return u.toCaller(f, cfa, ra, fp, fpValid, r.MangledRA)
}

// toCaller ends a step, for apply and the fast path alike: it strips a
// mangled RA, checks the caller's frame (its SP, the CFA or on s390x the
// CFA-160, not below f's; equal only for the topmost frame; a zero RA is
// the outermost frame), and makes f the caller's frame, which knows SP
// and, if recovered or unchanged (fpValid), FP.
func (u *Unwinder) toCaller(f *Frame, cfa, ra, fp uint64, fpValid, mangled bool) Reason {
	if mangled && u.Arch.PointerAuth() {
		ra = u.stripPAC(ra)
	}
	spR, fpR := u.Arch.SP(), u.Arch.FP()
	sp := f.regs[spR]
	callerSP := cfa + uint64(u.Arch.CallerSPOffset())
	if callerSP < sp || (callerSP == sp && !f.Top) || callerSP > cfa {
		return ReasonBadFrame
	}
	if ra == 0 {
		return ReasonOutermost
	}
	valid := uint32(1) << spR
	if fpValid {
		valid |= 1 << fpR
	} else {
		fp = 0
	}
	f.forget(f.valid &^ valid)
	f.PC, f.Top, f.valid = ra, false, valid
	f.regs[spR] = callerSP
	f.regs[fpR] = fp
	return ReasonOK
}

// fast is apply for a StepRule (what LookupStep gives), in apply's order:
// CFA, RA, FP, then toCaller. The return address is saved on the stack;
// on AArch64 it may instead still be in LR.
func (u *Unwinder) fast(f *Frame, s *sframe.StepRule) Reason {
	base, fpR := u.Arch.SP(), u.Arch.FP()
	if s.Flags&sframe.StepCFAFromFP != 0 {
		base = fpR
	}
	if f.valid&(1<<base) == 0 {
		return ReasonNeedsRegister
	}
	cfa := f.regs[base] + uint64(int64(s.CFAOff))
	var ra uint64
	switch {
	case s.Flags&sframe.StepRASaved != 0:
		v, ok := u.Mem.ReadWord(cfa + uint64(int64(s.RAOff)))
		if !ok {
			return ReasonBadRead
		}
		ra = v
	default:
		lr, ok := lrReg(u.Arch)
		if !ok {
			return ReasonBadFrame // LookupStep gives none such on AMD64
		}
		if f.valid&(1<<lr) == 0 {
			return ReasonNeedsRegister
		}
		ra = f.regs[lr]
	}
	fp := f.regs[fpR]
	fpValid := f.valid&(1<<fpR) != 0
	if s.Flags&sframe.StepFPSaved != 0 {
		v, ok := u.Mem.ReadWord(cfa + uint64(int64(s.FPOff)))
		if !ok {
			return ReasonBadRead
		}
		fp, fpValid = v, true
	}
	return u.toCaller(f, cfa, ra, fp, fpValid, s.Flags&sframe.StepMangledRA != 0)
}

// loc evaluates one rule. For the CFA (isCFA) a register base is required.
func (u *Unwinder) loc(f *Frame, l sframe.Loc, cfa uint64, isCFA bool) (uint64, Reason) {
	var base uint64
	switch l.Kind {
	case sframe.LocReg, sframe.LocRegDeref:
		v, ok := f.Reg(l.Reg)
		if !ok {
			return 0, ReasonNeedsRegister
		}
		base = v
	case sframe.LocCFA, sframe.LocCFAValue:
		if isCFA {
			return 0, ReasonBadFrame
		}
		base = cfa
	default:
		return 0, ReasonBadFrame
	}
	addr := base + uint64(int64(l.Offset))
	if l.Kind == sframe.LocReg || l.Kind == sframe.LocCFAValue {
		return addr, ReasonOK
	}
	v, ok := u.read(addr)
	if !ok {
		return 0, ReasonBadRead
	}
	return v, ReasonOK
}

func (u *Unwinder) read(addr uint64) (uint64, bool) {
	return u.Mem.ReadWord(addr)
}

// Walk steps from f until it stops, writing the PC of each frame (f's
// first) into pcs, and returns how many it wrote and why it stopped
// (ReasonOK when pcs filled up first). It does not allocate.
func (u *Unwinder) Walk(f Frame, pcs []uint64) (int, Reason) {
	n := 0
	var m *Mapping
	for n < len(pcs) {
		pcs[n] = f.PC
		n++
		var why Reason
		if why, m = u.step(&f, m); why != ReasonOK {
			return n, why
		}
	}
	return n, ReasonOK
}
