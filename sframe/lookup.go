package sframe

import (
	"encoding/binary"
	"errors"
)

// The lookups' errors that are not about malformed data. They are
// values: a lookup returns them without allocating.
var (
	// ErrNoFDE: no function descriptor covers the PC.
	ErrNoFDE = errors.New("no FDE covers the PC")
	// ErrNoFRE: the PC is inside a function but before its first row, or
	// the function has no rows and that has no meaning (V1/V2).
	ErrNoFRE = errors.New("no FRE covers the PC")
)

// errNeedsRule (lookupStep only): the row at the PC is not one a StepRule
// describes; Lookup gives its Rule.
var errNeedsRule = errors.New("the row needs the full rule")

// Lookup returns the rule that applies at pc, decoding only the FREs of
// the function that holds it: ErrNoFDE when no function covers pc,
// ErrNoFRE when pc is before the function's first row, an *Error when that
// function's bytes are malformed. A V3 default-type FDE without FREs
// marks an outermost frame (Rule.RAUndefined); a signal FDE without FREs
// gives a Rule with Signal and NoFREs set. The function is, of those that
// start last at or before pc, the last in index order that covers pc; its
// row is the FRE before the first that starts past pc (FREs are sorted,
// so the last that starts at or before it; a PCMask function's PC is
// taken modulo its repeat size first). It does not allocate unless the
// data is malformed. Stack walkers try LookupStep first.
func (t *Table) Lookup(pc uint64) (Rule, error) {
	var r Rule
	if err := t.lookup(pc, &r); err != nil {
		return Rule{}, err
	}
	return r, nil
}

func (t *Table) lookup(pc uint64, rule *Rule) error {
	var d FDE
	var r hit
	ok, err := false, error(nil)
	if t.v3le {
		r, ok, err = t.rowV3LE(pc, &d)
	}
	if !ok {
		r, err = t.row(pc, &d)
	}
	if err != nil {
		return err
	}
	if r.j < 0 {
		if !t.marker(&d) {
			return ErrNoFRE
		}
		*rule = Rule{Row: Row{RAUndefined: !d.Signal}, FuncStart: d.Start, FuncSize: d.Size, PCType: d.PCType,
			Flex: d.Flex, Signal: d.Signal, PauthKeyB: d.PauthKeyB, NoFREs: true}
		return nil
	}
	var f FRE
	asz := int(d.AddrSize)
	if _, err := t.fre(r.i, r.j, r.at-asz-1, asz, &f); err != nil {
		return err
	}
	interpretInto(&t.Header, &d, &f, rule)
	return nil
}

// marker says whether FDE d, which has no FREs, still says something: in
// V3 a signal FDE is a signal frame, a default one the outermost frame.
func (t *Table) marker(d *FDE) bool {
	return d.Signal || t.Header.Version == Version3 && !d.Flex
}

// StepRule is the rule of an ordinary row in the form a stack walker
// applies without interpreting a Rule: the CFA is SP or FP plus CFAOff;
// the return address is at CFA+RAOff when StepRASaved is set, else still
// in the ABI's link register (AArch64); FP is at CFA+FPOff when
// StepFPSaved is set, else unchanged.
type StepRule struct {
	CFAOff int32
	RAOff  int32
	FPOff  int32
	Flags  uint8
}

// StepRule flags.
const (
	StepCFAFromFP uint8 = 1 << iota // the CFA's base is FP, not SP
	StepRASaved                     // RA at CFA+RAOff
	StepFPSaved                     // FP at CFA+FPOff
	StepMangledRA                   // RA is signed (AArch64 PAC)
)

// LookupStep is Lookup for stack walkers, in the form they apply: it fills
// *s and returns true when the row at pc is an ordinary one, a row with
// data words of a default-type FDE that is not a signal frame, in an AMD64
// section with a fixed RA offset or an AArch64 one. Otherwise (another
// kind of function or row, every PC of other sections, no function or row
// at pc, malformed bytes) it returns false, and Lookup gives the rule or
// says what is wrong. It does not allocate unless the data is malformed.
func (t *Table) LookupStep(pc uint64, s *StepRule) bool { return t.lookupStep(pc, s) == nil }

