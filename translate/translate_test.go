package translate

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Hand-built CFI rows for x86-64 (rsp 7, rbp 6, rip 16) and AArch64
// (sp 31, x29, x30).
var (
	x86CIE = &cfi.CIE{RAColumn: 16, CodeAlign: 1, DataAlign: -8}
	armCIE = &cfi.CIE{RAColumn: 30, CodeAlign: 4, DataAlign: -8}

	ripSaved = cfi.RegRule{Reg: 16, Rule: cfi.Rule{Kind: cfi.Offset, Offset: -8}}
	cfaSP8   = cfi.CFA{Kind: cfi.CFARegOffset, Reg: 7, Offset: 8}
)

func reg(r uint64, k cfi.RuleKind, off int64) cfi.RegRule {
	return cfi.RegRule{Reg: r, Rule: cfi.Rule{Kind: k, Offset: off}}
}

func table(cie *cfi.CIE, start, size uint64, rows ...cfi.Row) *cfi.Table {
	return &cfi.Table{FDE: &cfi.FDE{CIE: cie, Start: start, Size: size}, Rows: rows}
}

// s390x: r15 the SP, r11 the FP, r14 the RA; the CIE says CFA = r15+160.
var (
	s390CIE  = &cfi.CIE{RAColumn: 14, CodeAlign: 1, DataAlign: -8}
	s390CFA  = cfaReg(15, 160)
	s390Save = []cfi.RegRule{reg(11, cfi.Offset, -72), reg(14, cfi.Offset, -48), reg(15, cfi.Offset, -40)}
)

func s390SP(off int32) sframe.Loc { return sframe.Loc{Kind: sframe.LocReg, Reg: 15, Offset: off} }
func s390FP(off int32) sframe.Loc { return sframe.Loc{Kind: sframe.LocReg, Reg: 11, Offset: off} }
func inReg(r uint32) sframe.Loc   { return sframe.Loc{Kind: sframe.LocReg, Reg: r} }

func spLoc(off int32) sframe.Loc         { return sframe.Loc{Kind: sframe.LocReg, Reg: 7, Offset: off} }
func fpLoc(off int32) sframe.Loc         { return sframe.Loc{Kind: sframe.LocReg, Reg: 6, Offset: off} }
func cfaAt(off int32) sframe.Loc         { return sframe.Loc{Kind: sframe.LocCFA, Offset: off} }
func fixedRA() sframe.Loc                { return sframe.Loc{Kind: sframe.LocFixed, Offset: -8} }
func armSP(off int32) sframe.Loc         { return sframe.Loc{Kind: sframe.LocReg, Reg: 31, Offset: off} }
func cfaReg(r uint64, off int64) cfi.CFA { return cfi.CFA{Kind: cfi.CFARegOffset, Reg: r, Offset: off} }

