package unwind_test

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// mem is a stack: words from base upward.
type mem struct {
	base  uint64
	words []uint64
}

func (m *mem) ReadWord(addr uint64) (uint64, bool) {
	if addr < m.base || addr%8 != 0 || (addr-m.base)/8 >= uint64(len(m.words)) {
		return 0, false
	}
	return m.words[(addr-m.base)/8], true
}

func (m *mem) set(addr, v uint64) { m.words[(addr-m.base)/8] = v }

func newMem(base uint64, n int) *mem { return &mem{base: base, words: make([]uint64, n)} }

// stackOf is a test stack holding the given words, zero elsewhere.
func stackOf(words map[uint64]uint64) *mem {
	m := newMem(stackBase, stackWords)
	for a, v := range words {
		m.set(a, v)
	}
	return m
}

// stepOver takes one Step from frame, which must give the reason want;
// it returns the caller frame and whether the step succeeded. A failed
// step must leave the frame as it was.
func stepOver(t *testing.T, u *unwind.Unwinder, frame unwind.Frame, want unwind.Reason) (unwind.Frame, bool) {
	t.Helper()
	f := frame
	why, _ := u.Step(&f)
	if why != want {
		t.Fatalf("Step = %v, want %v", why, want)
	}
	if why != unwind.ReasonOK {
		if f != frame {
			t.Errorf("failed Step changed the frame")
		}
		return f, false
	}
	return f, true
}

func reg(r uint32, off int32) sframe.Loc { return sframe.Loc{Kind: sframe.LocReg, Reg: r, Offset: off} }
func cfaSlot(off int32) sframe.Loc       { return sframe.Loc{Kind: sframe.LocCFA, Offset: off} }

var (
	rbp, rsp = arch.AMD64.FP(), arch.AMD64.SP()
	x29, x30 = arch.ARM64.FP(), arch.ARM64.RA()
	a64sp    = arch.ARM64.SP()
)

const (
	bias       = 0x10000 // load bias of the test object
	stackBase  = 0x7f0000
	stackWords = 64
)

var fixedRA = sframe.Loc{Kind: sframe.LocFixed, Offset: -8}

func space(t *testing.T, abi sframe.ABI, version uint8, funcs []sframe.Function) *unwind.Space {
	t.Helper()
	o := sframe.Options{Version: version, ABI: abi, Order: binary.LittleEndian, PCRel: true, Sort: true}
	if abi == sframe.ABIS390XBE || abi == sframe.ABIAArch64BE {
		o.Order = binary.BigEndian
	}
	o.CFAFixedRA = int8(arch.ForSFrameABI(abi).FixedRAOffset()) // AMD64 keeps RA at its fixed slot
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &unwind.Space{{Lo: bias + 0x1000, Hi: bias + 0x9000, Bias: bias, Table: tb}}
}

// amd64Funcs: a leaf-ish function with a push rbp (0x1000), main with an
// rbp frame (0x2000), _start whose RA is undefined (0x3000), a PLT with
// 16-byte blocks (0x4000), a restorer marked signal (0x5000, FDE starting
// one byte early as glibc's does), a DRAP function (0x6000, flexible), and
// a function that ends in a call to a noreturn function (0x7000-0x7010)
// followed by one with another rule (0x7010).
func amd64Funcs() []sframe.Function {
	return []sframe.Function{
		{Start: 0x1000, Size: 0x40, Rows: []sframe.Row{
			{Start: 0, CFA: reg(rsp, 8), RA: fixedRA},
			{Start: 1, CFA: reg(rsp, 16), RA: fixedRA, FP: cfaSlot(-16)},
		}},
		{Start: 0x2000, Size: 0x40, Rows: []sframe.Row{
			{Start: 0, CFA: reg(rsp, 8), RA: fixedRA},
			{Start: 1, CFA: reg(rsp, 16), RA: fixedRA, FP: cfaSlot(-16)},
			{Start: 4, CFA: reg(rbp, 16), RA: fixedRA, FP: cfaSlot(-16)},
		}},
		{Start: 0x3000, Size: 0x40, Rows: []sframe.Row{{Start: 0, RAUndefined: true}}},
		{Start: 0x4000, Size: 0x40, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{
			{Start: 0, CFA: reg(rsp, 8), RA: fixedRA},
			{Start: 11, CFA: reg(rsp, 16), RA: fixedRA},
		}},
		{Start: 0x4fff, Size: 0x10, Signal: true},
		{Start: 0x6000, Size: 0x40, Flex: true, Rows: []sframe.Row{
			{Start: 0, CFA: reg(10, 0), RA: sframe.Loc{Kind: sframe.LocDefault, Offset: -8}},
			{Start: 8, CFA: sframe.Loc{Kind: sframe.LocRegDeref, Reg: rbp, Offset: -8}, RA: sframe.Loc{Kind: sframe.LocDefault, Offset: -8},
				FP: sframe.Loc{Kind: sframe.LocRegDeref, Reg: rbp, Offset: 0}},
		}},
		{Start: 0x7000, Size: 0x10, Rows: []sframe.Row{{Start: 0, CFA: reg(rsp, 32), RA: fixedRA}}},
		{Start: 0x7010, Size: 0x10, Rows: []sframe.Row{{Start: 0, CFA: reg(rsp, 8), RA: fixedRA}}},
	}
}

