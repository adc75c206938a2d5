package codecheck

import (
	"debug/elf"
	"fmt"
	"slices"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// abi is what the judge needs of an instruction set: the DWARF numbers
// of the stack and frame pointers, and the registers' names for words.
type abi struct {
	sp, fp  uint64
	names   func(reg uint64) string
	entrySP int64 // the stack pointer at a function's entry, as CFA+entrySP
}

func abiOf(m elf.Machine) (abi, error) {
	switch m {
	case elf.EM_X86_64:
		return abi{sp: 7, fp: 6, names: x86Name, entrySP: -8}, nil
	case elf.EM_AARCH64:
		return abi{sp: 31, fp: 29, names: arm64Name}, nil
	}
	return abi{}, &Error{Msg: fmt.Sprintf("machine %v: the code analysis knows x86-64 and AArch64 only", m)}
}

var x86Names = [...]string{"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip"}

func x86Name(reg uint64) string {
	if reg < uint64(len(x86Names)) {
		return x86Names[reg]
	}
	return fmt.Sprintf("r%d", reg)
}

func arm64Name(reg uint64) string {
	switch {
	case reg == 31:
		return "sp"
	case reg == 29:
		return "x29 (fp)"
	case reg == 30:
		return "x30 (lr)"
	case reg < 31:
		return fmt.Sprintf("x%d", reg)
	}
	return fmt.Sprintf("r%d", reg)
}

// refRow is what one CFI row says of the frame, copied out of the cfi
// Context's reused table.
type refRow struct {
	loc     uint64
	cfaExpr bool // DW_CFA_def_cfa_expression: not judged
	cfaReg  uint64
	cfaOff  int64
	fp, ra  cfi.Rule
	mangled bool
}

// refFunc is one FDE: its range and rows.
type refFunc struct {
	start, end uint64
	bKey       bool // the CIE's 'B': the return address signed with the B key
	rows       []refRow
}

// rowAt is the row in effect at pc, which must be in [start, end).
func (f *refFunc) rowAt(pc uint64) *refRow {
	i := sort.Search(len(f.rows), func(i int) bool { return f.rows[i].loc > pc }) - 1
	if i < 0 {
		return nil
	}
	return &f.rows[i]
}

// reference reads the CFI of an ELF file into its FDEs sorted by start.
// An FDE that does not execute is left out, as translate leaves it out.
func reference(elfBytes []byte, a abi) ([]refFunc, error) {
	f, err := cfi.OpenBytes(elfBytes)
	if err != nil {
		return nil, &Error{Msg: "reading the CFI", Err: err}
	}
	entries := slices.Clone(f.Entries())
	cfi.SortEntries(entries)
	ctx := f.Context(entries)
	var out []refFunc
	for {
		fde, err := ctx.Next()
		if err != nil {
			break // io.EOF: Next keeps the errors of the entries it passed over
		}
		if fde.Size == 0 {
			continue
		}
		t := ctx.Table()
		if t == nil {
			continue
		}
		rf := refFunc{start: fde.Start, end: fde.End(), bKey: fde.CIE.BKey}
		for i := range t.Rows {
			r := &t.Rows[i]
			rf.rows = append(rf.rows, refRow{
				loc: r.Loc, cfaExpr: r.CFA.Kind == cfi.CFAExpression,
				cfaReg: r.CFA.Reg, cfaOff: r.CFA.Offset,
				fp: r.Rule(a.fp), ra: r.Rule(fde.CIE.RAColumn), mangled: r.MangledRA,
			})
		}
		out = append(out, rf)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out, nil
}

// refAt is the FDE that covers pc, or nil.
func refAt(refs []refFunc, pc uint64) *refFunc {
	i := sort.Search(len(refs), func(i int) bool { return refs[i].start > pc }) - 1
	if i >= 0 && pc < refs[i].end {
		return &refs[i]
	}
	return nil
}

// text gives the bytes of the executable code from addr to the end of
// its range, or nil.
func text(c *codeflow.Code, addr uint64) []byte {
	for _, r := range c.Text {
		if addr >= r.Addr && addr-r.Addr < uint64(len(r.Data)) {
			return r.Data[addr-r.Addr:]
		}
	}
	return nil
}

// starts lists the instruction starts in [lo, hi), decoding from lo on.
// Where an instruction does not decode (x86asm v0.30.0 knows no BMI2, for
// one), decoding starts again at the next of bounds (PCs known to start
// instructions: CFI row locations, the analysis's rows) and the bytes
// passed over are counted in undecoded; a bound the decoding stepped over
// is in missed.
func starts(c *codeflow.Code, lo, hi uint64, bounds []uint64) (pcs []uint64, undecoded int, missed []uint64) {
	set := map[uint64]bool{}
	for pc := lo; pc < hi; {
		n := instLen(c.Machine, text(c, pc))
		if n <= 0 || pc+uint64(n) > hi {
			next := hi
			for _, b := range bounds {
				if b > pc && b < next {
					next = b
				}
			}
			undecoded += int(next - pc)
			pc = next
			continue
		}
		pcs = append(pcs, pc)
		set[pc] = true
		pc += uint64(n)
	}
	for _, b := range bounds {
		if b >= lo && b < hi && !set[b] && !inUndecoded(c, b, lo, pcs) {
			missed = append(missed, b)
		}
	}
	return pcs, undecoded, missed
}

// inUndecoded says b lies in bytes starts passed over (after the last
// start before it, that instruction did not reach b): not decoded, so
// not known to be inside an instruction.
func inUndecoded(c *codeflow.Code, b, lo uint64, pcs []uint64) bool {
	i := sort.Search(len(pcs), func(i int) bool { return pcs[i] > b }) - 1
	if i < 0 {
		return true
	}
	return pcs[i]+uint64(instLen(c.Machine, text(c, pcs[i]))) <= b
}

// instLen is the length of the instruction at the start of b, or 0 when
// it does not decode.
func instLen(m elf.Machine, b []byte) int {
	switch m {
	case elf.EM_AARCH64:
		// Every instruction is four bytes: no decoding is needed to find
		// the starts (arm64asm v0.30.0 does not know retaa, say, and
		// the analysis judges what it decodes itself).
		if len(b) < 4 {
			return 0
		}
		return 4
	case elf.EM_X86_64:
		// x86asm v0.30.0 takes endbr64 (f3 0f 1e fa) for a lone REP
		// prefix one byte long: its four bytes are one instruction.
		if len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb) {
			return 4
		}
		in, err := isa.AMD64(b)
		if err != nil || in.Op == 0 {
			return 0
		}
		return isa.LenAMD64(in, b)
	}
	return 0
}