func TestTranslateFunctions(t *testing.T) {
	tests := []struct {
		name    string
		machine elf.Machine
		order   binary.ByteOrder
		version uint8
		table   *cfi.Table
		want    *sframe.Function // nil: skipped
		reason  Reason
	}{
		{"x86-64 push rbp; mov rsp,rbp; collapse rows that change only other registers", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x20,
				cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}},
				cfi.Row{Loc: 0x1001, CFA: cfaReg(7, 16), Regs: []cfi.RegRule{reg(6, cfi.Offset, -16), ripSaved}},
				cfi.Row{Loc: 0x1004, CFA: cfaReg(6, 16), Regs: []cfi.RegRule{reg(6, cfi.Offset, -16), ripSaved}},
				cfi.Row{Loc: 0x1008, CFA: cfaReg(6, 16), Regs: []cfi.RegRule{reg(3, cfi.Offset, -24), reg(6, cfi.Offset, -16), ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x20, Rows: []sframe.Row{
				{Start: 0, CFA: spLoc(8), RA: fixedRA()},
				{Start: 1, CFA: spLoc(16), RA: fixedRA(), FP: cfaAt(-16)},
				{Start: 4, CFA: fpLoc(16), RA: fixedRA(), FP: cfaAt(-16)},
			}}, ""},
		{"x86-64 RA undefined: outermost frame", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{reg(16, cfi.Undefined, 0)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{RAUndefined: true}}}, ""},
		{"x86-64 signal frame", elf.EM_X86_64, binary.LittleEndian, 3,
			table(&cfi.CIE{RAColumn: 16, Signal: true}, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Signal: true, Rows: []sframe.Row{{CFA: spLoc(8), RA: fixedRA()}}}, ""},
		{"x86-64 CFA on r10 (V3 flex)", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(10, 0), Regs: []cfi.RegRule{ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Flex: true, Rows: []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 10}, RA: fixedRA()}}}, ""},
		{"x86-64 CFA on r10 with V2: skipped", elf.EM_X86_64, binary.LittleEndian, 2,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(10, 0), Regs: []cfi.RegRule{ripSaved}}),
			nil, CFARegister},
		{"x86-64 DRAP: CFA = [rbp-8], FP at [rbp+0] (flex deref)", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: []byte{0x76, 0x78, 0x06}},
				Regs: []cfi.RegRule{{Reg: 6, Rule: cfi.Rule{Kind: cfi.Expression, Expr: []byte{0x76, 0x00}}}, ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Flex: true, Rows: []sframe.Row{{
				CFA: sframe.Loc{Kind: sframe.LocRegDeref, Reg: 6, Offset: -8}, RA: fixedRA(), FP: sframe.Loc{Kind: sframe.LocRegDeref, Reg: 6}}}}, ""},
		{"x86-64 DRAP with V2: skipped", elf.EM_X86_64, binary.LittleEndian, 2,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: []byte{0x76, 0x78, 0x06}}, Regs: []cfi.RegRule{ripSaved}}),
			nil, CFADeref},
		{"x86-64 RA in r11 (flex)", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(7, 0), Regs: []cfi.RegRule{{Reg: 16, Rule: cfi.Rule{Kind: cfi.Register, Reg: 11}}}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Flex: true, Rows: []sframe.Row{{CFA: spLoc(0), RA: sframe.Loc{Kind: sframe.LocReg, Reg: 11}}}}, ""},
		{"x86-64 RA not at CFA-8", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{reg(16, cfi.Offset, -16)}}), nil, RANotAtFixedSlot},
		{"x86-64 CFA expression SFrame cannot carry", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a}}, Regs: []cfi.RegRule{ripSaved}}), nil, CFAExpression},
		{"x86-64 FP undefined", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{reg(6, cfi.Undefined, 0), ripSaved}}), nil, UndefinedFPOrSP},
		{"x86-64 FP val_offset", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{reg(6, cfi.ValOffset, -16), ripSaved}}), nil, FPExpression},
		{"x86-64 SP restored from memory", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{reg(7, cfi.Offset, -16), ripSaved}}), nil, SPRule},
		{"x86-64 CFA offset beyond int32", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(7, 1<<33), Regs: []cfi.RegRule{ripSaved}}), nil, OffsetRange},
		{"non-default return column", elf.EM_X86_64, binary.LittleEndian, 3,
			table(&cfi.CIE{RAColumn: 0}, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8}), nil, ReturnColumn},
		{"AArch64 stp x29,x30,[sp,-16]!; mangled RA; B key; big-endian", elf.EM_AARCH64, binary.BigEndian, 3,
			table(&cfi.CIE{RAColumn: 30, BKey: true}, 0x2000, 0x40,
				cfi.Row{Loc: 0x2000, CFA: cfaReg(31, 0)},
				cfi.Row{Loc: 0x2004, CFA: cfaReg(31, 0), MangledRA: true},
				cfi.Row{Loc: 0x2008, CFA: cfaReg(31, 16), MangledRA: true, Regs: []cfi.RegRule{reg(29, cfi.Offset, -16), reg(30, cfi.Offset, -8)}},
				cfi.Row{Loc: 0x200c, CFA: cfaReg(29, 16), MangledRA: true, Regs: []cfi.RegRule{reg(29, cfi.Offset, -16), reg(30, cfi.Offset, -8)}}),
			&sframe.Function{Start: 0x2000, Size: 0x40, PauthKeyB: true, Rows: []sframe.Row{
				{Start: 0, CFA: armSP(0)},
				{Start: 4, CFA: armSP(0), MangledRA: true},
				{Start: 8, CFA: armSP(16), RA: cfaAt(-8), FP: cfaAt(-16), MangledRA: true},
				{Start: 12, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 29, Offset: 16}, RA: cfaAt(-8), FP: cfaAt(-16), MangledRA: true},
			}}, ""},
		{"AArch64 FP saved, RA not", elf.EM_AARCH64, binary.LittleEndian, 3,
			table(armCIE, 0x2000, 0x10, cfi.Row{Loc: 0x2000, CFA: cfaReg(31, 16), Regs: []cfi.RegRule{reg(29, cfi.Offset, -16)}}), nil, FPWithoutRA},
		{"AArch64 CFA on x9: no flexible FDEs on AArch64 (as gas)", elf.EM_AARCH64, binary.LittleEndian, 3,
			table(armCIE, 0x2000, 0x10, cfi.Row{Loc: 0x2000, CFA: cfaReg(9, 0)}), nil, CFARegister},
		{"AArch64 negate_ra_state_with_pc", elf.EM_AARCH64, binary.LittleEndian, 3,
			table(armCIE, 0x2000, 0x10, cfi.Row{Loc: 0x2000, CFA: cfaReg(31, 0), MangledRA: true, RAStateWithPC: true}), nil, RAStateWithPC},
		{"x86-64 GNU_args_size 16 with an SP-based CFA: skipped, as gas does", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10,
				cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}},
				cfi.Row{Loc: 0x1004, CFA: cfaReg(7, 24), ArgsSize: 16, Regs: []cfi.RegRule{ripSaved}}),
			nil, ArgsSize},
		{"x86-64 GNU_args_size with an FP-based CFA is ignored, as gas does", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10,
				cfi.Row{Loc: 0x1000, CFA: cfaReg(6, 16), ArgsSize: 16, Regs: []cfi.RegRule{reg(6, cfi.Offset, -16), ripSaved}},
				cfi.Row{Loc: 0x1004, CFA: cfaReg(6, 16), ArgsSize: 0, Regs: []cfi.RegRule{reg(6, cfi.Offset, -16), ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: fpLoc(16), RA: fixedRA(), FP: cfaAt(-16)}}}, ""},
		{"x86-64 GNU_args_size set while FP-based, CFA back on SP later: described, as gas does", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10,
				cfi.Row{Loc: 0x1000, CFA: cfaReg(6, 16), ArgsSize: 8, Regs: []cfi.RegRule{reg(6, cfi.Offset, -16), ripSaved}},
				cfi.Row{Loc: 0x1004, CFA: cfaSP8, ArgsSize: 8, Regs: []cfi.RegRule{ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{
				{CFA: fpLoc(16), RA: fixedRA(), FP: cfaAt(-16)},
				{Start: 4, CFA: spLoc(8), RA: fixedRA()}}}, ""},
		{"x86-64 explicit same_value rip: ignored (RA at CFA-8), as gas does", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{reg(16, cfi.SameValue, 0)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: spLoc(8), RA: fixedRA()}}}, ""},
		{"x86-64 no rule for rip at all (CIE never set it): skipped", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8}), nil, RANotAtFixedSlot},
		{"x86-64 GNU_args_size 0 with an SP-based CFA", elf.EM_X86_64, binary.LittleEndian, 3,
			table(x86CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaSP8, ArgsSize: 0, Regs: []cfi.RegRule{ripSaved}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: spLoc(8), RA: fixedRA()}}}, ""},

		// s390x, as gcc frames it: stmg %r11,%r15,88(%r15) saves r15 too
		// (a rule SFrame does not need: SP = CFA-160), then the frame and
		// the frame pointer.
		{"s390x stmg; lay; lgr r11: CFA on r15 then r11, RA and FP saved, SP saved ignored", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x40,
				cfi.Row{Loc: 0x1000, CFA: s390CFA},
				cfi.Row{Loc: 0x1006, CFA: s390CFA, Regs: s390Save},
				cfi.Row{Loc: 0x100c, CFA: cfaReg(15, 328), Regs: s390Save},
				cfi.Row{Loc: 0x1010, CFA: cfaReg(11, 328), Regs: s390Save},
				cfi.Row{Loc: 0x103a, CFA: s390CFA}),
			&sframe.Function{Start: 0x1000, Size: 0x40, Rows: []sframe.Row{
				{Start: 0, CFA: s390SP(160)},
				{Start: 6, CFA: s390SP(160), RA: cfaAt(-48), FP: cfaAt(-72)},
				{Start: 0xc, CFA: s390SP(328), RA: cfaAt(-48), FP: cfaAt(-72)},
				{Start: 0x10, CFA: s390FP(328), RA: cfaAt(-48), FP: cfaAt(-72)},
				{Start: 0x3a, CFA: s390SP(160)},
			}}, ""},
		{"s390x FP saved without RA (V3 pads the RA word)", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(15, 320), Regs: []cfi.RegRule{reg(11, cfi.Offset, -72)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: s390SP(320), FP: cfaAt(-72)}}}, ""},
		{"s390x leaf keeping RA in f0, FP in f2 and SP in f4 (V3 flex)", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x20,
				cfi.Row{Loc: 0x1000, CFA: s390CFA},
				cfi.Row{Loc: 0x1004, CFA: s390CFA, Regs: []cfi.RegRule{{Reg: 14, Rule: cfi.Rule{Kind: cfi.Register, Reg: 16}}}},
				cfi.Row{Loc: 0x1008, CFA: cfaReg(15, 320), Regs: []cfi.RegRule{{Reg: 11, Rule: cfi.Rule{Kind: cfi.Register, Reg: 17}},
					{Reg: 14, Rule: cfi.Rule{Kind: cfi.Register, Reg: 16}}, {Reg: 15, Rule: cfi.Rule{Kind: cfi.Register, Reg: 18}}}}),
			&sframe.Function{Start: 0x1000, Size: 0x20, Flex: true, Rows: []sframe.Row{
				{Start: 0, CFA: s390SP(160)},
				{Start: 4, CFA: s390SP(160), RA: inReg(16)},
				{Start: 8, CFA: s390SP(320), RA: inReg(16), FP: inReg(17)},
			}}, ""},
		{"s390x RA in f0 with V2: the register-number form, no flex", elf.EM_S390, binary.BigEndian, 2,
			table(s390CIE, 0x1000, 0x20, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{{Reg: 14, Rule: cfi.Rule{Kind: cfi.Register, Reg: 16}}}}),
			&sframe.Function{Start: 0x1000, Size: 0x20, Rows: []sframe.Row{{CFA: s390SP(160), RA: inReg(16)}}}, ""},
		{"s390x CFA on r1 (V3 flex: stack clash probing)", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(1, 4256)}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Flex: true, Rows: []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 1, Offset: 4256}}}}, ""},
		{"s390x CFA on r1 with V2: skipped", elf.EM_S390, binary.BigEndian, 2,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(1, 4256)}), nil, CFARegister},
		{"s390x CFA on f0: no register a control word can name beyond 31, but f0 is 16", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(16, 160)}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Flex: true, Rows: []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 16, Offset: 160}}}}, ""},
		{"s390x CFA on an access register (DWARF 48)", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(48, 160)}), nil, CFARegister},
		{"s390x RA in an access register (DWARF 49)", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{{Reg: 14, Rule: cfi.Rule{Kind: cfi.Register, Reg: 49}}}}), nil, RARegister},
		{"s390x CFA offset not 160 plus a multiple of 8", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(15, 164)}), nil, OffsetAlignment},
		{"s390x V2: an odd RA slot would read as a register number", elf.EM_S390, binary.BigEndian, 2,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(14, cfi.Offset, -47)}}), nil, OffsetAlignment},
		{"s390x V3: an odd RA slot is only an offset", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(14, cfi.Offset, -47)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: s390SP(160), RA: cfaAt(-47)}}}, ""},
		{"s390x SP = CFA-160 (val_offset), as the ABI defines it", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(15, cfi.ValOffset, -160)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: s390SP(160)}}}, ""},
		// The ABI's SFrame puts the caller's SP at CFA-160: a row saying
		// SP = CFA+0 (Go's linker's rows, gas's sp_val0) is written with
		// the CFA moved 160 up, and the RA and FP slots with it.
		{"s390x SP = CFA+0 (val_offset): the CFA moves 160 up", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(15, cfi.ValOffset, 0)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: s390SP(320)}}}, ""},
		{"s390x Go frame: SP = CFA+0, LR at CFA-16", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfaReg(15, 16), Regs: []cfi.RegRule{reg(15, cfi.ValOffset, 0), reg(14, cfi.Offset, -16)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{CFA: s390SP(176), RA: cfaAt(-176)}}}, ""},
		{"s390x SP = CFA+0 with a CFA expression: not moved", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: []byte{0x7f, 0x10}}, Regs: []cfi.RegRule{reg(15, cfi.ValOffset, 0)}}), nil, SPRule},
		{"s390x SP = CFA+8 with RA val_offset: not moved", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(15, cfi.ValOffset, 8), reg(14, cfi.ValOffset, -48)}}), nil, SPRule},
		{"s390x SP undefined", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(15, cfi.Undefined, 0)}}), nil, UndefinedFPOrSP},
		{"s390x RA undefined: outermost frame (_start)", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(14, cfi.Undefined, 0)}}),
			&sframe.Function{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{{RAUndefined: true}}}, ""},
		{"s390x RA val_offset", elf.EM_S390, binary.BigEndian, 3,
			table(s390CIE, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA, Regs: []cfi.RegRule{reg(14, cfi.ValOffset, -48)}}), nil, RAExpression},
		{"s390x non-default return column", elf.EM_S390, binary.BigEndian, 3,
			table(&cfi.CIE{RAColumn: 15}, 0x1000, 0x10, cfi.Row{Loc: 0x1000, CFA: s390CFA}), nil, ReturnColumn},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := translateAll(Input{Machine: tc.machine, Order: tc.order}, []*cfi.Table{tc.table}, Options{Version: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if len(res.Funcs) != 0 || len(res.Diags) != 1 || res.Diags[0].Reason != tc.reason || !res.Diags[0].Skipped || skippedCount(res.Result) != 1 {
					t.Fatalf("want skipped with %s; got funcs %+v diags %+v", tc.reason, res.Funcs, res.Diags)
				}
				if !strings.Contains(res.Summary(), "1 "+string(tc.reason)) {
					t.Errorf("summary %q does not count %s", res.Summary(), tc.reason)
				}
				return
			}
			if len(res.Diags) != 0 || len(res.Funcs) != 1 {
				t.Fatalf("diags %+v, %d functions", res.Diags, len(res.Funcs))
			}
			if d := cmp.Diff(*tc.want, res.Funcs[0]); d != "" {
				t.Errorf("function (-want +got):\n%s", d)
			}
			// The function must encode in the requested version.
			if _, err := sframe.Encode(res.Funcs, sframe.Options{Version: tc.version, ABI: res.ABI, Order: tc.order, CFAFixedFP: res.CFAFixedFP, CFAFixedRA: res.CFAFixedRA}); err != nil {
				t.Errorf("encode: %v", err)
			}
		})
	}
}

