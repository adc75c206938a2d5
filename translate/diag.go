package translate

import "fmt"

// A Reason says why a function, or part of one, has no SFrame description.
// The string values are stable: they appear in --diagnostics json output
// and in reports.
//
// Besides the constants below, the FDE a Go function gets from its
// program's function table may carry a note (cfi.FDE.Note), reported as
// a remark (Diagnostic.Skipped false) with the note's code as its reason:
// go-stack-switch (the function switches stacks, and its return address
// is undefined: a walk ends there), go-outermost (a goroutine's or a
// thread's stack begins there: runtime.goexit, runtime.mstart,
// runtime.rt0_go, _rt0_*, TopFrame functions) and go-fp-unknown (where it
// saves the frame pointer was not found: its frame pointer reads as
// unchanged). An FDE made from the instructions (cfi.Options.FromCode)
// carries the remark from-code; the code the analysis left out is
// reported by the caller (cfi.File.Left), Skipped, with its code-*
// reason (code-states-differ, code-cfa-lost, code-undecodable,
// code-data, code-indirect-jump, code-fp-lost, code-ra-lost,
// code-stack-switch, code-bad-return, code-outside, code-limit, ...).
type Reason string

// Reasons a CFI rule cannot be expressed in SFrame.
const (
	// CFAExpression: the CFA is a DWARF expression other than
	// DW_OP_bregN off [DW_OP_deref].
	CFAExpression Reason = "cfa-expression"
	// CFARegister: the CFA is based on a register other than SP or FP
	// (expressible only in a V3 flexible FDE, on AMD64 and s390x).
	CFARegister Reason = "cfa-register"
	// CFADeref: the CFA is loaded from memory, as in DRAP code
	// (expressible only in a V3 flexible FDE).
	CFADeref Reason = "cfa-deref"
	// RANotAtFixedSlot: on AMD64 the return address is somewhere other than
	// CFA-8, which the format assumes for every row.
	RANotAtFixedSlot Reason = "ra-not-at-fixed-slot"
	// RARegister: the return address lives in another register
	// (V3 flexible FDE only, on AMD64 and s390x; s390x V2 has a
	// register-number form; a flexible FDE names registers 0-31 only).
	RARegister Reason = "ra-register"
	// RAExpression: the return address rule is a DWARF expression, a
	// val_offset or a val_expression that SFrame cannot carry.
	RAExpression Reason = "ra-expression"
	// FPRegister: the frame pointer lives in another register (V3 flexible
	// FDE only, as RARegister).
	FPRegister Reason = "fp-register"
	// FPExpression: the frame pointer rule is an expression, val_offset or
	// val_expression that SFrame cannot carry.
	FPExpression Reason = "fp-expression"
	// FPWithoutRA: AArch64 saves FP on the stack while RA stays in a
	// register; the default FDE layout puts FP after RA.
	FPWithoutRA Reason = "fp-without-ra"
	// SPRule: the stack pointer is restored by something other than the CFA.
	SPRule Reason = "sp-rule"
	// UndefinedFPOrSP: FP or SP is marked undefined.
	UndefinedFPOrSP Reason = "undefined-fp-or-sp"
	// ReturnColumn: the CIE's return-address column is not the ABI's.
	ReturnColumn Reason = "return-column"
	// OffsetRange: an offset does not fit a signed 32-bit data word.
	OffsetRange Reason = "offset-range"
	// OffsetAlignment: an s390x offset the encoding cannot hold: a CFA
	// offset that is not 160 plus a multiple of 8 (it is stored as
	// (offset-160)/8), or in V2 an odd RA or FP slot offset (V2 reads an
	// odd value as a register number).
	OffsetAlignment Reason = "offset-alignment"
	// TooManyRows: more FREs than the format's 16-bit count holds.
	TooManyRows Reason = "too-many-rows"
	// FunctionSize: the function is larger than a 32-bit size field holds.
	FunctionSize Reason = "function-size"
	// RAStateWithPC: DW_CFA_AARCH64_negate_ra_state_with_pc (PAuth_LR),
	// which SFrame has no way to describe.
	RAStateWithPC Reason = "ra-state-with-pc"
	// ArgsSize: DW_CFA_GNU_args_size with a non-zero size while the CFA is
	// based on the stack pointer; GNU as does not emit an SFrame FDE for
	// such a function either (the pushed outgoing arguments may not be in
	// the CFA rule).
	ArgsSize Reason = "args-size"
	// Outermost: the return address is undefined at every PC of the
	// function (the outermost frame, such as _start), and
	// Options.OutermostGap leaves such PCs without an FRE, so the
	// function gets no FDE at all.
	Outermost Reason = "outermost"
	// BadCFI: the CFI itself could not be parsed or executed.
	BadCFI Reason = "bad-cfi"
	// Overlap: the FDE's range overlaps one already described.
	Overlap Reason = "overlap"
	// PLTUnknown: a PLT section whose instructions are not a known stub
	// shape; it is left to its CFI, if any.
	PLTUnknown Reason = "plt-unknown"
	// PLTCFIDisagrees: the CFI covering a PLT says something other than its
	// instructions do; the instructions win.
	PLTCFIDisagrees Reason = "plt-cfi-disagrees"
)

// A Diagnostic reports one function (or PLT section) that was skipped or
// described only in part.
type Diagnostic struct {
	Start  uint64 `json:"start"`            // function start address
	End    uint64 `json:"end"`              // function end address
	Symbol string `json:"symbol,omitempty"` // symbol covering Start, if known
	PC     uint64 `json:"pc"`               // first PC where the rule applies
	Reason Reason `json:"reason"`
	Detail string `json:"detail,omitempty"` // the offending rule, readable
	// Skipped: the function has no SFrame description. When false the
	// diagnostic is a remark on a function that was described (a PLT whose
	// CFI disagrees with its instructions, say).
	Skipped bool `json:"skipped"`
}

func (d Diagnostic) String() string {
	name := d.Symbol
	if name == "" {
		name = fmt.Sprintf("%#x", d.Start)
	}
	s := fmt.Sprintf("%s [%#x,%#x) at %#x: %s", name, d.Start, d.End, d.PC, d.Reason)
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	return s
}