func TestStepAMD64(t *testing.T) {
	sp := space(t, sframe.ABIAMD64LE, 3, amd64Funcs())
	const S uint64 = stackBase + 0x40
	tests := []struct {
		name    string
		frame   unwind.Frame
		stack   map[uint64]uint64
		why     unwind.Reason
		pc, sp  uint64
		fp      uint64
		fpValid bool
		top     bool
	}{
		{name: "push rbp done, topmost", frame: unwind.Topmost(arch.AMD64, bias+0x1005, S, 0x1234, 0),
			stack: map[uint64]uint64{S: 0xaaaa, S + 8: bias + 0x2010},
			pc:    bias + 0x2010, sp: S + 16, fp: 0xaaaa, fpValid: true},
		{name: "at entry, FP unchanged", frame: unwind.Topmost(arch.AMD64, bias+0x1000, S, 0x1234, 0),
			stack: map[uint64]uint64{S: bias + 0x2010},
			pc:    bias + 0x2010, sp: S + 8, fp: 0x1234, fpValid: true},
		{name: "rbp-based, caller frame", frame: frame(bias+0x2010, S, S+0x10),
			stack: map[uint64]uint64{S + 0x10: 0xbbbb, S + 0x18: bias + 0x3005},
			pc:    bias + 0x3005, sp: S + 0x20, fp: 0xbbbb, fpValid: true},
		{name: "RA undefined", frame: frame(bias+0x3005, S, 0), why: unwind.ReasonOutermost},
		{name: "PCMASK second block after push", frame: unwind.Topmost(arch.AMD64, bias+0x401b, S, 7, 0),
			stack: map[uint64]uint64{S + 8: bias + 0x2010}, pc: bias + 0x2010, sp: S + 16, fp: 7, fpValid: true},
		{name: "PCMASK third block at entry", frame: unwind.Topmost(arch.AMD64, bias+0x4021, S, 7, 0),
			stack: map[uint64]uint64{S: bias + 0x2010}, pc: bias + 0x2010, sp: S + 8, fp: 7, fpValid: true},
		{name: "no FDE", frame: frame(bias+0x3100, S, 0), why: unwind.ReasonNoFDE},
		{name: "no object", frame: frame(0x500, S, 0), why: unwind.ReasonNoObject},
		{name: "bad read", frame: unwind.Topmost(arch.AMD64, bias+0x1005, stackBase+0x1000, 0, 0), why: unwind.ReasonBadRead},
		{name: "zero RA", frame: unwind.Topmost(arch.AMD64, bias+0x1000, S, 0, 0), why: unwind.ReasonOutermost},
		{name: "DRAP prologue, topmost with r10", frame: withReg(unwind.Topmost(arch.AMD64, bias+0x6004, S, 3, 0), 10, S+0x20),
			stack: map[uint64]uint64{S + 0x18: bias + 0x2010}, pc: bias + 0x2010, sp: S + 0x20, fp: 3, fpValid: true},
		{name: "DRAP prologue, r10 unknown", frame: unwind.Topmost(arch.AMD64, bias+0x6004, S, 3, 0), why: unwind.ReasonNeedsRegister},
		{name: "DRAP body, caller frame: rbp is known", frame: frame(bias+0x6010, S, S+0x10),
			stack: map[uint64]uint64{S + 0x08: S + 0x30, S + 0x10: 0xcccc, S + 0x28: bias + 0x2010},
			pc:    bias + 0x2010, sp: S + 0x30, fp: 0xcccc, fpValid: true},
		{name: "return address after a noreturn call looks up RA-1", frame: frame(bias+0x7010, S, 5),
			stack: map[uint64]uint64{S + 0x18: bias + 0x2010}, pc: bias + 0x2010, sp: S + 0x20, fp: 5, fpValid: true},
		{name: "the same PC as topmost is the next function", frame: unwind.Topmost(arch.AMD64, bias+0x7010, S, 5, 0),
			stack: map[uint64]uint64{S: bias + 0x2010}, pc: bias + 0x2010, sp: S + 8, fp: 5, fpValid: true},
		{name: "caller SP would go backwards", frame: frame(bias+0x2010, S, S-0x40), why: unwind.ReasonBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := stepOver(t, &unwind.Unwinder{Arch: arch.AMD64, Space: sp, Mem: stackOf(tt.stack)}, tt.frame, tt.why)
			if !ok {
				return
			}
			fp, ok := f.Reg(rbp)
			if f.PC != tt.pc || regOf(&f, arch.AMD64.SP()) != tt.sp || ok != tt.fpValid || fp != tt.fp || f.Top != tt.top {
				t.Errorf("caller = pc %#x sp %#x fp %#x (%v) top %v, want %#x %#x %#x (%v) %v", f.PC, regOf(&f, arch.AMD64.SP()), fp, ok, f.Top, tt.pc, tt.sp, tt.fp, tt.fpValid, tt.top)
			}
			if _, ok := f.Reg(10); ok {
				t.Errorf("caller frame claims to know r10")
			}
		})
	}
}