func TestTranslateFileLevel(t *testing.T) {
	row := cfi.Row{Loc: 0x1000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}}
	res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian,
		Symbol: func(a uint64) string { return map[uint64]string{0x1008: "dup"}[a] }}, []*cfi.Table{
		table(x86CIE, 0x3000, 0x10, cfi.Row{Loc: 0x3000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}}),
		table(x86CIE, 0x1000, 0x10, row),
		table(x86CIE, 0x1008, 0x10, cfi.Row{Loc: 0x1008, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}}), // overlaps the one before
		table(x86CIE, 0x2000, 0, cfi.Row{Loc: 0x2000, CFA: cfaSP8}),                                   // empty
		table(x86CIE, 0, 0x10, cfi.Row{Loc: 0, CFA: cfaSP8}),                                          // discarded
		nil, // not executed: left out
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ABI != sframe.ABIAMD64LE || res.CFAFixedRA != -8 || res.Converted != 2 || skippedCount(res.Result) != 1 || res.empty != 2 {
		t.Fatalf("got %+v", res)
	}
	if res.emitted[0] != 0x1000 || res.emitted[1] != 0x3000 {
		t.Errorf("functions not emitted by start: %#x", res.emitted)
	}
	if d := res.Diags[0]; d.Reason != Overlap || d.Symbol != "dup" || !strings.Contains(d.Detail, "FDE at offset 0x") {
		t.Errorf("diag %+v", d)
	}
}

