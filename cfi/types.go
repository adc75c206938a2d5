// Package cfi parses DWARF call-frame information (.eh_frame and
// .debug_frame) and executes each FDE's CFA program into a table of rows:
// from each row's PC on, how to find the CFA and every register's caller
// value.
//
// Open (OpenBytes for a file in memory) finds an ELF file's call-frame
// sections and indexes their FDEs as Entries; a Context parses each
// again and executes it when it is reached, into one reused table
// (gimli's UnwindTable and UnwindContext). Parse does the same for a
// section's bytes given as a Section; a zero Context executes its FDEs.
//
// Data flows one way: ELF bytes (elfread) → cfi → translate → sframe.
package cfi

import (
	"encoding/binary"
	"sort"
	"strconv"
)

// kind says which flavour of call-frame section a Section holds.
type kind uint8

const (
	kindEH    kind = iota // .eh_frame: CIE id 0, CIE pointer relative, pointer encodings
	kindDebug             // .debug_frame: CIE id 0xffffffff, CIE pointer a section offset
	kindGo                // .debug_frame's format, made from a Go program's .gopclntab (goSection)
	kindCode              // .debug_frame's format, made from the instructions (codeSection)
)

func (k kind) String() string {
	switch k {
	case kindDebug:
		return ".debug_frame"
	case kindGo:
		return ".gopclntab"
	case kindCode:
		return ".text"
	}
	return ".eh_frame"
}

// Section is a call-frame section Open found (File.Sections): its bytes
// and what decoding them needs.
type Section struct {
	kind    kind
	data    []byte
	addr    uint64 // address of data[0] (for DW_EH_PE_pcrel)
	order   binary.ByteOrder
	ptrSize int    // 4 or 8: size of DW_EH_PE_absptr and of .debug_frame addresses
	textRel uint64 // base for DW_EH_PE_textrel (0 if unknown)
	dataRel uint64 // base for DW_EH_PE_datarel (0 if unknown)
	// untilTerminator stops the walk at the first zero-length record. Set
	// when the section's size is unknown (found through .eh_frame_hdr in a
	// file without section headers) and the bytes after it are not CFI.
	untilTerminator bool
	// goNotes are the notes on a Go program's functions (kindGo), by
	// entry: FDE.Note.
	goNotes map[uint64]goNote
	// codeEntries are, for the FDEs made from code (kindCode), the entry
	// whose walk reached each, by FDE start: FDE.Note.
	codeEntries map[uint64]uint64
}

// Name is the section's name: .eh_frame or .debug_frame (also for an
// .eh_frame found by its type or through PT_GNU_EH_FRAME), .gopclntab
// for the CFI made from a Go program's function table, or .text for the
// rules made from the instructions (Options.FromCode).
func (s *Section) Name() string { return s.kind.String() }

// CIE is a common information entry.
type CIE struct {
	Offset       int64 // section offset of the length field
	version      uint8
	augmentation string
	addrSize     uint8 // version 4
	segSize      uint8 // version 4
	CodeAlign    uint64
	DataAlign    int64
	RAColumn     uint64
	fdeEnc       uint8 // DW_EH_PE_* of FDE addresses ('R'; absptr otherwise)
	lsdaEnc      uint8 // 'L'
	personality  uint64
	Signal       bool   // 'S': frames of this CIE are signal frames
	BKey         bool   // 'B': AArch64 return addresses signed with the B key
	mteTagged    bool   // 'G': AArch64 MTE-tagged stack frames
	Initial      []byte // initial instructions

	initOff int // offset of Initial in the section
	// The augmentation's 'z' and 'L', looked up once for its FDEs.
	augZ, augL bool
}

// FDE is a frame description entry.
type FDE struct {
	Offset     int64 // section offset of the length field
	CIE        *CIE
	Start      uint64 // first PC covered
	Size       uint64 // number of bytes covered
	StartField int64  // section offset of the initial-location field (relocation lookup in ET_REL files)
	lsda       uint64
	Program    []byte // the FDE's instructions (after the augmentation data)

	sec     *Section // where Program lives (nil for hand-built FDEs)
	progOff int      // offset of Program in sec.data
}

// End is the first PC after the FDE.
func (f *FDE) End() uint64 { return f.Start + f.Size }

// RuleKind says how a register's caller value is recovered.
type RuleKind uint8

const (
	// SameValue: the register keeps its value (the default for registers
	// without a rule, and DW_CFA_same_value).
	SameValue     RuleKind = iota
	Undefined              // DW_CFA_undefined
	Offset                 // saved at CFA+Offset
	ValOffset              // value is CFA+Offset
	Register               // saved in register Reg
	Expression             // saved at the address computed by Expr (CFA pushed first)
	ValExpression          // value computed by Expr (CFA pushed first)
)

// Rule is the recovery rule of one register.
type Rule struct {
	Kind   RuleKind
	Reg    uint64 // Register
	Offset int64  // Offset, ValOffset (already multiplied by the data alignment)
	Expr   []byte // Expression, ValExpression: a DWARF expression, raw bytes
}

// CFAKind says how the CFA is computed.
type CFAKind uint8