// frame is a non-topmost frame: PC is a return address; SP and FP known.
func frame(pc, sp, fp uint64) unwind.Frame {
	f := unwind.Frame{PC: pc}
	f.SetReg(rsp, sp)
	f.SetReg(rbp, fp)
	return f
}

func withReg(f unwind.Frame, r uint32, v uint64) unwind.Frame {
	f.SetReg(r, v)
	return f
}

// TestSignalAMD64 walks handler -> restorer -> interrupted function ->
// main -> _start with the kernel's rt_sigframe on the stack.
func TestSignalAMD64(t *testing.T) {
	sp := space(t, sframe.ABIAMD64LE, 3, amd64Funcs())
	m := newMem(stackBase, 512)
	const S uint64 = stackBase + 0x40 // handler's SP at the sample (after push rbp)
	m.set(S, 0x1111)                  // handler's saved rbp
	m.set(S+8, bias+0x5000)           // pretcode: the restorer (FDE from 0x4fff)
	uc := S + 16
	const interruptedSP uint64 = stackBase + 0x600
	m.set(uc+40+8*10, interruptedSP+0x10) // rbp
	m.set(uc+40+8*15, interruptedSP)      // rsp
	m.set(uc+40+8*16, bias+0x2004)        // rip: main, rbp-based row
	m.set(uc+40+8*14, 0x4242)             // rcx (sigcontext slot 14)
	m.set(interruptedSP+0x10, 0)          // main's saved rbp
	m.set(interruptedSP+0x18, bias+0x3005)
	u := &unwind.Unwinder{Arch: arch.AMD64, Space: sp, Mem: m}
	var pcs [8]uint64
	n, why := u.Walk(unwind.Topmost(arch.AMD64, bias+0x1005, S, 0x9999, 0), pcs[:])
	sameAsSteps(t, u, unwind.Topmost(arch.AMD64, bias+0x1005, S, 0x9999, 0), pcs[:n], why)
	want := []uint64{bias + 0x1005, bias + 0x5000, bias + 0x2004, bias + 0x3005}
	if why != unwind.ReasonOutermost || n != len(want) {
		t.Fatalf("Walk = %#x, %v; want %#x, outermost", pcs[:n], why, want)
	}
	for i := range want {
		if pcs[i] != want[i] {
			t.Errorf("frame %d: pc %#x, want %#x", i, pcs[i], want[i])
		}
	}
	// The interrupted frame knows every register and its exact PC.
	f := unwind.Topmost(arch.AMD64, bias+0x1005, S, 0x9999, 0)
	u.Step(&f)
	u.Step(&f)
	if rcx, ok := f.Reg(2); !ok || rcx != 0x4242 || !f.Top || regOf(&f, arch.AMD64.FP()) != interruptedSP+0x10 {
		t.Errorf("interrupted frame: rcx %#x %v, top %v, fp %#x", rcx, ok, f.Top, regOf(&f, arch.AMD64.FP()))
	}
}