// orderless is a Source that gives its tables in the order given.
type orderless struct {
	ts  []*cfi.Table
	cur *cfi.Table
}

func (o *orderless) Next() (*cfi.FDE, error) {
	if len(o.ts) == 0 {
		return nil, io.EOF
	}
	o.cur, o.ts = o.ts[0], o.ts[1:]
	return o.cur.FDE, nil
}

func (o *orderless) Table() *cfi.Table { return o.cur }

// failing is a Source whose Next fails after its tables.
type failing struct{ orderless }

var errSource = errors.New("source failed")

func (f *failing) Next() (*cfi.FDE, error) {
	if len(f.ts) == 0 {
		return nil, errSource
	}
	return f.orderless.Next()
}

// TestTranslateErrors: what stops a translation, and the error it gives.
func TestTranslateErrors(t *testing.T) {
	ok := func(start uint64) *cfi.Table {
		return table(x86CIE, start, 0x10, cfi.Row{Loc: start, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}})
	}
	x86 := Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian}
	errEmit := errors.New("emit failed")
	tests := []struct {
		name string
		in   Input
		src  Source
		o    Options
		emit func(*sframe.Function) error
		is   error  // errors.Is, when set
		want string // in the message
	}{
		{"unsupported machine", Input{Machine: elf.EM_RISCV}, nil, Options{}, nil, errMachine, "EM_RISCV"},
		{"version 4", x86, nil, Options{Version: 4}, nil, nil, "SFrame version 4"},
		{"out of order", x86, &orderless{ts: []*cfi.Table{ok(0x2000), ok(0x1000)}}, Options{}, nil, nil, "out of order: 0x1000 after 0x2000"},
		{"source fails", x86, &failing{orderless{ts: []*cfi.Table{ok(0x1000)}}}, Options{}, nil, errSource, "source failed"},
		{"emit fails", x86, &orderless{ts: []*cfi.Table{ok(0x1000)}}, Options{}, func(*sframe.Function) error { return errEmit }, errEmit, "emit failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emit := tc.emit
			if emit == nil {
				emit = func(*sframe.Function) error { return nil }
			}
			res, err := translateFile(tc.in, tc.src, tc.o, emit)
			if err == nil {
				t.Fatalf("no error; result %+v", res)
			}
			if (tc.is != nil && !errors.Is(err, tc.is)) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want %q (wrapping %v)", err, tc.want, tc.is)
			}
		})
	}
}

