// Package acceptance checks an .sframe section against the acceptance rules of
// the unwinders that read SFrame in the field, so that a user can tell,
// before shipping a file, whether a given reader takes it:
//
//   - Kernel: the Linux kernel's SFrame user-space unwinder
//     (kernel/unwind/sframe.c, not yet in a release) as the revisions after
//     the v13 posting of January 2026 have it (linux-mm/linux-mm commits
//     5ce6138798d7, 07e15cb06bc9, 7edb32403917), the strictest rule of
//     each. V3 only.
//   - Glibc: glibc 2.42–2.44 backtrace() built with --enable-sframe
//     (sysdeps/generic/sframe-read.c, sysdeps/generic/sframe.c). V2 only.
//   - Libsframe: GNU libsframe 2.47.50 (binutils libsframe/sframe.c,
//     sframe_decode and sframe_find_fre), as in Debian sid.
//   - Libsframe244: GNU libsframe 2.44 (Debian trixie).
//
// Each rule below names the source function it comes from. The rules were
// read from those sources; the code here is ours.
//
// Two kinds of violation are distinguished: Reject (the reader refuses the
// whole section, or for glibc every trace through it) and LookupFails (the
// reader accepts the section but a lookup at the named PC fails or answers
// wrongly; glibc then discards the whole SFrame trace). A third kind,
// InnermostOnly, is not a violation but a limit of the reader, listed
// apart (Result.Limits): the rule at the PC is right and the reader uses
// it, but only in the interrupted frame, so a walk reaching the PC as a
// caller stops there. A fourth, CallerLookup, is a limit too: the reader
// looks a return address up where the section does not describe the
// caller (the kernel, after a call that is a function's last
// instruction); finding it needs the code (Input.CallEnds).
package acceptance

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Reader names an SFrame reader.
type Reader string

// The readers whose rules are known.
const (
	Kernel       Reader = "kernel"
	Glibc        Reader = "glibc"
	Libsframe    Reader = "libsframe"
	Libsframe244 Reader = "libsframe-2.44"
)

// All lists the readers in a stable order.
var All = []Reader{Kernel, Glibc, Libsframe, Libsframe244}