func arm64Funcs() []sframe.Function {
	return []sframe.Function{
		// Leaf: CFA = sp, RA in LR.
		{Start: 0x1000, Size: 0x20, Rows: []sframe.Row{{Start: 0, CFA: reg(a64sp, 0)}}},
		// stp x29, x30, [sp, #-16]!; mov x29, sp; signed RA (paciasp at 0).
		{Start: 0x2000, Size: 0x40, Rows: []sframe.Row{
			{Start: 0, CFA: reg(a64sp, 0)},
			{Start: 4, CFA: reg(a64sp, 0), MangledRA: true},
			{Start: 8, CFA: reg(a64sp, 16), RA: cfaSlot(-8), FP: cfaSlot(-16), MangledRA: true},
			{Start: 12, CFA: reg(x29, 16), RA: cfaSlot(-8), FP: cfaSlot(-16), MangledRA: true},
		}},
		{Start: 0x3000, Size: 0x40, Rows: []sframe.Row{{Start: 0, RAUndefined: true}}},
		// Flexible: RA saved in x9 (topmost only).
		{Start: 0x6000, Size: 0x40, Flex: true, Rows: []sframe.Row{
			{Start: 0, CFA: reg(a64sp, 0), RA: reg(9, 0)},
		}},
		{Start: 0x4fff, Size: 0x10, Signal: true},
	}
}

func TestStepARM64(t *testing.T) {
	sp := space(t, sframe.ABIAArch64LE, 3, arm64Funcs())
	const S uint64 = stackBase + 0x40
	pac := uint64(0x002d) << 48
	tests := []struct {
		name    string
		frame   unwind.Frame
		pacMask uint64
		stack   map[uint64]uint64
		why     unwind.Reason
		pc, sp  uint64
		fp      uint64
	}{
		{name: "leaf topmost: RA in LR", frame: unwind.Topmost(arch.ARM64, bias+0x1008, S, 0x77, bias+0x2020),
			pc: bias + 0x2020, sp: S, fp: 0x77},
		{name: "leaf not topmost: LR unknown", frame: a64frame(bias+0x1008, S, 0x77), why: unwind.ReasonNeedsRegister},
		{name: "signed LR, topmost, not yet saved", frame: unwind.Topmost(arch.ARM64, bias+0x2004, S, 0x77, bias+0x2020|pac),
			pc: bias + 0x2020, sp: S, fp: 0x77},
		{name: "frame record pushed, signed RA stripped", frame: unwind.Topmost(arch.ARM64, bias+0x2008, S, 0x77, 0),
			stack: map[uint64]uint64{S: 0x88, S + 8: bias + 0x3004 | pac}, pc: bias + 0x3004, sp: S + 16, fp: 0x88},
		{name: "FP-based caller frame", frame: a64frame(bias+0x2030, S, S+0x20),
			stack: map[uint64]uint64{S + 0x20: 0x99, S + 0x28: bias + 0x2020 | pac}, pc: bias + 0x2020, sp: S + 0x30, fp: 0x99},
		{name: "configured PAC mask (52-bit VA)", frame: a64frame(bias+0x2030, S, S+0x20), pacMask: 0xfff0 << 48,
			stack: map[uint64]uint64{S + 0x20: 0x99, S + 0x28: bias + 0x2020 | 1<<50 | 0xab<<56}, pc: bias + 0x2020 | 1<<50, sp: S + 0x30, fp: 0x99},
		{name: "RA undefined", frame: a64frame(bias+0x3005, S, 0), why: unwind.ReasonOutermost},
		{name: "flex RA in x9, topmost", frame: withReg(unwind.Topmost(arch.ARM64, bias+0x6004, S, 1, 0), 9, bias+0x2020),
			pc: bias + 0x2020, sp: S, fp: 1},
		{name: "flex RA in x9, caller frame", frame: a64frame(bias+0x6004, S, 1), why: unwind.ReasonNeedsRegister},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unwind.Unwinder{Arch: arch.ARM64, Space: sp, Mem: stackOf(tt.stack)}
			u.PACMask = tt.pacMask
			f, ok := stepOver(t, u, tt.frame, tt.why)
			if !ok {
				return
			}
			if f.PC != tt.pc || regOf(&f, arch.ARM64.SP()) != tt.sp || regOf(&f, arch.ARM64.FP()) != tt.fp || f.Top {
				t.Errorf("caller = pc %#x sp %#x fp %#x top %v, want %#x %#x %#x", f.PC, regOf(&f, arch.ARM64.SP()), regOf(&f, arch.ARM64.FP()), f.Top, tt.pc, tt.sp, tt.fp)
			}
			if _, ok := f.Reg(x30); ok {
				t.Errorf("caller frame claims to know LR")
			}
		})
	}
}

