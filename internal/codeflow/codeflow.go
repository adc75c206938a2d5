// Package codeflow derives frame rules from machine code that no CFI and
// no Go table describe (hand-written assembly, C++ built without unwind
// tables), as objtool does for the kernel: from each function's entry it
// follows every path through the instructions, one state per instruction
// (where the stack pointer, the frame pointer and the caller's frame
// pointer and return address are, each as a distance from the CFA), and
// gives the rows that hold at each instruction reached. What it cannot
// prove it leaves out, with a reason: a wrong row is worse than none.
//
// Registers are numbered as DWARF numbers them (x86-64: 0-15, RSP 7, RBP
// 6; AArch64: X0-X30, SP 31, FP 29, LR 30), so that a Row reads as a CFI
// row.
package codeflow

import (
	"debug/elf"
	"encoding/binary"
)

// Val is what the analysis knows of a register: when Known, it holds
// CFA + Off (a frame address). An unknown register holds anything else.
type Val struct {
	Off   int64
	Known bool
}

// Where says where the caller's value of a register (the frame pointer,
// the return address) is.
type Where uint8

const (
	// InReg: still in its own register: the frame pointer unchanged, or
	// on AArch64 the return address still in LR.
	InReg Where = iota
	// OnStack: saved at CFA + Off.
	OnStack
	// Lost: neither (overwritten without a save); a row cannot be given.
	Lost
)

// Saved is where a caller's value is.
type Saved struct {
	Where Where
	Off   int64 // OnStack: at CFA + Off
}

// NRegs is the size of State.Regs: every general register of x86-64
// (0-15) and AArch64 (0-31, SP included).
const NRegs = 32

// State is what the analysis knows before an instruction runs.
type State struct {
	Regs [NRegs]Val // by DWARF number; SP and FP among them
	FP   Saved      // the caller's frame pointer
	RA   Saved      // the return address (x86-64: always OnStack at CFA-8)
	// RASigned: AArch64, the return address in LR or its slot is signed
	// (PAC: paciasp/pacibsp ran, autiasp/autibsp not yet).
	RASigned bool
	// BKey: AArch64, RASigned with the B key (pacibsp), not the A key;
	// false while the return address is not signed.
	BKey bool
}

// Base is the register a CFA rule counts from.
type Base uint8

const (
	BaseSP Base = iota
	BaseFP
)

// Row is the rule from PC on, up to the next row (or the Func's End): the
// CFA is Base + CFAOff; FP and RA say where the caller's frame pointer and
// return address are. SP and FPVal are what the analysis knew of the
// stack and frame pointers there, so that a check can judge a rule given
// from the other base.
type Row struct {
	PC       uint64
	Base     Base
	CFAOff   int64
	FP, RA   Saved
	RASigned bool
	BKey     bool // AArch64: signed with the B key (SFrame records it per function)
	SP       Val
	FPVal    Val
}

// Func is a run of instructions the analysis reached from one entry, all
// with a known rule: [Start, End), its rows in PC order, the first at
// Start. A function's unreached bytes (padding, code only a table it
// could not resolve reaches) are in none, so one function may give
// several Funcs; a part of it elsewhere (GCC's foo.cold, reached by a
// jump with the frame in place) gives its own.
type Func struct {
	Start, End uint64
	Entry      uint64 // the function entry whose walk reached it
	Rows       []Row
}

// Reason says why code was left out.
type Reason string

// The reasons a function (or a part of one) is left out.
const (
	// ReasonStates: two paths reach an instruction with different states.
	ReasonStates Reason = "code-states-differ"
	// ReasonCFALost: neither SP nor FP has a known distance from the CFA
	// (it is held only in another register, or nowhere).
	ReasonCFALost Reason = "code-cfa-lost"
	// ReasonUndecodable: an instruction on a reachable path does not decode.
	ReasonUndecodable Reason = "code-undecodable"
	// ReasonData: the bytes look like data (a constant table in .text).
	ReasonData Reason = "code-data"
	// ReasonIndirect: a jump through a register or memory that is neither
	// a tail call nor a jump table whose bounds were found.
	ReasonIndirect Reason = "code-indirect-jump"
	// ReasonFPLost, ReasonRALost: the caller's frame pointer or return
	// address overwritten while not saved.
	ReasonFPLost Reason = "code-fp-lost"
	ReasonRALost Reason = "code-ra-lost"
	// ReasonStackSwitch: SP set to a value unrelated to the frame (a
	// stack switch, a longjmp).
	ReasonStackSwitch Reason = "code-stack-switch"
	// ReasonReturn: a return with the stack not at the entry's state.
	ReasonReturn Reason = "code-bad-return"
	// ReasonOutside: a path runs out of the executable code.
	ReasonOutside Reason = "code-outside"
	// ReasonShared: two walks reach the same code; one of them entered
	// code that is not its own (a call taken to return that does not, a
	// jump-table target taken for a function), and which cannot be told.
	ReasonShared Reason = "code-shared"
	// ReasonNotEntry: a weak entry (FromPadding) whose walk shows it is
	// not a function's start.
	ReasonNotEntry Reason = "code-not-entry"
	// ReasonLimit: the function is over the analysis's size limit.
	ReasonLimit Reason = "code-limit"
)

// Skip is code left out: [Start, End) (the function's extent as its entry
// source knew it, or as far as the walk went), the reason, the
// instruction where it was found, and a detail in words.
type Skip struct {
	Start, End uint64
	Entry      uint64
	Reason     Reason
	At         uint64
	Detail     string
}

// Source says how a function entry was found, strongest first.
type Source uint8

const (
	FromSymbol    Source = iota // .symtab or .dynsym (STT_FUNC)
	FromDebugFile               // the separate debug file's .symtab
	FromGap                     // the start of a gap between FDEs
	FromCall                    // a direct call's target
	FromTailCall                // a tail call's target, proven by the walk of its caller (Analyze)
	FromPointer                 // a relocation or pointer into code
	FromPadding                 // the first byte after a padding run (weak)
)

// Entry is a function's start, End its end when its source knows it
// (a symbol's size, the next FDE), 0 otherwise.
type Entry struct {
	Addr, End uint64
	Source    Source
}

// Range is executable code: its bytes and the address of the first.
type Range struct {
	Addr uint64
	Data []byte
}

// Code is what the analysis reads of a file.
type Code struct {
	Machine elf.Machine
	Order   binary.ByteOrder
	Text    []Range // the executable sections, sorted by address
	// Read gives n bytes at addr from a loaded, non-writable section
	// (jump tables), or nil when there are none there.
	Read func(addr uint64, n int) []byte
	// Refs are the addresses of read-only data (outside the code) that an
	// instruction or a data word of the file references, sorted, each
	// once: where one object ends and another starts, for a jump table
	// bounded by its content (amd64table.go). nil: none known, and no
	// table is bounded so.
	Refs []uint64
	// Entries are the function starts, sorted by Addr, one per address.
	Entries []Entry
	// NoReturn says a call to addr does not return (the PLT stub or the
	// function of exit, abort, __stack_chk_fail, ...).
	NoReturn func(addr uint64) bool
	// Data says addr is data inside the executable code (AArch64's $d
	// mapping symbols mark literal pools and tables): a path that
	// reaches it is left out (ReasonData). nil: none known.
	Data func(addr uint64) bool
	// Described says [lo, hi) is described by CFI or a Go table: its
	// entries are not analysed, and a walk that reaches it stops there.
	Described func(lo, hi uint64) bool
}