// TestCuts: each cut falls at the first function from the given index on
// that no earlier function reaches; functions the Translator ignores for their
// range do not count; targets that meet at one cut give it once, and none
// falls at the end.
func TestCuts(t *testing.T) {
	type r struct{ start, size uint64 }
	for _, tc := range []struct {
		name   string
		ranges []r
		from   []int
		want   []int
	}{
		{"disjoint", []r{{10, 10}, {20, 10}, {30, 10}, {40, 10}}, []int{2}, []int{2}},
		{"from 0", []r{{10, 10}, {20, 10}}, []int{0}, []int{0}},
		{"overlap at the cut", []r{{10, 10}, {20, 25}, {40, 10}, {50, 10}}, []int{2}, []int{3}},
		{"a long one before", []r{{10, 100}, {20, 10}, {30, 10}, {40, 10}}, []int{2}, nil},
		{"a discarded one (address 0) does not reach", []r{{0, 100}, {20, 10}, {30, 10}, {40, 10}}, []int{2}, []int{2}},
		{"nested", []r{{10, 40}, {20, 10}, {30, 10}, {50, 10}}, []int{1}, []int{3}},
		{"empty", nil, []int{0}, nil},
		{"several", []r{{10, 10}, {20, 10}, {30, 10}, {40, 10}, {50, 10}, {60, 10}}, []int{1, 3, 5}, []int{1, 3, 5}},
		{"two targets, one cut", []r{{10, 10}, {20, 25}, {30, 10}, {50, 10}, {60, 10}}, []int{1, 2}, []int{1, 3}},
		{"targets behind a long one", []r{{10, 10}, {20, 100}, {30, 10}, {40, 10}, {50, 10}, {130, 10}}, []int{2, 3, 4}, []int{5}},
	} {
		es := make([]cfi.Entry, len(tc.ranges))
		for i, x := range tc.ranges {
			es[i] = cfi.Entry{Start: x.start, Size: x.size}
		}
		if got := Cuts(es, tc.from); !slices.Equal(got, tc.want) {
			t.Errorf("%s: cuts %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPLT describes GNU ld's x86-64 lazy PLT and an AArch64 PLT from their
// instructions.
func TestPLT(t *testing.T) {
	plt0 := []byte{0xff, 0x35, 0xe2, 0x2f, 0, 0, 0xff, 0x25, 0xe4, 0x2f, 0, 0, 0x0f, 0x1f, 0x40, 0}
	entry := []byte{0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0xe0, 0xff, 0xff, 0xff}
	data := append(append(append([]byte{}, plt0...), entry...), entry...)
	res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x1020, Data: data, EntSize: 16}}}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []sframe.Function{
		{Start: 0x1020, Size: 16, Rows: []sframe.Row{{Start: 0, CFA: spLoc(16), RA: fixedRA()}, {Start: 6, CFA: spLoc(24), RA: fixedRA()}}},
		{Start: 0x1030, Size: 32, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{{Start: 0, CFA: spLoc(8), RA: fixedRA()}, {Start: 11, CFA: spLoc(16), RA: fixedRA()}}},
	}
	if d := cmp.Diff(want, res.Funcs); d != "" || res.PLTFuncs != 2 {
		t.Errorf("x86-64 .plt (-want +got):\n%s", d)
	}

	// GNU ld puts the lazy TLSDESC trampoline (endbr64; push GOT+8; jmp
	// *GOT+TDG) after the entries, as in Debian's mesa libraries: the entries
	// stay one PCMASK function, the trampoline gets its own, rsp+16 after its
	// push at +4 (ld's CFI covers it with the entries' expression, which says
	// rsp+8 at +10: wrong, the push has run).
	tlsdesc := []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x35, 0x06, 0xa0, 0x03, 0, 0xff, 0x25, 0xe0, 0x9f, 0x03, 0}
	data = append(append(append(append([]byte{}, plt0...), entry...), entry...), tlsdesc...)
	res, err = translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x1020, Data: data, EntSize: 16}}}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, sframe.Function{Start: 0x1050, Size: 16, Rows: []sframe.Row{{Start: 0, CFA: spLoc(8), RA: fixedRA()}, {Start: 10, CFA: spLoc(16), RA: fixedRA()}}})
	if d := cmp.Diff(want, res.Funcs); d != "" {
		t.Errorf("x86-64 .plt with a TLSDESC trampoline (-want +got):\n%s", d)
	}
	// Entries unlike each other on both sides: no PCMASK of one.
	data = append(append(append(append([]byte{}, plt0...), entry...), tlsdesc...), entry...)
	res, err = translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x1020, Data: data, EntSize: 16}}}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Funcs {
		if f.PCType == sframe.PCMask {
			t.Errorf("alternating entries: PCMASK function %+v", f)
		}
	}
	if len(res.Funcs) != 4 {
		t.Errorf("alternating entries: %d functions, want 4", len(res.Funcs))
	}

	le := func(ws ...uint32) []byte {
		var b []byte
		for _, w := range ws {
			b = binary.LittleEndian.AppendUint32(b, w)
		}
		return b
	}
	// PLT0: stp x16,x30,[sp,#-16]!; adrp x16; ldr x17,[x16]; add x16; br x17; nop x3
	// PLTn: adrp x16; ldr x17,[x16]; add x16; br x17
	a0 := le(0xa9bf7bf0, 0x90000090, 0xf947fe11, 0x913fe210, 0xd61f0220, 0xd503201f, 0xd503201f, 0xd503201f)
	an := le(0x90000090, 0xf9400211, 0x91000210, 0xd61f0220)
	res, err = translateAll(Input{Machine: elf.EM_AARCH64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x400, Data: append(append(a0, an...), an...)}}}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = []sframe.Function{
		{Start: 0x400, Size: 32, Rows: []sframe.Row{{Start: 0, CFA: armSP(0)}, {Start: 4, CFA: armSP(16), RA: cfaAt(-8)}}},
		{Start: 0x420, Size: 32, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{{Start: 0, CFA: armSP(0)}}},
	}
	if d := cmp.Diff(want, res.Funcs); d != "" {
		t.Errorf("AArch64 .plt (-want +got):\n%s", d)
	}

	// A static executable's IRELATIVE stubs, without PLT0: GNU ld's .plt
	// and lld's .iplt (seen on the kernel's unwinder: with the stubs
	// taken for PLT0, the section was left out, and a sample in a stub
	// fell back to the frame pointer).
	for _, name := range []string{".plt", ".iplt"} {
		res, err = translateAll(Input{Machine: elf.EM_AARCH64, Order: binary.LittleEndian, PLTs: []PLT{{Name: name, Addr: 0x4002a0, Data: append(append(append(an, an...), an...), an...)}}}, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want = []sframe.Function{
			{Start: 0x4002a0, Size: 64, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{{Start: 0, CFA: armSP(0)}}},
		}
		if d := cmp.Diff(want, res.Funcs); d != "" || len(res.Diags) != 0 {
			t.Errorf("AArch64 static %s (-want +got):\n%s\ndiagnostics %v", name, d, res.Diags)
		}
	}

	// BTI PLT0 and -z pac-plt entries of 24 bytes (sh_entsize 0, as ld
	// leaves it): two entries are 48 bytes, which 16 divides too.
	b0 := le(0xd503245f, 0xa9bf7bf0, 0xf00000f0, 0xf947fe11, 0x913fe210, 0xd61f0220, 0xd503201f, 0xd503201f)
	pac := le(0x90000110, 0xf9400211, 0xd503201f, 0xd503219f, 0xd61f0220, 0xd503201f)
	res, err = translateAll(Input{Machine: elf.EM_AARCH64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x540, Data: append(append(b0, pac...), pac...)}}}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = []sframe.Function{
		{Start: 0x540, Size: 32, Rows: []sframe.Row{{Start: 0, CFA: armSP(0)}, {Start: 8, CFA: armSP(16), RA: cfaAt(-8)}}},
		{Start: 0x560, Size: 48, PCType: sframe.PCMask, RepSize: 24, Rows: []sframe.Row{{Start: 0, CFA: armSP(0)}}},
	}
	if d := cmp.Diff(want, res.Funcs); d != "" || len(res.Diags) != 0 {
		t.Errorf("AArch64 BTI/PAC .plt (-want +got):\n%s\ndiagnostics %v", d, res.Diags)
	}

	// GNU ld's s390x PLT (objdump -d of a program it linked): PLT0 and
	// 32-byte entries, none of which touches r15 or r14. ld's own SFrame
	// for it (when it writes one) is the same: PLT0, then one PCMASK FDE,
	// CFA sp+160 throughout.
	s0 := []byte{0xe3, 0x10, 0xf0, 0x38, 0x00, 0x24, 0xc0, 0x10, 0x00, 0x01, 0x3c, 0x3d, 0xd2, 0x07, 0xf0, 0x30,
		0x10, 0x08, 0xe3, 0x10, 0x10, 0x10, 0x00, 0x04, 0x07, 0xf1, 0x07, 0x00, 0x07, 0x00, 0x07, 0x00}
	sn := []byte{0xc0, 0x10, 0x00, 0x01, 0x3c, 0x50, 0xe3, 0x10, 0x10, 0x00, 0x00, 0x04, 0x07, 0xf1, 0x0d, 0x10,
		0xe3, 0x10, 0x10, 0x0c, 0x00, 0x14, 0xc0, 0xf4, 0xff, 0xff, 0xff, 0xe5, 0x00, 0x00, 0x00, 0x18}
	for _, entsize := range []uint64{32, 0} {
		res, err = translateAll(Input{Machine: elf.EM_S390, Order: binary.BigEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x740, Data: append(append(s0, sn...), sn...), EntSize: entsize}}}, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want = []sframe.Function{
			{Start: 0x740, Size: 32, Rows: []sframe.Row{{Start: 0, CFA: s390SP(160)}}},
			{Start: 0x760, Size: 64, PCType: sframe.PCMask, RepSize: 32, Rows: []sframe.Row{{Start: 0, CFA: s390SP(160)}}},
		}
		if d := cmp.Diff(want, res.Funcs); d != "" || len(res.Diags) != 0 {
			t.Errorf("s390x .plt, sh_entsize %d (-want +got):\n%s\ndiagnostics %v", entsize, d, res.Diags)
		}
	}
	// An s390x entry that moves the stack pointer (aghi %r15,-160 in
	// front): left to its CFI with a diagnostic.
	bad := append([]byte{0xa7, 0xfb, 0xff, 0x60}, sn[:28]...)
	res, _ = translateAll(Input{Machine: elf.EM_S390, Order: binary.BigEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x740, Data: append(append([]byte{}, s0...), bad...), EntSize: 32}}}, nil, Options{})
	if len(res.Funcs) != 0 || len(res.Diags) != 1 || res.Diags[0].Reason != PLTUnknown || !strings.Contains(res.Diags[0].Detail, "entry 0") {
		t.Errorf("s390x .plt with an unknown entry: funcs %+v diags %+v", res.Funcs, res.Diags)
	}
	// A static executable's .plt (GNU ld, no IBT) holds only the IRELATIVE
	// entries glibc's IFUNCs are called through, bound at startup: no
	// PLT0, 8-byte entries jmp *GOT(%rip); xchg %ax,%ax, sh_entsize 0,
	// entered by a call (CFA rsp+8 throughout). The first 16 bytes are two
	// entries, not a PLT0 (taking them for one said rsp+16 there, and a
	// kernel walk from a sample in the first stub read the wrong return
	// address); an odd number of entries is still a PLT (it was left out).
	iplt := []byte{0xff, 0x25, 0xe2, 0x2f, 0x0a, 0, 0x66, 0x90}
	for _, n := range []int{2, 3, 24, 25} {
		data := bytes.Repeat(iplt, n)
		res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x401018, Data: data}}}, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := []sframe.Function{{Start: 0x401018, Size: uint32(8 * n), PCType: sframe.PCMask, RepSize: 8, Rows: []sframe.Row{{Start: 0, CFA: spLoc(8), RA: fixedRA()}}}}
		if d := cmp.Diff(want, res.Funcs); d != "" || len(res.Diags) != 0 {
			t.Errorf("static .plt of %d entries (-want +got):\n%s\ndiagnostics %v", n, d, res.Diags)
		}
	}
	// The same with IBT (-z ibtplt): endbr64; bnd jmp *GOT(%rip); nop, 16
	// bytes.
	ibt := []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xe2, 0x2f, 0x0a, 0, 0x0f, 0x1f, 0x44, 0, 0}
	res, err = translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: []PLT{{Name: ".plt", Addr: 0x401020, Data: bytes.Repeat(ibt, 3)}}}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want = []sframe.Function{{Start: 0x401020, Size: 48, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{{Start: 0, CFA: spLoc(8), RA: fixedRA()}}}}
	if d := cmp.Diff(want, res.Funcs); d != "" || len(res.Diags) != 0 {
		t.Errorf("static IBT .plt (-want +got):\n%s\ndiagnostics %v", d, res.Diags)
	}

	// Unknown instructions: a diagnostic, no description.
	res, _ = translateAll(Input{Machine: elf.EM_X86_64, PLTs: []PLT{{Name: ".plt.sec", Addr: 0x5000, Data: make([]byte, 16)}}}, nil, Options{})
	if len(res.Funcs) != 0 || len(res.Diags) != 1 || res.Diags[0].Reason != PLTUnknown {
		t.Errorf("zeroed .plt.sec: funcs %+v diags %+v", res.Funcs, res.Diags)
	}
}