var r11, r14, r15 = arch.S390X.FP(), arch.S390X.RA(), arch.S390X.SP()

const f0, f2 = 16, 17 // DWARF numbers of s390x f0 and f2

// s390xFuncs: gcc's frames on s390x, where the CFA is the caller's SP +
// 160 and stmg saves r11-r15 into the caller's register save area.
func s390xFuncs() []sframe.Function {
	return []sframe.Function{
		// Leaf without a frame: CFA = r15+160, RA in r14.
		{Start: 0x1000, Size: 0x20, Rows: []sframe.Row{{Start: 0, CFA: reg(r15, 160)}}},
		// stmg %r11,%r15,88(%r15); lay %r15,-168(%r15); lgr %r11,%r15.
		{Start: 0x2000, Size: 0x40, Rows: []sframe.Row{
			{Start: 0, CFA: reg(r15, 160)},
			{Start: 6, CFA: reg(r15, 160), RA: cfaSlot(-48), FP: cfaSlot(-72)},
			{Start: 12, CFA: reg(r15, 328), RA: cfaSlot(-48), FP: cfaSlot(-72)},
			{Start: 16, CFA: reg(r11, 328), RA: cfaSlot(-48), FP: cfaSlot(-72)},
		}},
		{Start: 0x3000, Size: 0x40, Rows: []sframe.Row{{Start: 0, RAUndefined: true}}},
		// Flexible: a leaf keeping RA in f0 and FP in f2 (topmost only).
		{Start: 0x6000, Size: 0x40, Flex: true, Rows: []sframe.Row{
			{Start: 0, CFA: reg(r15, 160)},
			{Start: 8, CFA: reg(r15, 320), RA: reg(f0, 0), FP: reg(f2, 0)},
		}},
		// FP saved, RA not (the RA word is padding).
		{Start: 0x7000, Size: 0x20, Rows: []sframe.Row{{Start: 0, CFA: reg(r15, 320), FP: cfaSlot(-72)}}},
		{Start: 0x4fff, Size: 0x10, Signal: true},
	}
}