// lookupStep is LookupStep returning why it did not fill *s:
// errNeedsRule, or Lookup's error.
func (t *Table) lookupStep(pc uint64, s *StepRule) error {
	h := &t.Header
	if h.ABI == ABIS390XBE || (h.CFAFixedRA == cfaFixedRAInvalid && h.ABI.arch().FixedRAOffset() != 0) {
		return errNeedsRule // no fixed RA slot on AMD64: not a section converters write
	}
	var r hit
	ok, err, ordinary := false, error(nil), true
	if t.v3le {
		r, ok, err = t.rowV3LE(pc, nil)
	}
	if !ok {
		var d FDE
		if r, err = t.row(pc, &d); err == nil && r.j < 0 {
			if !t.marker(&d) {
				return ErrNoFRE
			}
			return errNeedsRule
		}
		ordinary = !d.Signal && !d.Flex
	}
	if err != nil {
		return err
	}
	at := r.at
	if _, ok := t.wordsEnd(r.info, at); !ok {
		return errWords(r.i, r.j, r.info, at)
	}
	n := r.info.numWords()
	if n == 0 || !ordinary {
		return errNeedsRule // the outermost frame, a signal frame, a flexible FDE
	}
	// A default row's rule is in its first three words (Lookup ignores
	// any more).
	var fl uint8
	if r.info.baseReg() == baseRegFP {
		fl = StepCFAFromFP
	}
	if r.info.mangledRA() {
		fl |= StepMangledRA
	}
	s.CFAOff = t.word(r.info, at, 0)
	k := 1
	switch {
	case h.CFAFixedRA != cfaFixedRAInvalid:
		fl |= StepRASaved
		s.RAOff = int32(h.CFAFixedRA)
	case n > k:
		fl |= StepRASaved
		s.RAOff = t.word(r.info, at, k)
		k++
	}
	switch {
	case h.CFAFixedFP != cfaFixedFPInvalid:
		fl |= StepFPSaved
		s.FPOff = int32(h.CFAFixedFP)
	case n > k:
		fl |= StepFPSaved
		s.FPOff = t.word(r.info, at, k)
	}
	s.Flags = fl
	return nil
}

// hit is where a lookup's row is: FDE i's FRE j (-1: the function has no
// FREs), whose info byte is info and data words start at section offset
// at. i and j name the FRE in errors (rowV3LE, which checks all that an
// error could be about, leaves them 0). Four fields: the compiler keeps
// it in registers.
type hit struct {
	i, j, at int
	info     freInfo
}

// row finds the function holding pc (decoded into *d without its FREs)
// and the FRE that applies at pc, whose header it checks. (On a
// little-endian V3 section the lookups ask rowV3LE first.)
func (t *Table) row(pc uint64, d *FDE) (r hit, err error) {
	r.j = -1
	if r.i, _, _, _ = t.findFDE(pc); r.i < 0 {
		return r, ErrNoFDE
	}
	pos, n, err := t.fde(r.i, d)
	if err != nil || n == 0 {
		return r, err
	}
	r.j, pos, r.info, err = t.walk(r.i, pos, n, d, d.offset(pc))
	r.at = pos + int(d.AddrSize) + 1
	return r, err
}

// offset returns the offset into function d whose FRE applies at pc: pc's
// offset from its start, for a PCMask function modulo its repeat size.
func (d *FDE) offset(pc uint64) uint64 { return fdeOffset(pc, d.Start, d.PCType, d.RepSize) }

func fdeOffset(pc, start uint64, pt PCType, rep uint8) uint64 {
	off := pc - start
	if pt == PCMask && rep != 0 {
		off %= uint64(rep)
	}
	return off
}

