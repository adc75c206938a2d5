// Package codeentry finds where functions start in a linked ELF file that
// has no unwind data for (some of) its code, and gives internal/codeflow
// the Code its analysis reads: the executable bytes, the read-only bytes
// jump tables live in, the function entries, the calls that do not
// return and the ranges CFI already describes.
//
// An entry that is not a real function start makes the analysis assume
// an entry state where there is none, and so give wrong rows: every
// source here is judged by that. Symbols are trusted; addresses derived
// from the code (call targets, pointers, gaps, padding) are kept only
// when nothing speaks against them, and each one left out is counted in
// Notes.Rejected by reason.
package codeentry

import (
	"debug/elf"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Options says where to look for more than the file holds.
type Options struct {
	// DebugDirs are the roots searched for a separate debug file by
	// build-id (<dir>/.build-id/xx/yyyy.debug) and by .gnu_debuglink, as
	// gdb's debug-file-directory; nil means /usr/lib/debug.
	DebugDirs []string
	// Described are the [Lo,Hi) ranges CFI or a Go table already
	// describe (sorted, not overlapping), nil for none.
	Described []Span
}

// Span is the address range [Lo, Hi).
type Span struct{ Lo, Hi uint64 }

// Notes says where the entries came from, for diagnostics.
type Notes struct {
	// Found counts the candidate entries each source gave, before they
	// were merged and checked; Kept counts the entries each source is the
	// strongest for, after.
	Found, Kept map[codeflow.Source]int
	// Rejected counts candidates left out, by reason (RejectCold, ...).
	Rejected map[string]int
	// DebugFile is the separate debug file whose symbols were read, ""
	// for none; DebugNote says why none was (or what was wrong with one).
	DebugFile, DebugNote string
	// Data are the ranges inside Text that hold data, not code (AArch64
	// $d mapping symbols): the walk must not decode them. codeflow.Code
	// has no field for them, so they are returned here.
	Data []Span
	// NoReturn counts the addresses known not to return: functions
	// defined in the file and PLT stubs.
	NoReturn int
	// Problems are parts of the file that could not be read (a
	// relocation section past the file's end, ...): their entries are
	// missing, nothing else.
	Problems []string
}

// Reasons a candidate entry is left out (Notes.Rejected).
const (
	// RejectCold: a GCC foo.cold / foo.cold.N part, entered by a jump
	// from its parent with the parent's frame in place, never by a call:
	// walked as an entry it would get the entry state, which is wrong.
	RejectCold = "cold-part"
	// RejectPLT: in .plt, .plt.sec or .plt.got: stubs, not functions.
	RejectPLT = "plt"
	// RejectData: inside a data range of Text (AArch64 $d).
	RejectData = "data"
	// RejectInside: strictly inside a function a symbol gives the
	// extent of (a call to a local label, a computed goto's label).
	RejectInside = "inside-symbol"
	// RejectBoundary: a call target the linear decode did not reach as
	// an instruction start (x86-64: the sweep desynchronised, or the
	// call is in bytes that are not code).
	RejectBoundary = "not-instruction-start"
	// RejectJumpTarget: a gap or padding candidate that a direct jump or
	// branch reaches and no call or pointer does: a loop head after
	// alignment padding, or a cold part, rather than a function.
	RejectJumpTarget = "jump-target"
	// RejectNextInsn: the target of a call to the next instruction (the
	// call/pop idiom that reads the PC), not a function.
	RejectNextInsn = "call-next"
	// RejectFallthrough: padding that code before it runs into (the
	// instruction before the padding does not end a path).
	RejectFallthrough = "after-fallthrough"
	// RejectTaken: an address the code takes or a non-PIE's data holds,
	// without a relocation, that does not look like a function's start
	// (refs.go): a case block, a label, a number.
	RejectTaken = "taken-not-function-like"
)

// Error is why Load could not make a Code of a file.
type Error struct {
	Msg string
	Err error // what it wraps, if anything
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "codeentry: " + e.Msg + ": " + e.Err.Error()
	}
	return "codeentry: " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Load reads f into a Code: its executable ranges, read-only bytes,
// function entries from every source, the calls that do not return and
// the ranges opt.Described covers.
func Load(f *elfread.File, opt Options) (*codeflow.Code, Notes, error) {
	code, notes, _, err := load(f, opt)
	return code, notes, err
}

// load is Load, also giving the candidates (for the tests' recall by
// source).
func load(f *elfread.File, opt Options) (*codeflow.Code, Notes, *collector, error) {
	notes := Notes{
		Found:    map[codeflow.Source]int{},
		Kept:     map[codeflow.Source]int{},
		Rejected: map[string]int{},
	}
	m := f.ELF.Machine
	if m != elf.EM_X86_64 && m != elf.EM_AARCH64 {
		return nil, notes, nil, &Error{Msg: fmt.Sprintf("machine %v is not supported", m)}
	}
	if f.ELF.Class != elf.ELFCLASS64 {
		return nil, notes, nil, &Error{Msg: "only 64-bit files are supported"}
	}
	img, err := loadImage(f, &notes)
	if err != nil {
		return nil, notes, nil, err
	}
	if len(img.text) == 0 {
		return nil, notes, nil, &Error{Msg: "no executable code"}
	}
	described := cleanSpans(opt.Described)

	c := newCollector(img, &notes)
	syms := readSymbols(f, img, &notes, codeflow.FromSymbol)
	if !syms.symtab {
		// Stripped: the debug file's .symtab has the local functions the
		// stripped file lost.
		if d := findDebugFile(f, opt.DebugDirs, &notes); d != nil {
			dsyms := readSymbols(d, img, &notes, codeflow.FromDebugFile)
			syms.merge(dsyms)
			d.Close()
		}
	}
	notes.Data = syms.data
	c.data = syms.data
	syms.add(c)

	rs := readRelocs(f, &notes)
	noret := noReturnSet(img, syms, rs, m)
	notes.NoReturn = len(noret)

	sw := sweep(img, syms.data, m)
	sw.callEntries(c)
	pointerEntries(f, img, rs, c)
	sw.refEntries(f, c, noret)
	sw.gapEntries(c, img, described)
	sw.paddingEntries(c, noret)

	entries := c.finish(syms, sw, described)
	for _, e := range entries {
		notes.Kept[e.Source]++
	}
	code := &codeflow.Code{
		Machine: m,
		Order:   f.ELF.ByteOrder,
		Text:    img.codeRanges(),
		Read:    img.read,
		Refs:    dataRefs(f, img, rs, sw),
		Entries: entries,
		NoReturn: func(addr uint64) bool {
			return noret[addr]
		},
		Described: func(lo, hi uint64) bool { return overlaps(described, lo, hi) },
	}
	if len(notes.Data) > 0 {
		code.Data = func(addr uint64) bool { return inSpans(notes.Data, addr) }
	}
	return code, notes, c, nil
}

// cleanSpans sorts spans and drops empty ones, so that a caller's slip
// does not make the binary searches wrong.
func cleanSpans(in []Span) []Span {
	out := make([]Span, 0, len(in))
	for _, s := range in {
		if s.Hi > s.Lo {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Lo < out[j].Lo })
	return out
}

// overlaps says some span in sorted spans overlaps [lo, hi).
func overlaps(spans []Span, lo, hi uint64) bool {
	if hi <= lo {
		hi = lo + 1
	}
	// The first span ending after lo is the only one that can overlap
	// when spans do not overlap each other.
	i := sort.Search(len(spans), func(i int) bool { return spans[i].Hi > lo })
	return i < len(spans) && spans[i].Lo < hi
}

// inSpans says addr is inside one of sorted spans.
func inSpans(spans []Span, addr uint64) bool { return overlaps(spans, addr, addr+1) }
