package sframe

import (
	"encoding/binary"
	"errors"
	"sort"
)

// Table is an SFrame section opened for lookups, decoded lazily in the way
// of libsframe: Open checks the header and the FDE index (where each
// function's FRE data starts, the sorted order the header claims; in V1/V2,
// whose index entries also hold the FRE count and types, those and the
// total FRE count) but leaves the FREs as bytes; Lookup checks and decodes
// only the attribute and FREs of the one function that holds the PC, and
// reports malformed bytes there as an *Error. Lookup does not allocate.
//
// The section bytes are kept (not copied) and must not change while the
// Table is in use. Decode gives the fully decoded Section that dump,
// verify and the encoder use.
type Table struct {
	Header Header
	Addr   uint64 // the section's address

	b       []byte
	big     bool
	pcrel   bool
	fdeBase int // section offset of the FDE index
	fdeSize int
	freBase int // section offset of the FRE sub-section
	freLen  int
	n       int
	// order lists FDE indices by start address when the section's index is
	// not sorted; nil when it is. Positions below are in address order.
	order []uint32
	base  uint64 // the lowest start address
	shift uint8  // log2 of the granule size
	// gran maps the code to positions: gran[g] is the position of the
	// last function starting at or before base + g<<shift. A lookup reads
	// one entry, then the section's own index entries from there (usually
	// one or two, which hold start, size and FRE offset together), then
	// the function's FREs: three dependent loads in the common case. The
	// granule is sized for about one entry per function (4 bytes each).
	// nil when the section has no functions.
	gran []uint32
}

// granPerFDE is the number of granule entries per function Open aims at:
// with more, a lookup's forward scan is shorter, at 4 bytes each.
const granPerFDE = 1

// Lookup errors that are not about malformed data; they do not allocate.
var (
	// ErrNoFDE: no function descriptor covers the PC.
	ErrNoFDE = errors.New("sframe: no FDE covers the PC")
	// ErrNoFRE: the PC is inside a function but before its first row, or
	// the function has no rows and that has no meaning (V1/V2).
	ErrNoFRE = errors.New("sframe: no FRE covers the PC")
)

// Open checks the header and the FDE index of an SFrame section and returns
// a Table for lookups. addr is the section's address (see Decode). It
// allocates the search index: at most 4 bytes per FDE, plus 4 when the
// section's index is not sorted.
func Open(b []byte, addr uint64) (*Table, error) {
	if len(b) < HeaderSize {
		return nil, errorf(int64(len(b)), "section too short for a header (%d bytes, need %d)", len(b), HeaderSize)
	}
	t := &Table{b: b, Addr: addr}
	switch {
	case binary.LittleEndian.Uint16(b) == Magic:
	case binary.BigEndian.Uint16(b) == Magic:
		t.big = true
	default:
		return nil, errorf(0, "bad magic %#04x", binary.LittleEndian.Uint16(b))
	}
	h := Header{
		Magic: Magic, Version: b[2], Flags: b[3], ABI: b[4],
		CFAFixedFP: int8(b[5]), CFAFixedRA: int8(b[6]), AuxHdrLen: b[7],
		NumFDEs: t.u32(8), NumFREs: t.u32(12), FRELen: t.u32(16), FDEOff: t.u32(20), FREOff: t.u32(24),
	}
	hsz, fdeSize, err := h.checkSizes(len(b))
	if err != nil {
		return nil, err
	}
	h.AuxHdr = b[HeaderSize:hsz:hsz]
	t.Header = h
	t.pcrel = h.Flags&FlagFDEFuncStartPCRel != 0
	t.fdeBase = hsz + int(h.FDEOff)
	t.fdeSize = int(fdeSize)
	t.freBase = hsz + int(h.FREOff)
	t.freLen = int(h.FRELen)
	t.n = int(h.NumFDEs)
	if err := t.checkFDEs(); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Table) u16(off int) uint16 {
	if t.big {
		return binary.BigEndian.Uint16(t.b[off:])
	}
	return binary.LittleEndian.Uint16(t.b[off:])
}

func (t *Table) u32(off int) uint32 {
	if t.big {
		return binary.BigEndian.Uint32(t.b[off:])
	}
	return binary.LittleEndian.Uint32(t.b[off:])
}