// Parse maps a name ("kernel", "glibc", "libsframe", "libsframe-2.44") to a
// Reader.
func Parse(name string) (Reader, error) {
	for _, r := range All {
		if string(r) == name {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown reader %q (kernel, glibc, libsframe or libsframe-2.44)", name)
}

// Kind says how bad a violation is.
type Kind string

const (
	// Reject: the reader refuses the section (the kernel does not register
	// it; libsframe's decoder fails; glibc cannot use any frame of it).
	Reject Kind = "reject"
	// LookupFails: the section is accepted but a lookup at PC fails or is
	// wrong (glibc: the whole SFrame trace is discarded when it gets there).
	LookupFails Kind = "lookup-fails"
	// InnermostOnly: the section is accepted and the rule at PC is used,
	// but only in the frame that was interrupted: a walk that reaches PC
	// through a return address stops there, with the frames before it
	// right. A limit of the reader, not a fault of the section: listed in
	// Result.Limits, not counted by Total or OK.
	InnermostOnly Kind = "innermost-only"
	// CallerLookup: the section is accepted and right, but the reader
	// looks a caller's return address up at a PC whose rule is not the
	// caller's: another function's (a wrong caller, unless the two rules
	// agree) or none (the reader falls back to the frame pointer). A limit
	// of the reader, listed in Result.Limits.
	CallerLookup Kind = "caller-lookup"
)

// Violation is one broken rule. FDE and FRE are indices in the section's
// FDE index and in that FDE's FREs, -1 when the rule is about the header or
// the whole FDE. PC is the first PC concerned (0 for header rules).
type Violation struct {
	Reader Reader `json:"reader"`
	Rule   string `json:"rule"`
	Kind   Kind   `json:"kind"`
	FDE    int    `json:"fde"`
	FRE    int    `json:"fre"`
	PC     uint64 `json:"pc"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	where := "header"
	switch {
	case v.FRE >= 0:
		where = fmt.Sprintf("FDE %d FRE %d (pc %#x)", v.FDE, v.FRE, v.PC)
	case v.FDE >= 0:
		where = fmt.Sprintf("FDE %d (pc %#x)", v.FDE, v.PC)
	}
	return fmt.Sprintf("%s: %s: %s: %s (%s)", v.Reader, where, v.Rule, v.Detail, v.Kind)
}

// Range is an address range [Lo, Hi).
type Range struct{ Lo, Hi uint64 }

// Input is what Check reads.
type Input struct {
	Section []byte // the .sframe section's bytes
	Addr    uint64 // its address
	// Exec lists the file's executable PT_LOAD segments (p_vaddr,
	// p_vaddr+p_memsz). The kernel registers the section once for each,
	// with that segment as its text range, and requires every function
	// it reads to lie inside it. Nil skips those rules.
	Exec []Range
	// Loads lists the file's PT_LOAD segments (p_vaddr, p_vaddr+p_memsz):
	// the kernel requires the section to lie inside one mapping. Nil skips
	// that rule.
	Loads []Range
	// Shared says the file is a shared object (ET_DYN without
	// PT_INTERP): the kernel registers its section at exec only when it
	// is a program's interpreter, and otherwise only when user space
	// (the dynamic loader, or a preloaded library) calls
	// sframe_register() for it (Result.Registration).
	Shared bool
	// CallEnds reports whether the function [lo, hi) ends with a call
	// instruction, so that the call's return address is hi (a limit of
	// the kernel: CallerLookup); from is an address in it known to start
	// an instruction (its last FRE's). Nil skips that rule.
	CallEnds func(lo, hi, from uint64) bool
	// Unfollowed, when not "", says why the file's PT_GNU_SFRAME cannot
	// be followed (elfread.Section.Fallback): Section is then the .sframe
	// section, which the readers that find SFrame through the program
	// headers (the kernel, glibc) never see.
	Unfollowed string
}

// How the kernel comes to read a section (Result.Registration).
const (
	// RegisteredAtExec: binfmt_elf registers a program's section (and
	// its interpreter's) when it is executed.
	RegisteredAtExec = "exec"
	// RegisteredBySyscall: a shared object's section is registered when
	// user space calls sframe_register() with it, once per executable
	// segment, with the same rules; without that call the kernel walks
	// the object's frames by the frame pointer.
	RegisteredBySyscall = "sframe_register"
)

// MaxViolations bounds how many violations Result keeps (Total counts all).
const MaxViolations = 1000

// Result is the outcome of Check.
type Result struct {
	Reader     Reader      `json:"reader"`
	Violations []Violation `json:"violations"` // in section order, at most MaxViolations
	Total      int         `json:"total"`      // violations found
	Rejects    int         `json:"rejects"`    // of which Reject
	Functions  int         `json:"functions"`
	FREs       int         `json:"fres"`
	// Limits are the InnermostOnly and CallerLookup findings, in section order, at most
	// MaxViolations; TotalLimits counts them all and LimitFunctions the
	// functions they are in.
	Limits      []Violation `json:"limits,omitempty"`
	TotalLimits int         `json:"total_limits"`
	// LimitKinds counts the limits and the functions they are in by kind.
	LimitKinds     map[Kind]LimitCount `json:"limit_kinds,omitempty"`
	LimitFunctions int                 `json:"limit_functions"`
	// Registration is how the kernel comes to read the section
	// (RegisteredAtExec or RegisteredBySyscall; Kernel only).
	Registration string `json:"registration,omitempty"`
}

// LimitCount counts the limits of one kind and the functions they are in.
type LimitCount struct {
	Rules     int `json:"rules"`
	Functions int `json:"functions"`
}

// OK says whether the reader takes the section with no violation (limits
// do not count).
func (r *Result) OK() bool { return r.Total == 0 }

// First returns the first violation, or nil.
func (r *Result) First() *Violation {
	if len(r.Violations) == 0 {
		return nil
	}
	return &r.Violations[0]
}

// FirstReject returns the first violation kept that is a Reject, or nil.
func (r *Result) FirstReject() *Violation {
	for i := range r.Violations {
		if r.Violations[i].Kind == Reject {
			return &r.Violations[i]
		}
	}
	return nil
}

type checker struct {
	res       *Result
	sec       *sfsection.Section
	limitFDEs map[int]bool
	kindFDEs  map[Kind]map[int]bool
}

func (c *checker) add(rule string, k Kind, fde, fre int, pc uint64, format string, args ...any) {
	c.res.Total++
	if k == Reject {
		c.res.Rejects++
	}
	if len(c.res.Violations) < MaxViolations {
		c.res.Violations = append(c.res.Violations, Violation{Reader: c.res.Reader, Rule: rule, Kind: k,
			FDE: fde, FRE: fre, PC: pc, Detail: fmt.Sprintf(format, args...)})
	}
}

// limit records an InnermostOnly finding (see Result.Limits).
func (c *checker) limit(rule string, fde, fre int, pc uint64, format string, args ...any) {
	c.limitKind(InnermostOnly, rule, fde, fre, pc, format, args...)
}

// limitKind records a limit of kind k (see Result.Limits).
func (c *checker) limitKind(k Kind, rule string, fde, fre int, pc uint64, format string, args ...any) {
	c.res.TotalLimits++
	if c.limitFDEs == nil {
		c.limitFDEs, c.kindFDEs, c.res.LimitKinds = map[int]bool{}, map[Kind]map[int]bool{}, map[Kind]LimitCount{}
	}
	if !c.limitFDEs[fde] {
		c.limitFDEs[fde] = true
		c.res.LimitFunctions++
	}
	n := c.res.LimitKinds[k]
	n.Rules++
	if c.kindFDEs[k] == nil {
		c.kindFDEs[k] = map[int]bool{}
	}
	if !c.kindFDEs[k][fde] {
		c.kindFDEs[k][fde] = true
		n.Functions++
	}
	c.res.LimitKinds[k] = n
	if len(c.res.Limits) < MaxViolations {
		c.res.Limits = append(c.res.Limits, Violation{Reader: c.res.Reader, Rule: rule, Kind: k,
			FDE: fde, FRE: fre, PC: pc, Detail: fmt.Sprintf(format, args...)})
	}
}

// Check applies reader r's rules to a section.
func Check(r Reader, in Input) *Result {
	c := &checker{res: &Result{Reader: r}}
	if in.Unfollowed != "" && (r == Kernel || r == Glibc) {
		c.add("pt-gnu-sframe", Reject, -1, -1, 0, "%s; %s finds SFrame data only through PT_GNU_SFRAME", in.Unfollowed, r)
		return c.res
	}
	b := in.Section
	if len(b) < sframe.HeaderSize {
		c.add("header-size", Reject, -1, -1, 0, "section of %d bytes is shorter than the %d-byte header", len(b), sframe.HeaderSize)
		return c.res
	}
	sec, err := sfsection.Decode(b, in.Addr)
	if err != nil {
		// Every reader needs what Decode checks (offsets and counts that
		// fit, FRE type and data-word size codes <= 2, known ABI).
		var se *sframe.Error
		if errors.As(err, &se) {
			c.add("malformed", Reject, -1, -1, 0, "%s at offset %#x", se.Msg, se.Off)
		} else {
			c.add("malformed", Reject, -1, -1, 0, "%v", err)
		}
		return c.res
	}
	c.sec = sec
	c.res.Functions = len(sec.FDEs)
	c.res.FREs = int(sec.Header.NumFREs)
	switch r {
	case Kernel:
		c.kernel(in)
	case Glibc:
		c.glibc()
	case Libsframe:
		c.libsframe()
	case Libsframe244:
		c.libsframe244()
	default:
		c.add("reader", Reject, -1, -1, 0, "unknown reader %q", r)
	}
	return c.res
}

// fdeSize is the size of one FDE index entry for the section's version.
func (c *checker) fdeSize() uint64 { return uint64(c.sec.Header.FDESize()) }

// common checks every reader's lookup needs: PCMASK FDEs with a repeat
// size (each reader takes the PC offset modulo rep_size: 0 divides by
// zero), and FDE starts in order when the section says it is sorted (each
// reader binary-searches).
func (c *checker) common() {
	for i := range c.sec.FDEs {
		d := &c.sec.FDEs[i]
		if d.PCType == sframe.PCMask && d.RepSize == 0 && len(d.FREs) > 0 {
			c.add("pcmask-rep-size", Reject, i, -1, d.Start, "PCMASK FDE with repeat size 0 (lookups divide by it)")
		}
	}
}

// sortedStarts reports the first FDE whose start is below its predecessor's
// (strict: also equal starts) when the header claims SORTED.
func (c *checker) sortedStarts(strict bool, rule string, k Kind) {
	if c.sec.Header.Flags&sframe.FlagFDESorted == 0 {
		return
	}
	for i := 1; i < len(c.sec.FDEs); i++ {
		p, d := c.sec.FDEs[i-1].Start, c.sec.FDEs[i].Start
		if d < p || (strict && d == p) {
			c.add(rule, k, i, -1, d, "function start %#x is not above FDE %d's start %#x", d, i-1, p)
			return
		}
	}
}

// LoadRanges returns a linked file's PT_LOAD segments (Input.Loads).
func LoadRanges(ef *elf.File) []Range {
	out := []Range{}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			out = append(out, Range{Lo: p.Vaddr, Hi: p.Vaddr + p.Memsz})
		}
	}
	return out
}

// SharedObject reports whether ef is a shared object, not a program: a
// position-independent file without an interpreter (Input.Shared). The
// dynamic loader is one too; the kernel registers it at exec as a
// program's interpreter.
func SharedObject(ef *elf.File) bool {
	if ef.Type != elf.ET_DYN {
		return false
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// ExecRanges returns a linked file's executable PT_LOAD segments, which
// the kernel requires every function start to lie in (Input.Exec).
func ExecRanges(ef *elf.File) []Range {
	out := []Range{}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			out = append(out, Range{Lo: p.Vaddr, Hi: p.Vaddr + p.Memsz})
		}
	}
	return out
}