func TestStepS390X(t *testing.T) {
	sp := space(t, sframe.ABIS390XBE, 3, s390xFuncs())
	const S uint64 = stackBase + 0x100
	tests := []struct {
		name   string
		frame  unwind.Frame
		stack  map[uint64]uint64
		why    unwind.Reason
		pc, sp uint64
		fp     uint64
	}{
		{name: "leaf topmost: RA in r14, caller SP = CFA-160 = SP", frame: unwind.Topmost(arch.S390X, bias+0x1008, S, 0x77, bias+0x2020),
			pc: bias + 0x2020, sp: S, fp: 0x77},
		{name: "leaf not topmost: r14 unknown", frame: s390frame(bias+0x1008, S, 0x77), why: unwind.ReasonNeedsRegister},
		{name: "saved in the caller's save area, before the frame", frame: unwind.Topmost(arch.S390X, bias+0x2008, S, 0x77, 0),
			stack: map[uint64]uint64{S + 160 - 72: 0x88, S + 160 - 48: bias + 0x3004}, pc: bias + 0x3004, sp: S, fp: 0x88},
		{name: "frame allocated, SP-based", frame: unwind.Topmost(arch.S390X, bias+0x200c, S-168, 0x77, 0),
			stack: map[uint64]uint64{S + 160 - 72: 0x88, S + 160 - 48: bias + 0x3004}, pc: bias + 0x3004, sp: S, fp: 0x88},
		{name: "FP-based caller frame", frame: s390frame(bias+0x2030, S-168-40, S-168),
			stack: map[uint64]uint64{S + 160 - 72: 0x99, S + 160 - 48: bias + 0x2020}, pc: bias + 0x2020, sp: S, fp: 0x99},
		{name: "RA undefined", frame: s390frame(bias+0x3005, S, 0), why: unwind.ReasonOutermost},
		{name: "flex RA in f0, FP in f2, topmost", frame: withReg(withReg(unwind.Topmost(arch.S390X, bias+0x6010, S-160, 1, 0), f0, bias+0x2020), f2, 0x2222),
			pc: bias + 0x2020, sp: S, fp: 0x2222},
		{name: "flex RA in f0, f0 unknown", frame: unwind.Topmost(arch.S390X, bias+0x6010, S-160, 1, 0), why: unwind.ReasonNeedsRegister},
		{name: "FP saved without RA: RA in r14", frame: unwind.Topmost(arch.S390X, bias+0x7004, S-160, 1, bias+0x2020),
			stack: map[uint64]uint64{S + 160 - 72: 0x55}, pc: bias + 0x2020, sp: S, fp: 0x55},
		{name: "caller SP equal to SP outside the topmost frame", frame: withReg(s390frame(bias+0x1008, S, 0x77), r14, bias+0x2020), why: unwind.ReasonBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ok := stepOver(t, &unwind.Unwinder{Arch: arch.S390X, Space: sp, Mem: stackOf(tt.stack)}, tt.frame, tt.why)
			if !ok {
				return
			}
			if f.PC != tt.pc || regOf(&f, arch.S390X.SP()) != tt.sp || regOf(&f, arch.S390X.FP()) != tt.fp || f.Top {
				t.Errorf("caller = pc %#x sp %#x fp %#x top %v, want %#x %#x %#x", f.PC, regOf(&f, arch.S390X.SP()), regOf(&f, arch.S390X.FP()), f.Top, tt.pc, tt.sp, tt.fp)
			}
			for _, r := range []uint32{r14, f0, f2} {
				if _, ok := f.Reg(r); ok {
					t.Errorf("caller frame claims to know register %d", r)
				}
			}
		})
	}
}

func s390frame(pc, sp, fp uint64) unwind.Frame {
	f := unwind.Frame{PC: pc}
	f.SetReg(r15, sp)
	f.SetReg(r11, fp)
	return f
}