func (t *Table) u64(off int) uint64 {
	if t.big {
		return binary.BigEndian.Uint64(t.b[off:])
	}
	return binary.LittleEndian.Uint64(t.b[off:])
}

// start returns the resolved start address of FDE i (index order).
func (t *Table) start(i int) uint64 {
	off := t.fdeBase + i*t.fdeSize
	var s uint64
	if t.fdeSize == fdeSizeV3 {
		s = t.u64(off)
	} else {
		s = uint64(int64(int32(t.u32(off))))
	}
	s += t.Addr
	if t.pcrel {
		s += uint64(off)
	}
	return s
}

// freOffAt returns FDE i's FRE offset (index order).
func (t *Table) freOffAt(i int) uint32 {
	off := t.fdeBase + i*t.fdeSize
	if t.fdeSize == fdeSizeV3 {
		return t.u32(off + 12)
	}
	return t.u32(off + 8)
}

// fdeAt reads FDE i's fields needed for a lookup. freOff is the section
// offset of its first FRE.
func (t *Table) fdeAt(i int, d *FDE) (freOff int) {
	freOff = t.fdeFor(i, t.start(i), t.freOffAt(i), d)
	off := t.fdeBase + i*t.fdeSize
	if t.fdeSize == fdeSizeV3 {
		d.StartOff = int64(t.u64(off))
	} else {
		d.StartOff = int64(int32(t.u32(off)))
	}
	d.Size = t.size(i)
	return freOff
}

// fdeFor is fdeAt given FDE i's start address and FRE offset (from findFDE):
// in V3 the index entry is not read again.
func (t *Table) fdeFor(i int, start uint64, fo uint32, d *FDE) (freOff int) {
	off := t.fdeBase + i*t.fdeSize
	d.Start = start
	d.FREOff = fo
	if t.fdeSize == fdeSizeV3 {
		a := t.freBase + int(fo)
		d.NumFREs = uint32(t.u16(a))
		d.Info = t.b[a+2]
		d.Info2 = t.b[a+3]
		d.RepSize = t.b[a+4]
		d.FDEType = d.Info2 & fdeTypeMaskV3
		d.Signal = d.Info&fdeInfoSignalBit != 0
		freOff = a + fdeAttrSizeV3
	} else {
		d.NumFREs = t.u32(off + 12)
		d.Info = t.b[off+16]
		if t.fdeSize == fdeSizeV2 {
			d.RepSize = t.b[off+17]
		}
		freOff = t.freBase + int(fo)
	}
	d.FREType = d.Info & 0xf
	d.PCType = (d.Info >> 4) & 1
	d.PauthKeyB = d.Info&fdeInfoPauthBit != 0
	return freOff
}

// checkFDEs validates every FDE so that lookups only need to bound the FRE
// bytes of one function, checks the order the header claims, and builds
// the search index (gran; order for an unsorted index).
func (t *Table) checkFDEs() error {
	var sorted bool
	var last uint64
	var err error
	if t.fdeSize == fdeSizeV3 && !t.big {
		sorted, last, err = t.checkV3LE()
	} else {
		sorted, last, err = t.checkAny()
	}
	if err != nil {
		return err
	}
	if t.Header.Flags&FlagFDESorted != 0 && !sorted {
		return errorf(3, "FDE index is flagged sorted but is not sorted by start address")
	}
	if !sorted {
		t.order = make([]uint32, t.n)
		for i := range t.order {
			t.order[i] = uint32(i)
		}
		sort.SliceStable(t.order, func(a, b int) bool { return t.start(int(t.order[a])) < t.start(int(t.order[b])) })
		t.base = t.start(int(t.order[0]))
		last = t.start(int(t.order[t.n-1]))
	}
	if t.n == 0 {
		return nil
	}
	// The smallest granule that keeps the table within granPerFDE
	// entries per function (last-base is at most the span of the code).
	span := last - t.base
	for span>>t.shift >= uint64(granPerFDE*t.n) {
		t.shift++
	}
	t.gran = make([]uint32, span>>t.shift+1)
	if t.order == nil && t.fdeSize == fdeSizeV3 && !t.big {
		t.granV3LE()
	} else {
		for k := 0; k < t.n; k++ {
			t.mark(t.start(t.at(k))-t.base, k)
		}
	}
	t.fillGran()
	return nil
}

