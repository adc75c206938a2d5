package translate

import (
	"debug/elf"
	"encoding/binary"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Verdict is what Translate does with one CFI function.
type Verdict uint8

const (
	// Described: the function gets an SFrame description, from its CFI
	// or, inside a PLT section, from the section's instructions.
	Described Verdict = iota
	// Skipped: the function gets none; the diagnostic says why, with the
	// reason code Translate reports.
	Skipped
	// Ignored: an empty FDE, one at address 0 (a discarded function) or
	// one that cannot be executed. Translate passes over it without a
	// diagnostic (Result.Empty; the CFI errors).
	Ignored
)

// A Describer makes Translate's decision about CFI functions one at a
// time, for a reader that holds a .sframe section and the CFI it should
// describe (package verify): whether Translate gives the function an
// SFrame description and, when not, the diagnostic it reports. The
// decisions are taken by the code Translate itself runs (ignored,
// pltSections, sequence, describe), so the two cannot drift apart.
//
// Every CFI function goes to Next, in the order Translate takes them (by
// start address; FDEs with the same start in the order of cfi.Index's
// entries), even one whose decision the caller does not need: whether a
// function overlaps depends on those before it.
type Describer struct {
	a    abi
	o    Options
	plts []span // PLT sections described from their instructions
	seq  sequence

	// The function last given to Next.
	start, size uint64
	place       Verdict // Ignored or Described by its place alone, else Skipped: describe decides
	overlaps    bool    // it overlaps the last function taken, which ends at prev
	prev        uint64
}

// NewDescriber returns a Describer for the CFI of a file of machine m and
// byte order order, with the file's PLT sections (as Input.PLTs) and the
// options Translate would be given.
func NewDescriber(m elf.Machine, order binary.ByteOrder, plts []PLT, o Options) (*Describer, error) {
	if o.Version == 0 {
		o.Version = sframe.Version3
	}
	a, err := newABI(m, order)
	if err != nil {
		return nil, err
	}
	a.version = o.Version
	a.flexOK = a.flexABI && o.Version >= sframe.Version3
	a.reuse = true // the functions are not kept
	d := &Describer{a: a, o: o}
	_, d.plts, _, _ = a.pltSections(plts)
	return d, nil
}

// Next takes the next CFI function: its range, and whether its FDE can be
// executed. It records the function's place in the sequence; Decide, if
// the caller needs it, gives the decision.
func (d *Describer) Next(start, size uint64, executable bool) {
	d.start, d.size, d.overlaps = start, size, false
	switch {
	case ignored(start, size) || !executable:
		d.place = Ignored
	case spanIndex(d.plts, start, start+size) >= 0:
		d.place = Described // the PLT's own description replaces its CFI
	default:
		d.place = Skipped // not known yet: describe decides
		d.overlaps, d.prev = d.seq.next(start, start+size)
	}
}

// Decide returns Translate's decision about the function last given to
// Next, with t its executed table (nil when it cannot be executed): the
// verdict, and for Skipped the diagnostic (without Symbol), whose Reason
// is the code cfi2sframe --diagnostics gives.
func (d *Describer) Decide(t *cfi.Table) (Verdict, *Diagnostic) {
	if d.place != Skipped {
		return d.place, nil
	}
	if t == nil || t.FDE == nil || t.FDE.Start != d.start || t.FDE.Size != d.size {
		return Ignored, nil // not the function given to Next
	}
	if d.overlaps {
		return Skipped, overlapDiag(t.FDE, d.prev)
	}
	if _, _, diag := d.a.describe(t, d.o); diag != nil {
		return Skipped, diag
	}
	return Described, nil
}