// TestSignalS390X: handler -> restorer -> interrupted leaf, whose RA is in
// the r14 the kernel saved in the rt_sigframe (the restorer runs with r15
// at the frame: the save area, svc_insn, siginfo at 168, the ucontext at
// 296 with uc_mcontext at 336: PSW address at 344, r0-r15 from 352, f0-f15
// from 552).
func TestSignalS390X(t *testing.T) {
	sp := space(t, sframe.ABIS390XBE, 3, s390xFuncs())
	m := newMem(stackBase, 1024)
	const S uint64 = stackBase + 0x40 // the handler's SP, after its frame
	frame := S + 168                  // the handler allocated 168 bytes; its CFA is the frame + 160
	m.set(frame+160-72, 0x1111)       // the handler's saved r11
	m.set(frame+160-48, bias+0x5000)  // the handler's saved r14: the restorer
	mc := frame + 336
	const isp uint64 = stackBase + 0x1000
	m.set(mc+8, bias+0x1010)       // PSW address: the interrupted leaf
	m.set(mc+16+8*11, 0x2929)      // r11
	m.set(mc+16+8*14, bias+0x3008) // r14 of the leaf
	m.set(mc+16+8*15, isp)         // r15
	m.set(mc+216+8*2, 0x4242)      // f2 (DWARF 17)
	u := &unwind.Unwinder{Arch: arch.S390X, Space: sp, Mem: m}
	top := unwind.Topmost(arch.S390X, bias+0x2030, S, S, 0)
	var pcs [8]uint64
	n, why := u.Walk(top, pcs[:])
	sameAsSteps(t, u, top, pcs[:n], why)
	want := []uint64{bias + 0x2030, bias + 0x5000, bias + 0x1010, bias + 0x3008}
	if why != unwind.ReasonOutermost || n != len(want) {
		t.Fatalf("Walk = %#x, %v; want %#x, outermost", pcs[:n], why, want)
	}
	for i := range want {
		if pcs[i] != want[i] {
			t.Errorf("frame %d: pc %#x, want %#x", i, pcs[i], want[i])
		}
	}
	f := top
	u.Step(&f)
	u.Step(&f)
	if v, ok := f.Reg(f2); !ok || v != 0x4242 || !f.Top || regOf(&f, arch.S390X.SP()) != isp {
		t.Errorf("interrupted frame: f2 %#x %v, top %v, sp %#x", v, ok, f.Top, regOf(&f, arch.S390X.SP()))
	}
}

func a64frame(pc, sp, fp uint64) unwind.Frame {
	f := unwind.Frame{PC: pc}
	f.SetReg(a64sp, sp)
	f.SetReg(x29, fp)
	return f
}

// TestSignalARM64: handler -> __kernel_rt_sigreturn -> interrupted leaf,
// whose RA is in the LR saved by the kernel.
func TestSignalARM64(t *testing.T) {
	sp := space(t, sframe.ABIAArch64LE, 3, arm64Funcs())
	m := newMem(stackBase, 1024)
	const S uint64 = stackBase + 0x40
	m.set(S, 0x1111)        // handler's x29
	m.set(S+8, bias+0x5000) // handler's x30: the sigreturn trampoline
	frame := S + 16         // rt_sigframe
	regs := frame + 128 + 176 + 8
	const isp uint64 = stackBase + 0x1000
	m.set(regs+8*29, 0x2929)
	m.set(regs+8*30, bias+0x3008) // LR of the interrupted leaf
	m.set(regs+8*31, isp)         // sp
	m.set(regs+8*32, bias+0x1010) // pc
	u := &unwind.Unwinder{Arch: arch.ARM64, Space: sp, Mem: m}
	// The handler's frame record is at S (FP-based row of 0x2000).
	var pcs [8]uint64
	n, why := u.Walk(a64top(bias+0x2030, S), pcs[:])
	sameAsSteps(t, u, a64top(bias+0x2030, S), pcs[:n], why)
	want := []uint64{bias + 0x2030, bias + 0x5000, bias + 0x1010, bias + 0x3008}
	if why != unwind.ReasonOutermost || n != len(want) {
		t.Fatalf("Walk = %#x, %v; want %#x, outermost", pcs[:n], why, want)
	}
	for i := range want {
		if pcs[i] != want[i] {
			t.Errorf("frame %d: pc %#x, want %#x", i, pcs[i], want[i])
		}
	}
}

// sameAsSteps checks a Walk's PCs and reason against Step called frame by
// frame from the same topmost frame: Walk keeps the fast path's registers
// in locals and goes back to a Frame for the general path.
func sameAsSteps(t *testing.T, u *unwind.Unwinder, f unwind.Frame, pcs []uint64, why unwind.Reason) {
	t.Helper()
	var got []uint64
	var r unwind.Reason
	for len(got) < len(pcs) {
		got = append(got, f.PC)
		if r, _ = u.Step(&f); r != unwind.ReasonOK {
			break
		}
	}
	if len(got) != len(pcs) || r != why {
		t.Fatalf("Walk = %#x, %v; Step by Step = %#x, %v", pcs, why, got, r)
	}
	for i := range got {
		if got[i] != pcs[i] {
			t.Fatalf("Walk = %#x; Step by Step = %#x", pcs, got)
		}
	}
}