// TestPLTFromCFI: without section headers the lazy PLT is known only from
// GNU ld's FDE, whose last row is the PC-dependent expression.
func TestPLTFromCFI(t *testing.T) {
	expr := []byte{0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22} // rsp+8 + ((rip&15)>=11)<<3
	tab := table(x86CIE, 0x1020, 0x30,
		cfi.Row{Loc: 0x1020, CFA: cfaReg(7, 16), Regs: []cfi.RegRule{ripSaved}},
		cfi.Row{Loc: 0x1026, CFA: cfaReg(7, 24), Regs: []cfi.RegRule{ripSaved}},
		cfi.Row{Loc: 0x1030, CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: expr}, Regs: []cfi.RegRule{ripSaved}})
	res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian}, []*cfi.Table{tab}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []sframe.Function{
		{Start: 0x1020, Size: 16, Rows: []sframe.Row{{Start: 0, CFA: spLoc(16), RA: fixedRA()}, {Start: 6, CFA: spLoc(24), RA: fixedRA()}}},
		{Start: 0x1030, Size: 32, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{{Start: 0, CFA: spLoc(8), RA: fixedRA()}, {Start: 11, CFA: spLoc(16), RA: fixedRA()}}},
	}
	if d := cmp.Diff(want, res.Funcs); d != "" || skippedCount(res.Result) != 0 || res.PLTFuncs != 2 {
		t.Errorf("(-want +got):\n%s\n%+v", d, res.Diags)
	}
	// Misaligned: not a PLT shape we can map to PCMASK; skipped as an expression.
	tab.Rows[2].Loc = 0x1031
	res, _ = translateAll(Input{Machine: elf.EM_X86_64}, []*cfi.Table{tab}, Options{})
	if len(res.Funcs) != 0 || res.Diags[0].Reason != CFAExpression {
		t.Errorf("misaligned PLT expression: %+v %+v", res.Funcs, res.Diags)
	}
}