// mark records in gran that position k starts at s (minus base): the
// first granule whose start is at or after s (a later position with the
// same granule overwrites it). fillGran then gives every granule the
// largest position marked at or before it, which is the last function
// starting at or before the granule's start, as positions are in address
// order. Both passes are free of unpredictable branches: Open's time is
// a few cycles per function.
func (t *Table) mark(s uint64, k int) {
	mask := uint64(1)<<t.shift - 1
	if g := s>>t.shift + ((s&mask)+mask)>>t.shift; g < uint64(len(t.gran)) {
		t.gran[g] = uint32(k)
	}
}

func (t *Table) fillGran() {
	m := uint32(0)
	for g, k := range t.gran {
		m = max(m, k)
		t.gran[g] = m
	}
}

// v3StartTerms gives the passes over a V3 index that read its entries
// directly what start(k) adds to entry k's raw field: start(k) = field +
// add + k*inc, that is Addr, and the entry's own section offset when
// starts are PC-relative.
func (t *Table) v3StartTerms() (add, inc uint64) {
	if t.pcrel {
		return t.Addr + uint64(t.fdeBase), fdeSizeV3
	}
	return t.Addr, 0
}

// granV3LE marks gran for a sorted little-endian V3 index, reading the
// start fields in one pass (Open's second and last).
func (t *Table) granV3LE() {
	const es = fdeSizeV3
	ents := t.b[t.fdeBase : t.fdeBase+t.n*es]
	// Entry k's start minus base is its field + add + k*inc.
	add, inc := t.v3StartTerms()
	add -= t.base
	for k := 0; len(ents) >= es; k++ {
		t.mark(binary.LittleEndian.Uint64(ents)+add, k)
		add += inc
		ents = ents[es:]
	}
}

// checkV3LE is checkFDEs' pass over a little-endian V3 index (the common
// case, and the bulk of Open's time: it reads the whole index). It sets
// base to the first start and returns whether the index is sorted and the
// last start.
func (t *Table) checkV3LE() (sorted bool, last uint64, err error) {
	const es = fdeSizeV3
	ents := t.b[t.fdeBase : t.fdeBase+t.n*es]
	freLen := uint64(t.freLen)
	add, inc := t.v3StartTerms()
	if t.n > 0 {
		t.base = binary.LittleEndian.Uint64(ents) + add
	}
	prev := t.base
	sorted = true
	for i := 0; len(ents) >= es; i++ {
		e := ents[:es:es]
		if fo := binary.LittleEndian.Uint32(e[12:]); uint64(fo)+fdeAttrSizeV3 > freLen {
			// The attribute (FRE count and types) lives in the FRE
			// sub-section, spread over the whole section: Lookup reads
			// it for the one function it needs, so Open only bounds it.
			return false, 0, errorf(int64(t.fdeBase+i*es+12), "FDE %d: attribute at FRE offset %d runs past the FRE sub-section (%d bytes)", i, fo, t.freLen)
		}
		s := binary.LittleEndian.Uint64(e) + add
		if s < prev {
			sorted = false
		}
		prev = s
		add += inc
		ents = ents[es:]
	}
	return sorted, prev, nil
}

// checkAny is checkV3LE for any version and byte order; in V1/V2 it also
// checks each entry's FRE count and type and the header's total.
func (t *Table) checkAny() (sorted bool, last uint64, err error) {
	var total uint64
	v3 := t.fdeSize == fdeSizeV3
	sorted = true
	if t.n > 0 {
		t.base = t.start(0)
	}
	prev := t.base
	for i := 0; i < t.n; i++ {
		off := t.fdeBase + i*t.fdeSize
		if v3 {
			if freOff := uint64(t.u32(off + 12)); freOff+fdeAttrSizeV3 > uint64(t.freLen) {
				return false, 0, errorf(int64(off+12), "FDE %d: attribute at FRE offset %d runs past the FRE sub-section (%d bytes)", i, freOff, t.freLen)
			}
		} else {
			freOff := uint64(t.u32(off + 8))
			nfres := uint64(t.u32(off + 12))
			info := t.b[off+16]
			if freOff > uint64(t.freLen) {
				return false, 0, errorf(int64(off), "FDE %d: FRE offset %d past the FRE sub-section (%d bytes)", i, freOff, t.freLen)
			}
			if info&0xf > FREAddr4 {
				return false, 0, errorf(int64(off), "FDE %d: unknown FRE type %d", i, info&0xf)
			}
			// Every FRE takes at least two bytes.
			if nfres > (uint64(t.freLen)-freOff)/2 {
				return false, 0, errorf(int64(off), "FDE %d: %d FREs cannot fit in the %d bytes after FRE offset %d", i, nfres, uint64(t.freLen)-freOff, freOff)
			}
			total += nfres
		}
		s := t.start(i)
		if s < prev {
			sorted = false
		}
		prev = s
	}
	if !v3 && total != uint64(t.Header.NumFREs) {
		return false, 0, errorf(12, "header claims %d FREs but the FDEs hold %d", t.Header.NumFREs, total)
	}
	return sorted, prev, nil
}