func a64top(pc, fp uint64) unwind.Frame {
	return unwind.Topmost(arch.ARM64, pc, fp, fp, 0)
}

// TestV2 walks the AMD64 stack of TestStepAMD64's first case from a V2
// section (no flexible or signal FDEs).
func TestV2(t *testing.T) {
	var funcs []sframe.Function
	for _, f := range amd64Funcs() {
		if !f.Flex && !f.Signal {
			funcs = append(funcs, f)
		}
	}
	sp := space(t, sframe.ABIAMD64LE, 2, funcs)
	m := newMem(stackBase, stackWords)
	const S uint64 = stackBase + 0x40
	m.set(S, S+0x20)
	m.set(S+8, bias+0x2010)
	m.set(S+0x20, 0)
	m.set(S+0x28, bias+0x3005)
	var pcs [8]uint64
	n, why := (&unwind.Unwinder{Arch: arch.AMD64, Space: sp, Mem: m}).Walk(unwind.Topmost(arch.AMD64, bias+0x1005, S, 0, 0), pcs[:])
	if n != 3 || why != unwind.ReasonOutermost || pcs[2] != bias+0x3005 {
		t.Errorf("Walk = %#x, %v", pcs[:n], why)
	}
}

func TestStepAllocs(t *testing.T) {
	sp := space(t, sframe.ABIAMD64LE, 3, amd64Funcs())
	m := newMem(stackBase, stackWords)
	const S uint64 = stackBase + 0x40
	m.set(S, S+0x20)
	m.set(S+8, bias+0x2010)
	m.set(S+0x28, bias+0x3005)
	u := &unwind.Unwinder{Arch: arch.AMD64, Space: sp, Mem: m}
	var pcs [8]uint64
	n := testing.AllocsPerRun(100, func() {
		u.Walk(unwind.Topmost(arch.AMD64, bias+0x1005, S, 0, 0), pcs[:])
	})
	if n != 0 {
		t.Errorf("Walk allocates %v times", n)
	}
}

// BenchmarkStep: one step from the topmost frame through a small section
// (CPU cost without cache misses).
func BenchmarkStep(b *testing.B) {
	t := &testing.T{}
	sp := space(t, sframe.ABIAMD64LE, 3, amd64Funcs())
	m := newMem(stackBase, stackWords)
	const S uint64 = stackBase + 0x40
	m.set(S, S+0x20)
	m.set(S+8, bias+0x2010)
	u := &unwind.Unwinder{Arch: arch.AMD64, Space: sp, Mem: m}
	b.ReportAllocs()
	for b.Loop() {
		f := unwind.Topmost(arch.AMD64, bias+0x1005, S, 0, 0)
		if why, _ := u.Step(&f); why != unwind.ReasonOK {
			b.Fatal(why)
		}
	}
}

// TestReset: a Frame reset in place equals the one Topmost returns,
// whatever registers it knew before, on both architectures.
func TestReset(t *testing.T) {
	for _, a := range []*arch.Arch{arch.AMD64, arch.ARM64} {
		f := unwind.Topmost(a, 1, 2, 3, 4)
		for r := uint32(0); r < 32; r += 3 {
			f.SetReg(r, uint64(100+r))
		}
		f.Top = false
		f.Reset(a, 0x1000, 0x7000, 0x7100, 0x2000)
		if want := unwind.Topmost(a, 0x1000, 0x7000, 0x7100, 0x2000); f != want {
			t.Errorf("%v: Reset gives %+v, want %+v", a, f, want)
		}
	}
}

// regOf returns register n of f, 0 when f does not know it.
func regOf(f *unwind.Frame, n uint32) uint64 {
	v, _ := f.Reg(n)
	return v
}