// TestPLTCFIDisagrees: CFI covering a PLT is replaced by the instructions'
// description; where the two differ a remark says so (not a skip).
func TestPLTCFIDisagrees(t *testing.T) {
	gotEntry := []byte{0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x66, 0x90} // jmp *GOT(%rip); xchg %ax,%ax
	plts := []PLT{{Name: ".plt.got", Addr: 0x2000, Data: append(append([]byte{}, gotEntry...), gotEntry...), EntSize: 8}}
	want := []sframe.Function{{Start: 0x2000, Size: 16, PCType: sframe.PCMask, RepSize: 8, Rows: []sframe.Row{{CFA: spLoc(8), RA: fixedRA()}}}}
	pltExpr := []byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22} // rsp+8 (+8 once (rip&15) >= 11)
	tests := []struct {
		name  string
		rows  []cfi.Row
		diag  bool
		first uint64
	}{
		{"CFI agrees (rsp+8)", []cfi.Row{{Loc: 0x2000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}}}, false, 0},
		{"CFI says rsp+16 (GNU ld's .plt.got SFrame bug)", []cfi.Row{{Loc: 0x2000, CFA: cfaReg(7, 16), Regs: []cfi.RegRule{ripSaved}}}, true, 0x2000},
		{"CFI differs from the second entry on", []cfi.Row{
			{Loc: 0x2000, CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}},
			{Loc: 0x2008, CFA: cfaReg(6, 16), Regs: []cfi.RegRule{ripSaved}}}, true, 0x2008},
		{"16-byte lazy-PLT expression on 8-byte entries: rsp+16 at 0x200b", []cfi.Row{
			{Loc: 0x2000, CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: pltExpr}, Regs: []cfi.RegRule{ripSaved}}}, true, 0x200b},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: plts},
				[]*cfi.Table{table(x86CIE, 0x2000, 16, tc.rows...)}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, res.Funcs); d != "" {
				t.Errorf("functions (-want +got):\n%s", d)
			}
			if res.Converted != 0 || skippedCount(res.Result) != 0 || res.PLTFuncs != 1 {
				t.Errorf("converted %d skipped %d PLT %d: want 0, 0, 1", res.Converted, skippedCount(res.Result), res.PLTFuncs)
			}
			if !tc.diag {
				if len(res.Diags) != 0 {
					t.Errorf("diagnostics %v, want none", res.Diags)
				}
				return
			}
			if len(res.Diags) != 1 {
				t.Fatalf("diagnostics %v, want one", res.Diags)
			}
			d := res.Diags[0]
			if d.Reason != PLTCFIDisagrees || d.Skipped || d.PC != tc.first || d.Symbol != ".plt.got" || !strings.Contains(d.Detail, "rsp+8") {
				t.Errorf("diagnostic %+v: want %s at %#x, not skipped, naming .plt.got and rsp+8", d, PLTCFIDisagrees, tc.first)
			}
		})
	}
}