// NumFDEs returns the number of functions in the section.
func (t *Table) NumFDEs() int { return t.n }

// FDE returns the fields of FDE i (in index order) without its FREs.
func (t *Table) FDE(i int) FDE {
	var d FDE
	t.fdeAt(i, &d)
	return d
}

// at returns the FDE index at position k of the address order.
func (t *Table) at(k int) int {
	if t.order != nil {
		return int(t.order[k])
	}
	return k
}

// findFDE returns the index of the FDE covering pc, or -1, with its start
// address, size and FRE offset.
func (t *Table) findFDE(pc uint64) (i int, start uint64, size, freOff uint32) {
	if t.gran == nil || pc < t.base {
		return -1, 0, 0, 0
	}
	g := (pc - t.base) >> t.shift
	last := t.n - 1 // the last position that may start at or before pc
	if g < uint64(len(t.gran)-1) {
		last = int(t.gran[g+1])
	} else {
		g = uint64(len(t.gran) - 1)
	}
	k := int(t.gran[g])
	if t.order == nil && t.fdeSize == fdeSizeV3 && !t.big {
		// What cfi2sframe and GNU write: one 16-byte index entry holds
		// start, size and FRE offset.
		const es = fdeSizeV3
		ents := t.b[t.fdeBase : t.fdeBase+t.n*es]
		add, inc := t.v3StartTerms()
		if last-k > 4 {
			k = t.searchPositions(pc, k, last)
		} else {
			for k < last && binary.LittleEndian.Uint64(ents[(k+1)*es:])+add+uint64(k+1)*inc <= pc {
				k++
			}
		}
		e := ents[k*es:][:es]
		start = binary.LittleEndian.Uint64(e) + add + uint64(k)*inc
		size = binary.LittleEndian.Uint32(e[8:])
		if pc-start < uint64(size) {
			return k, start, size, binary.LittleEndian.Uint32(e[12:])
		}
	} else {
		if last-k > 4 {
			k = t.searchPositions(pc, k, last)
		} else {
			for k < last && t.start(t.at(k+1)) <= pc {
				k++
			}
		}
		i = t.at(k)
		start, size = t.start(i), t.size(i)
		if pc-start < uint64(size) {
			return i, start, size, t.freOffAt(i)
		}
	}
	// Not in the function that starts last at or before pc: one with the
	// same start (zero-sized ones come first), or none.
	return t.slowFind(pc, t.back(pc, k+1))
}