// rowV3LE is row for a little-endian V3 section, the fast path: it reads
// the FDE attribute itself, filling the fields of d that lookups use
// (Start, Size, the FRE count, the info bytes and what they hold, RepSize), and
// walks the FREs without a check in every step. It returns ErrNoFDE when
// no function covers pc; with d nil, for lookupStep, errNeedsRule for any
// FDE but a default, non-signal one with FREs. It leaves to the general
// code (ok false) functions without FREs and whatever is malformed: an
// FRE's info byte with data-word size code 3 (invalid) makes bad
// non-zero, and any such makes the walk fail; the size it computed
// meanwhile is only used to stop, bounded by b.
//
// Each FRE's place depends on the size of the one before, read from its
// info byte: a chain of a load and arithmetic per FRE. Most FREs have as
// many words of the same size as the one before (a prologue's pushes), so
// when the info byte's word bits are those of the last size computed, the
// walk takes that size in a branch: the processor predicts it and starts
// on the next FRE before the byte arrives.
func (t *Table) rowV3LE(pc uint64, d *FDE) (r hit, ok bool, err error) {
	i, start, size, fo := t.findFDE(pc)
	if i < 0 {
		return r, true, ErrNoFDE
	}
	a := t.freBase + int(fo)
	attr := t.b[a:][:fdeAttrSizeV3] // bounded by Open
	n, info, info2, rep := int(binary.LittleEndian.Uint16(attr)), fdeInfo(attr[2]), attr[3], attr[4]
	ft := info.freType()
	pos := a + fdeAttrSizeV3
	typ := fdeTypeV3(info2)
	switch {
	case ft > freAddr4 || typ > fdeTypeFlex || n > (t.freEnd-pos)/2:
		return r, false, nil // what fde reports
	case d == nil && (n == 0 || info.signal() || typ != fdeTypeDefault):
		return r, true, errNeedsRule // not an ordinary row
	case n == 0:
		return r, false, nil // what a function without FREs means
	}
	if d != nil {
		d.Start, d.Size = start, size
		d.RepSize = rep
		d.AddrSize, d.PCType, d.PauthKeyB = uint8(ft.addrSize()), info.pcType(), info.pauthKeyB()
		d.Flex, d.Signal = typ == fdeTypeFlex, info.signal()
	}
	off := fdeOffset(pc, start, info.pcType(), rep)
	b := t.b[:t.freEnd]
	found, bad := -1, freInfo(0)
	left := n          // FREs left to walk
	last, lsz := -1, 0 // the word bits whose FRE size is lsz
	switch ft {
	case freAddr1:
		for ; left > 0 && pos+2 <= len(b); left-- {
			if uint64(b[pos]) > off {
				break
			}
			x := freInfo(b[pos+1])
			found = pos
			if x.wordBits() == last {
				pos += lsz
				continue
			}
			bad |= x.badWordSize()
			last, lsz = x.wordBits(), 2+x.dataSize()
			pos += lsz
		}
	case freAddr2:
		for ; left > 0 && pos+3 <= len(b); left-- {
			if uint64(binary.LittleEndian.Uint16(b[pos:])) > off {
				break
			}
			x := freInfo(b[pos+2])
			found = pos
			if x.wordBits() == last {
				pos += lsz
				continue
			}
			bad |= x.badWordSize()
			last, lsz = x.wordBits(), 3+x.dataSize()
			pos += lsz
		}
	default:
		for ; left > 0 && pos+5 <= len(b); left-- {
			if uint64(binary.LittleEndian.Uint32(b[pos:])) > off {
				break
			}
			x := freInfo(b[pos+4])
			found = pos
			if x.wordBits() == last {
				pos += lsz
				continue
			}
			bad |= x.badWordSize()
			last, lsz = x.wordBits(), 5+x.dataSize()
			pos += lsz
		}
	}
	// A walk cut short by the end of the bytes (left > 0 and no FRE
	// header fits at pos) is a truncated section.
	if found < 0 || bad != 0 || (left > 0 && pos+ft.addrSize()+1 > len(b)) {
		return r, false, nil
	}
	// The FRE found is checked as fre checks it, so that no error needs
	// its index to name it: i and j are left 0, which keeps fewer values
	// live through the walk.
	at := found + ft.addrSize() + 1
	x := freInfo(b[at-1])
	if at+x.dataSize() > len(b) {
		return r, false, nil
	}
	return hit{at: at, info: x}, true, nil
}

// walk returns the index, section offset and info byte of the FRE of FDE
// i (read into d; its first FRE at pos) that applies at offset off into
// the function: the last FRE starting at or before off. FREs have
// different sizes, so it walks them (as libsframe does), stopping at the
// first that starts past off.
func (t *Table) walk(i, pos, n int, d *FDE, off uint64) (j, found int, info freInfo, err error) {
	asz := int(d.AddrSize)
	j, found = -1, -1
	for k := 0; k < n; k++ {
		s, x, ok := t.freHead(pos, asz)
		if ok && uint64(s) > off {
			break
		}
		if !ok || x.wordSizeCode() > dataWord4 {
			return 0, 0, 0, t.errFREHead(i, k, pos, asz)
		}
		j, found, info = k, pos, x
		pos += asz + 1 + x.dataSize()
	}
	if j < 0 {
		return 0, 0, 0, ErrNoFRE
	}
	return j, found, info, nil
}