const (
	CFARegOffset  CFAKind = iota // register Reg + Offset
	CFAExpression                // DW_CFA_def_cfa_expression: Expr
)

// CFA is the rule that computes the canonical frame address.
type CFA struct {
	Kind   CFAKind
	Reg    uint64
	Offset int64
	Expr   []byte
}

// RegRule is a register's rule.
type RegRule struct {
	Reg  uint64
	Rule Rule
}

// Row holds the rules from Loc up to the next row's Loc (or the FDE's end).
type Row struct {
	Loc uint64
	CFA CFA
	// Regs lists the registers whose rule is not SameValue-by-default,
	// sorted by register number. An explicit DW_CFA_same_value is listed.
	// Rows whose register rules are alike may share the cells: read only.
	Regs []RegRule
	// MangledRA is the AArch64 RA signing state (DW_CFA_AARCH64_negate_ra_state
	// toggles it; the CIE's initial instructions may too).
	MangledRA bool
	// RAStateWithPC marks DW_CFA_AARCH64_negate_ra_state_with_pc (PAuth_LR)
	// seen at or before this row.
	RAStateWithPC bool
	ArgsSize      uint64 // DW_CFA_GNU_args_size
	// touched records which rules the FDE's instructions set since the
	// previous row, whether or not the value changed. A row whose rules
	// equal the previous row's is kept only when something was touched.
	touched touch
}

// touch is the set of rules instructions set in one interval between
// location advances.
type touch struct {
	cfa          bool   // def_cfa*, def_cfa_expression
	raState      bool   // negate_ra_state (with or without PC)
	restoreState bool   // restore_state
	set          uint64 // registers 0-63 given a rule (offset, register, expression, undefined, same_value, val_*)
	restored     uint64 // registers 0-63 restored to the CIE's rule
}

// none says nothing was touched, field by field (see executor.flush).
func (t *touch) none() bool {
	return !t.cfa && !t.raState && !t.restoreState && t.set == 0 && t.restored == 0
}

func (t touch) or(u touch) touch {
	return touch{cfa: t.cfa || u.cfa, raState: t.raState || u.raState, restoreState: t.restoreState || u.restoreState,
		set: t.set | u.set, restored: t.restored | u.restored}
}

func bit(reg uint64) uint64 {
	if reg < 64 {
		return 1 << reg
	}
	return 0
}

// Touches says whether the instructions between the previous row and
// this one set a rule that starts a row in GNU as's SFrame output, even
// when it set the value the rule had: the CFA rule, the AArch64 RA
// signing state, a restore_state, the rule of register fp or ra, or
// (raRestore) a restore of ra's rule to the CIE's. A row whose rules
// equal the previous row's is kept in the table only when something was
// set; translate keeps such a row only when Touches says so.
func (r *Row) Touches(fp, ra uint64, raRestore bool) bool {
	t := &r.touched
	hit := t.set&bit(ra) != 0 || raRestore && t.restored&bit(ra) != 0
	return t.cfa || t.raState || t.restoreState || hit || (t.set|t.restored)&bit(fp) != 0
}

// Rule returns register reg's rule in the row (SameValue when none is set).
func (r *Row) Rule(reg uint64) Rule {
	lo, hi := 0, len(r.Regs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.Regs[m].Reg < reg {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(r.Regs) && r.Regs[lo].Reg == reg {
		return r.Regs[lo].Rule
	}
	return Rule{}
}

// Table is the executed CFA program of one FDE: rows in ascending Loc
// order, the first at FDE.Start; a row with the same Loc as the next one is
// never kept.
type Table struct {
	FDE  *FDE
	Rows []Row
	// LastAdvance is where the program's last location advance went, when
	// that is inside the FDE and after its start (0 otherwise). A row
	// starts there only if some rule changed afterwards; GNU as emits an
	// SFrame row there either way, which translate imitates.
	LastAdvance uint64

	regs   []RegRule // backing array of every row's Regs
	regOff []int32   // where each row's Regs start in regs (rows may share them)
}

// sharesRegs says whether row i's Regs are row i-1's, not its own copy:
// the same non-empty cells.
func (t *Table) sharesRegs(i int) bool {
	return i > 0 && t.regOff[i] == t.regOff[i-1] && len(t.Rows[i].Regs) > 0 && len(t.Rows[i].Regs) == len(t.Rows[i-1].Regs)
}

// RowAt returns the index of the row in effect at pc: the last one that
// starts at or before pc, or -1 when pc is before the first (whether pc is
// inside the FDE is the caller's to check).
func (t *Table) RowAt(pc uint64) int {
	return sort.Search(len(t.Rows), func(i int) bool { return t.Rows[i].Loc > pc }) - 1
}

// Error is a malformed record: which section, at which offset, what.
type Error struct {
	Section string // .eh_frame or .debug_frame
	Off     int64
	Msg     string
}

// Error formats it as readelf prints offsets, in hex: ".eh_frame: offset
// 0x1c: what".
func (e *Error) Error() string {
	return e.Section + ": offset " + hex(e.Off) + ": " + e.Msg
}

func hex(v int64) string {
	if v < 0 {
		return "-0x" + strconv.FormatUint(uint64(-v), 16)
	}
	return "0x" + strconv.FormatInt(v, 16)
}