// searchPositions returns the last position in [lo, hi] whose function
// starts at or before pc, given that lo's does.
func (t *Table) searchPositions(pc uint64, lo, hi int) int {
	// Invariant: lo starts at or before pc; everything past hi after it.
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if t.start(t.at(m)) <= pc {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// slowFind completes findFDE for FDE i (-1: none) from its index entry.
func (t *Table) slowFind(pc uint64, i int) (int, uint64, uint32, uint32) {
	if i < 0 {
		return -1, 0, 0, 0
	}
	return i, t.start(i), t.size(i), t.freOffAt(i)
}

// back returns the FDE that covers pc among those at positions before k
// (the first position starting past pc): the one at k-1, or one with the
// same start before it (zero-sized functions come first).
func (t *Table) back(pc uint64, k int) int {
	for k--; k >= 0; k-- {
		i := t.at(k)
		s := t.start(i)
		if pc-s < uint64(t.size(i)) {
			return i
		}
		if k == 0 || t.start(t.at(k-1)) != s {
			break
		}
	}
	return -1
}

// size returns the function size of FDE i.
func (t *Table) size(i int) uint32 {
	off := t.fdeBase + i*t.fdeSize
	if t.fdeSize == fdeSizeV3 {
		return t.u32(off + 8)
	}
	return t.u32(off + 4)
}

// Lookup returns the rule that applies at pc, decoding only the FREs of
// the function that holds it: ErrNoFDE when no function covers pc,
// ErrNoFRE when pc is before the function's first row, a *Error when that
// function's FRE bytes are malformed. A V3 default-type FDE without FREs
// marks an outermost frame (Rule.RAUndefined); a signal FDE without FREs
// gives a Rule with Signal and NoFREs set. It does not allocate unless the
// data is malformed.
func (t *Table) Lookup(pc uint64) (Rule, error) {
	var r Rule
	err := t.LookupInto(pc, &r)
	return r, err
}

// LookupInto is Lookup writing the rule into *r (the zero Rule on an
// error), for callers that step many frames: it saves copying the Rule.
func (t *Table) LookupInto(pc uint64, r *Rule) error {
	if err := t.lookup(pc, r); err != nil {
		*r = Rule{}
		return err
	}
	return nil
}

func (t *Table) lookup(pc uint64, r *Rule) error {
	var d FDE
	_, found, asz, err := t.row(pc, &d)
	if err != nil {
		return err
	}
	if d.NumFREs == 0 {
		*r = Rule{FuncStart: d.Start, FuncSize: d.Size, PCType: d.PCType,
			Flex: d.FDEType == FDETypeFlex, Signal: d.Signal, PauthKeyB: d.PauthKeyB, NoFREs: true}
		switch {
		case d.Signal:
			return nil
		case t.Header.Version == Version3 && d.FDEType == FDETypeDefault:
			r.RAUndefined = true
			return nil
		}
		return ErrNoFRE
	}
	var f FRE
	if err := t.decodeFRE(found, asz, &f); err != nil {
		return err
	}
	interpretInto(&t.Header, &d, &f, r)
	return nil
}

// row finds the function holding pc (FDE i, read into *d) and the
// section offset of the FRE that applies at pc, whose start address field
// is asz bytes. A function without FREs gives d.NumFREs == 0 and no error.
func (t *Table) row(pc uint64, d *FDE) (i, found, asz int, err error) {
	i, start, size, fo := t.findFDE(pc)
	if i < 0 {
		return i, 0, 0, ErrNoFDE
	}
	d.Size = size
	pos := t.fdeFor(i, start, fo, d)
	if d.FREType > FREAddr4 {
		return i, 0, 0, errorf(int64(t.fdeBase+i*t.fdeSize), "FDE %d: unknown FRE type %d", i, d.FREType)
	}
	if d.FDEType > FDETypeFlex {
		return i, 0, 0, errorf(int64(t.fdeBase+i*t.fdeSize), "FDE %d: unknown FDE type %d", i, d.FDEType)
	}
	if d.NumFREs == 0 {
		return i, 0, 0, nil
	}
	off := pc - d.Start
	if d.PCType == PCMask && d.RepSize != 0 {
		off %= uint64(d.RepSize)
	}
	// The last FRE starting at or before off: FREs have different sizes,
	// so walk them (as libsframe does), stopping at the first past off.
	b := t.b[:t.freBase+t.freLen]
	asz = 1 << d.FREType
	found = -1
	j := 0
	if asz == 1 {
		// The common case, 1-byte start addresses, without the switch;
		// on bad or truncated bytes it stops and leaves the report to
		// the general loop below, which starts again at FRE j.
		for n := int(d.NumFREs); j < n && pos+2 <= len(b); j++ {
			info := b[pos+1]
			if uint64(b[pos]) > off || (info>>5)&3 > DataWord4 {
				break
			}
			found = pos
			pos += 2 + int((info>>1)&0xf)<<((info>>5)&3)
		}
	} else if asz == 2 && !t.big {
		// Likewise for 2-byte little-endian ones (large functions).
		for n := int(d.NumFREs); j < n && pos+3 <= len(b); j++ {
			info := b[pos+2]
			if uint64(binary.LittleEndian.Uint16(b[pos:])) > off || (info>>5)&3 > DataWord4 {
				break
			}
			found = pos
			pos += 3 + int((info>>1)&0xf)<<((info>>5)&3)
		}
	}
	for ; j < int(d.NumFREs); j++ {
		if pos+asz+1 > len(b) {
			return i, 0, 0, errorf(int64(pos), "FDE %d FRE %d: truncated FRE header", i, j)
		}
		var s uint32
		switch asz {
		case 1:
			s = uint32(b[pos])
		case 2:
			s = uint32(t.u16(pos))
		default:
			s = t.u32(pos)
		}
		if uint64(s) > off {
			break
		}
		info := b[pos+asz]
		if (info>>5)&3 > DataWord4 {
			return i, 0, 0, errorf(int64(pos+asz), "FDE %d FRE %d: bad data-word size code %d", i, j, (info>>5)&3)
		}
		found = pos
		pos += asz + 1 + int((info>>1)&0xf)<<((info>>5)&3)
	}
	if found < 0 {
		return i, 0, 0, ErrNoFRE
	}
	return i, found, asz, nil
}

// rowV3LE is row for LookupStep on a little-endian V3 section: the
// position and address size of the FRE at pc when its FDE is a default,
// non-signal one with FREs; false otherwise, and on any error (LookupStep's
// caller then asks Lookup, which reports it).
func (t *Table) rowV3LE(pc uint64) (pos, asz int, ok bool) {
	i, start, _, fo := t.findFDE(pc)
	if i < 0 {
		return 0, 0, false
	}
	b := t.b[:t.freBase+t.freLen]
	a := t.freBase + int(fo)
	if a+fdeAttrSizeV3 > len(b) {
		return 0, 0, false
	}
	n := int(binary.LittleEndian.Uint16(b[a:]))
	info, info2, rep := b[a+2], b[a+3], b[a+4]
	if n == 0 || info&fdeInfoSignalBit != 0 || info2&fdeTypeMaskV3 != FDETypeDefault || info&0xf > FREAddr4 {
		return 0, 0, false
	}
	off := pc - start
	if (info>>4)&1 == PCMask && rep != 0 {
		off %= uint64(rep)
	}
	// The last FRE starting at or before off. An FRE's info byte with
	// data-word size code 3 (invalid) has bits 5 and 6 set: bad collects
	// x & x<<1 of every FRE walked past, and any such makes the walk
	// fail (Lookup then reports the FRE); the size it computed meanwhile
	// is only used to stop, bounded by b.
	//
	// Each FRE's place depends on the size of the one before, read from
	// its info byte: a chain of a load and arithmetic per FRE. Most FREs
	// have as many words of the same size as the one before (a prologue's
	// pushes), so when the info byte's word bits are those of the last
	// size computed, the walk takes that size in a branch: the processor
	// predicts it and starts on the next FRE before the byte arrives.
	pos = a + fdeAttrSizeV3
	found, bad := -1, byte(0)
	const wordBits = 0x7e // number and size of the data words
	last, lsz := -1, 0    // the word bits whose size is lsz
	switch info & 0xf {
	case FREAddr1:
		for ; n > 0 && pos+2 <= len(b); n-- {
			if uint64(b[pos]) > off {
				break
			}
			x := b[pos+1]
			found = pos
			if int(x&wordBits) == last {
				pos += lsz
				continue
			}
			bad |= x & (x << 1)
			last, lsz = int(x&wordBits), 2+int((x>>1)&0xf)<<((x>>5)&3)
			pos += lsz
		}
		asz = 1
	case FREAddr2:
		for ; n > 0 && pos+3 <= len(b); n-- {
			if uint64(binary.LittleEndian.Uint16(b[pos:])) > off {
				break
			}
			x := b[pos+2]
			found = pos
			if int(x&wordBits) == last {
				pos += lsz
				continue
			}
			bad |= x & (x << 1)
			last, lsz = int(x&wordBits), 3+int((x>>1)&0xf)<<((x>>5)&3)
			pos += lsz
		}
		asz = 2
	default:
		for ; n > 0 && pos+5 <= len(b); n-- {
			if uint64(binary.LittleEndian.Uint32(b[pos:])) > off {
				break
			}
			x := b[pos+4]
			found = pos
			if int(x&wordBits) == last {
				pos += lsz
				continue
			}
			bad |= x & (x << 1)
			last, lsz = int(x&wordBits), 5+int((x>>1)&0xf)<<((x>>5)&3)
			pos += lsz
		}
		asz = 4
	}
	// A walk cut short by the end of the bytes (n > 0 and no FRE header
	// fits at pos) is a truncated section: let Lookup report it.
	if found < 0 || bad&0x40 != 0 || (n > 0 && pos+asz+1 > len(b)) {
		return 0, 0, false
	}
	return found, asz, true
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

// LookupStep is Lookup for the common case, for stack walkers: when the
// row that applies at pc belongs to a default-type FDE that is not a
// signal frame, has data words (is not the outermost marker) and is of an
// AMD64 or AArch64 section, it fills *s and returns true. Otherwise,
// including on every error, it returns false, and the caller asks Lookup
// (which says which error, or gives the full Rule). It does not allocate.
func (t *Table) LookupStep(pc uint64, s *StepRule) bool {
	h := &t.Header
	if h.ABI == ABIS390XBE {
		return false
	}
	var pos, asz int
	if t.fdeSize == fdeSizeV3 && !t.big {
		// What cfi2sframe and GNU as write for x86-64: read the FDE
		// attribute here rather than fill an FDE.
		var ok bool
		if pos, asz, ok = t.rowV3LE(pc); !ok {
			return false
		}
	} else {
		var d FDE
		var err error
		_, pos, asz, err = t.row(pc, &d)
		if err != nil || d.NumFREs == 0 || d.Signal || d.FDEType != FDETypeDefault {
			return false
		}
	}
	info := t.b[pos+asz]
	n := int((info >> 1) & 0xf)
	wsz := int(1) << ((info >> 5) & 3)
	pos += asz + 1
	if n == 0 || pos+n*wsz > t.freBase+t.freLen {
		return false
	}
	// A default row's rule is in its first three words (Lookup ignores
	// any more).
	var w [3]int32
	for k := 0; k < min(n, 3); k++ {
		switch wsz {
		case 1:
			w[k] = int32(int8(t.b[pos]))
		case 2:
			w[k] = int32(int16(t.u16(pos)))
		default:
			w[k] = int32(t.u32(pos))
		}
		pos += wsz
	}
	var fl uint8
	if info&1 == BaseRegFP {
		fl = StepCFAFromFP
	}
	if info&freInfoMangledRABit != 0 {
		fl |= StepMangledRA
	}
	s.CFAOff = w[0]
	i := 1
	switch {
	case h.CFAFixedRA != CFAFixedRAInvalid:
		fl |= StepRASaved
		s.RAOff = int32(h.CFAFixedRA)
	case h.ABI == ABIAMD64LE:
		return false // no fixed RA slot on AMD64: not a section converters write
	case n > i:
		fl |= StepRASaved
		s.RAOff = w[i]
		i++
	}
	switch {
	case h.CFAFixedFP != CFAFixedFPInvalid:
		fl |= StepFPSaved
		s.FPOff = int32(h.CFAFixedFP)
	case n > i:
		fl |= StepFPSaved
		s.FPOff = w[i]
	}
	s.Flags = fl
	return true
}

func (t *Table) decodeFRE(pos, asz int, f *FRE) error {
	end := t.freBase + t.freLen
	switch asz {
	case 1:
		f.StartOff = uint32(t.b[pos])
	case 2:
		f.StartOff = uint32(t.u16(pos))
	default:
		f.StartOff = t.u32(pos)
	}
	f.Info = t.b[pos+asz]
	f.BaseReg = f.Info & 1
	f.NumWords = (f.Info >> 1) & 0xf
	sz := (f.Info >> 5) & 3
	if sz > DataWord4 {
		return errorf(int64(pos+asz), "bad data-word size code %d", sz)
	}
	f.WordSize = 1 << sz
	f.MangledRA = f.Info&freInfoMangledRABit != 0
	pos += asz + 1
	if pos+int(f.NumWords)*int(f.WordSize) > end {
		return errorf(int64(pos), "%d data words of %d bytes run past the FRE sub-section", f.NumWords, f.WordSize)
	}
	for k := 0; k < int(f.NumWords); k++ {
		switch f.WordSize {
		case 1:
			f.Words[k] = int32(int8(t.b[pos]))
		case 2:
			f.Words[k] = int32(int16(t.u16(pos)))
		default:
			f.Words[k] = int32(t.u32(pos))
		}
		pos += int(f.WordSize)
	}
	return nil
}
