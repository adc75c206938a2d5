package goprologue

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// Arch names the instruction set of the code given to Analyze.
type Arch uint8

// The architectures Analyze knows.
const (
	AMD64 Arch = iota + 1
	ARM64
)

func (a Arch) String() string {
	switch a {
	case AMD64:
		return "amd64"
	case ARM64:
		return "arm64"
	}
	return fmt.Sprintf("Arch(%d)", uint8(a))
}

// SPRange says how far the stack pointer is below its value at the
// function's entry, Delta bytes, for the instructions starting in
// [Start, End): one row of Go's pcsp table, which gives the delta before
// the instruction at each PC runs.
type SPRange struct {
	Start, End uint64
	Delta      int64
}

// Rule says where the caller's frame pointer is from PC on, up to the
// next rule's PC: saved in the stack slot at CFA+Offset when Saved, or
// else still (or again) in the frame pointer register.
type Rule struct {
	PC     uint64
	Saved  bool
	Offset int64
}

// Kind is what Analyze found out about a function.
type Kind uint8

// The kinds of result.
const (
	// Described: the caller's frame pointer is saved over part of the
	// function and Rules say where.
	Described Kind = iota + 1
	// Frameless: the function never saves the frame pointer and never
	// writes it; it stays in its register throughout.
	Frameless
	// Unrecognized: the instructions do something with the frame pointer
	// or the stack pointer that Analyze does not follow; no rule is given.
	Unrecognized
)

func (k Kind) String() string {
	switch k {
	case Described:
		return "described"
	case Frameless:
		return "frameless"
	case Unrecognized:
		return "unrecognized"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Reason codes of an Unrecognized result.
const (
	// ReasonClobbered: the frame pointer register is written before the
	// caller's value was saved, so the value is lost.
	ReasonClobbered = "fp-clobbered"
	// ReasonNotRestored: the function returns or jumps to another
	// function without the caller's frame pointer back in its register.
	ReasonNotRestored = "fp-not-restored"
	// ReasonConflict: two paths reach one instruction with the frame
	// pointer in different places.
	ReasonConflict = "fp-conflict"
	// ReasonSPWrite: the stack pointer is set to a value that is not a
	// known distance from the entry's (a stack switch or realignment).
	ReasonSPWrite = "fp-sp-write"
	// ReasonSPMismatch: an instruction moves the stack pointer by a known
	// amount that the pcsp rows do not show.
	ReasonSPMismatch = "fp-sp-mismatch"
	// ReasonFallsOff: execution runs past the end of the code.
	ReasonFallsOff = "fp-falls-off"
	// ReasonBadTarget: a jump lands inside an instruction.
	ReasonBadTarget = "fp-bad-target"
)

// Result is what Analyze says of one function. Rules are in PC order,
// the first at the entry, each one where the location changes; they are
// set only when Kind is Described. An Unrecognized result has a Reason
// code and the PC and text of the instruction where it was found.
type Result struct {
	Kind   Kind
	Rules  []Rule
	Reason string
	PC     uint64
	Inst   string
}

func (r Result) String() string {
	switch r.Kind {
	case Unrecognized:
		return fmt.Sprintf("no frame pointer described: %s at %#x (%s)", r.Reason, r.PC, r.Inst)
	case Frameless:
		return "frame pointer never saved"
	}
	var parts []string
	for _, rl := range r.Rules {
		if rl.Saved {
			parts = append(parts, fmt.Sprintf("at CFA%+d from %#x", rl.Offset, rl.PC))
		} else {
			parts = append(parts, fmt.Sprintf("in its register from %#x", rl.PC))
		}
	}
	return "frame pointer: " + strings.Join(parts, "; ")
}

// DecodeError is returned when an instruction that the function can
// reach does not decode.
type DecodeError struct {
	PC  uint64
	Err error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("goprologue: cannot decode the instruction at %#x: %v", e.PC, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Analyze follows the code of one function, which starts at entry, and
// says where the caller's frame pointer is at each of its instructions.
// sp gives the stack pointer's distance below the entry's for every
// instruction of code. An instruction stream it does not follow gives an
// Unrecognized result, not an error; errors are for bad input and for
// reachable instructions that do not decode (a *DecodeError).
func Analyze(arch Arch, code []byte, entry uint64, sp []SPRange) (Result, error) {
	a, ok := arches[arch]
	if !ok {
		return Result{}, fmt.Errorf("goprologue: unknown architecture %v", arch)
	}
	if len(code) == 0 {
		return Result{}, errors.New("goprologue: no code")
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	insns := a.decode(code, entry, sc)
	f := &function{arch: a, insns: insns, entry: entry, end: entry + uint64(len(code))}
	if err := f.setDeltas(sp); err != nil {
		return Result{}, err
	}
	f.effects()
	if err := f.flow(); err != nil {
		return Result{}, err
	}
	if f.fail != nil {
		return *f.fail, nil
	}
	return f.result(), nil
}

// scratch is the memory one analysis decodes into, kept for the next:
// Analyze follows a binary's assembly functions on every CPU at once,
// and the thousands of instructions of the largest were a fresh
// megabyte each (a third of what converting the go command allocated,
// each new page faulted in). Nothing of it outlives Analyze: a Result
// holds an instruction's text, not the instruction.
type scratch struct {
	insns []insn
	x86   []x86asm.Inst
	a64   []arm64asm.Inst
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// room returns b emptied, with room for n elements.
func room[T any](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, 0, n)
	}
	return b[:0]
}

// setDeltas gives each instruction the SP delta of the range it starts
// in. Instructions past the rows, such as the padding after a function,
// have none; the code must not reach them.
func (f *function) setDeltas(sp []SPRange) error {
	rows := append([]SPRange(nil), sp...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Start < rows[j].Start })
	f.delta = make([]int64, len(f.insns))
	f.known = make([]bool, len(f.insns))
	r := 0
	for i, in := range f.insns {
		for r < len(rows) && rows[r].End <= in.pc {
			r++
		}
		if r < len(rows) && rows[r].Start <= in.pc {
			f.delta[i], f.known[i] = rows[r].Delta, true
		}
	}
	if !f.known[0] {
		return fmt.Errorf("goprologue: no SP delta at the entry %#x", f.entry)
	}
	return nil
}
