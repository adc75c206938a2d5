package translate

import (
	"debug/elf"
	"encoding/binary"

	"github.com/cfi2sframe/cfi2sframe/cfi"
)

// place is what the Translator does with a CFI function by its place alone.
type place uint8

const (
	placeDescribed place = iota // inside a PLT section described from its instructions
	placeDecide                 // not known yet: describe decides
	placeIgnored                // empty, at address 0, or not executable: passed over without a diagnostic
)

// A Describer makes the Translator's decision about CFI functions one at a
// time, for a reader that holds a .sframe section and the CFI it should
// describe (package verify): whether the Translator gives the function an
// SFrame description and, when not, the diagnostic it reports. The
// decisions are taken by the code the Translator itself runs (ignored,
// pltSections, sequence, describe: Translator.function), so the two
// cannot drift apart.
//
// Every CFI function goes to Next, in the order the Translator takes them (by
// start address; FDEs with the same start in the order of cfi.File's
// entries), even one whose decision the caller does not need: whether a
// function overlaps depends on those before it.
type Describer struct {
	a    abi
	o    Options
	plts []span // PLT sections described from their instructions
	seq  sequence

	// The function last given to Next.
	start, size uint64
	place       place
	overlaps    bool // it overlaps the last function taken, which ends at prev
	prev        uint64
}

// NewDescriber returns a Describer for the CFI of a file of machine m and
// byte order order, with the file's PLT sections (as Input.PLTs) and the
// options the Translator would be given.
func NewDescriber(m elf.Machine, order binary.ByteOrder, plts []PLT, o Options) (*Describer, error) {
	t, err := New(Input{Machine: m, Order: order, PLTs: plts}, o)
	if err != nil {
		return nil, err
	}
	return &Describer{a: t.a, o: t.o, plts: t.pltSpans}, nil
}

// Next takes the next CFI function: its range, and whether its FDE can be
// executed. It records the function's place in the sequence; Decide, if
// the caller needs it, gives the decision.
func (d *Describer) Next(start, size uint64, executable bool) {
	d.start, d.size, d.overlaps = start, size, false
	switch {
	case ignored(start, size) || !executable:
		d.place = placeIgnored
	case spanIndex(d.plts, start, start+size) >= 0:
		d.place = placeDescribed // the PLT's own description replaces its CFI
	default:
		d.place = placeDecide
		d.overlaps, d.prev = d.seq.next(start, start+size)
	}
}

// Decide returns the Translator's decision about the function last given to
// Next, with t its executed table (nil when it cannot be executed):
// described when the function gets an SFrame description (from its CFI
// or, inside a PLT section, from the section's instructions); otherwise
// the diagnostic (without Symbol) when the Translator skips it with one, whose
// Reason is the code cfi2sframe --diagnostics gives, or nil when
// the Translator passes over it without one (an empty FDE, one at address 0,
// one that cannot be executed: counted apart, and the CFI errors).
func (d *Describer) Decide(t *cfi.Table) (described bool, diag *Diagnostic) {
	switch d.place {
	case placeDescribed:
		return true, nil
	case placeIgnored:
		return false, nil
	}
	if t == nil || t.FDE == nil || t.FDE.Start != d.start || t.FDE.Size != d.size {
		return false, nil // not the function given to Next
	}
	if d.overlaps {
		return false, overlapDiag(t.FDE, d.prev)
	}
	if _, _, diag := d.a.describe(t, d.o); diag != nil {
		return false, diag
	}
	return true, nil
}