// TestSignalOutermost: a signal frame whose CFI cannot be described gets, on
// request and with V3 only, an FDE with the signal bit and one FRE without
// data words (GNU as 2.47 writes none, which the kernel refuses); it is
// still reported as skipped.
func TestSignalOutermost(t *testing.T) {
	sigCIE := &cfi.CIE{RAColumn: 16, Signal: true}
	// CFA = DW_OP_breg7 0; DW_OP_lit8; DW_OP_plus: not a form SFrame has.
	cfaExpr := cfi.CFA{Kind: cfi.CFAExpression, Expr: []byte{0x77, 0x00, 0x38, 0x22}}
	tests := []struct {
		name    string
		cie     *cfi.CIE
		version uint8
		on      bool
		want    []sframe.Function
	}{
		{"V3, on", sigCIE, 3, true, []sframe.Function{{Start: 0x3000, Size: 0x10, Signal: true, Rows: []sframe.Row{{RAUndefined: true}}}}},
		{"V3, off", sigCIE, 3, false, nil},
		{"V2, on: V2 has no signal bit", sigCIE, 2, true, nil},
		{"V3, on, not a signal frame", x86CIE, 3, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian},
				[]*cfi.Table{table(tc.cie, 0x3000, 0x10, cfi.Row{Loc: 0x3000, CFA: cfaExpr, Regs: []cfi.RegRule{ripSaved}})},
				Options{Version: tc.version, SignalOutermost: tc.on})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, res.Funcs); d != "" {
				t.Errorf("functions (-want +got):\n%s", d)
			}
			if skippedCount(res.Result) != 1 || res.Converted != 0 || len(res.Diags) != 1 || res.Diags[0].Reason != CFAExpression || !res.Diags[0].Skipped {
				t.Errorf("skipped %d converted %d diags %v: want one skipped %s", skippedCount(res.Result), res.Converted, res.Diags, CFAExpression)
			}
			if len(tc.want) > 0 {
				b, err := sframe.Encode(res.Funcs, sframe.Options{Version: 3, ABI: res.ABI, Order: binary.LittleEndian, PCRel: true, Sort: true,
					CFAFixedFP: res.CFAFixedFP, CFAFixedRA: res.CFAFixedRA})
				if err != nil {
					t.Fatal(err)
				}
				sec, err := sfsection.Decode(b, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(sec.FDEs) != 1 || !sec.FDEs[0].Signal || len(sec.FDEs[0].FREs) != 1 || sec.FDEs[0].FREs[0].Start != 0 || sec.FDEs[0].FREs[0].NumWords != 0 {
					t.Errorf("encoded: %+v, want one signal FDE with one FRE at 0 without data words", sec.FDEs)
				}
				// The kernel's unwinder removes a section at a lookup in
				// an FDE without FREs; this one it takes.
				if r := acceptance.Check(acceptance.Kernel, acceptance.Input{Section: b}); !r.OK() {
					t.Errorf("kernel rules: %v", r.Violations)
				}
			}
		})
	}
}
