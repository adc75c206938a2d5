package sframe

import (
	"encoding/binary"
	"errors"
	"math"
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
	// not sorted; nil when it is.
	order []uint32
	// starts holds every FDE's start address minus base, in the order of
	// order (index order when nil): a compact copy the binary search
	// walks instead of the 16- or 20-byte FDE entries (a quarter of the
	// cache lines). nil when the functions span 4 GiB or more.
	starts []uint32
	base   uint64
	// top holds every topStride-th entry of starts: small enough to stay
	// in cache, it narrows a search to one 64-byte line of starts.
	top []uint32
}

const topStride = 16

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
// allocates only for sections whose FDE index is not flagged sorted (an
// index of 4 bytes per FDE).
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

// fdeAt reads FDE i's fields needed for a lookup. freOff is the section
// offset of its first FRE.
func (t *Table) fdeAt(i int, d *FDE) (freOff int) {
	off := t.fdeBase + i*t.fdeSize
	d.Start = t.start(i)
	if t.fdeSize == fdeSizeV3 {
		d.StartOff = int64(t.u64(off))
		d.Size = t.u32(off + 8)
		d.FREOff = t.u32(off + 12)
		a := t.freBase + int(d.FREOff)
		d.NumFREs = uint32(t.u16(a))
		d.Info = t.b[a+2]
		d.Info2 = t.b[a+3]
		d.RepSize = t.b[a+4]
		d.FDEType = d.Info2 & fdeTypeMaskV3
		d.Signal = d.Info&fdeInfoSignalBit != 0
		freOff = a + fdeAttrSizeV3
	} else {
		d.StartOff = int64(int32(t.u32(off)))
		d.Size = t.u32(off + 4)
		d.FREOff = t.u32(off + 8)
		d.NumFREs = t.u32(off + 12)
		d.Info = t.b[off+16]
		if t.fdeSize == fdeSizeV2 {
			d.RepSize = t.b[off+17]
		}
		freOff = t.freBase + int(d.FREOff)
	}
	d.FREType = d.Info & 0xf
	d.PCType = (d.Info >> 4) & 1
	d.PauthKeyB = d.Info&fdeInfoPauthBit != 0
	return freOff
}

// checkFDEs validates every FDE so that lookups only need to bound the FRE
// bytes of one function.
func (t *Table) checkFDEs() error {
	var total uint64
	sorted := true
	var prev uint64
	v3 := t.fdeSize == fdeSizeV3
	t.starts = make([]uint32, t.n)
	compact := true
	for i := 0; i < t.n; i++ {
		off := t.fdeBase + i*t.fdeSize
		if v3 {
			// The attribute (FRE count and types) lives in the FRE
			// sub-section, spread over the whole section: Lookup checks
			// it for the one function it reads, so Open reads only the
			// index.
			if freOff := uint64(t.u32(off + 12)); freOff+fdeAttrSizeV3 > uint64(t.freLen) {
				return errorf(int64(off+12), "FDE %d: attribute at FRE offset %d runs past the FRE sub-section (%d bytes)", i, freOff, t.freLen)
			}
		} else {
			freOff := uint64(t.u32(off + 8))
			nfres := uint64(t.u32(off + 12))
			info := t.b[off+16]
			if freOff > uint64(t.freLen) {
				return errorf(int64(off), "FDE %d: FRE offset %d past the FRE sub-section (%d bytes)", i, freOff, t.freLen)
			}
			if info&0xf > FREAddr4 {
				return errorf(int64(off), "FDE %d: unknown FRE type %d", i, info&0xf)
			}
			// Every FRE takes at least two bytes.
			if nfres > (uint64(t.freLen)-freOff)/2 {
				return errorf(int64(off), "FDE %d: %d FREs cannot fit in the %d bytes after FRE offset %d", i, nfres, uint64(t.freLen)-freOff, freOff)
			}
			total += nfres
		}
		s := t.start(i)
		if i == 0 {
			t.base = s
		}
		if i > 0 && s < prev {
			sorted = false
		}
		if s-t.base > math.MaxUint32 {
			compact = false
		}
		t.starts[i] = uint32(s - t.base)
		prev = s
	}
	if !v3 && total != uint64(t.Header.NumFREs) {
		return errorf(12, "header claims %d FREs but the FDEs hold %d", t.Header.NumFREs, total)
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
		compact = true
		if t.n > 0 {
			t.base = t.start(int(t.order[0]))
		}
		for k, i := range t.order {
			s := t.start(int(i)) - t.base
			if s > math.MaxUint32 {
				compact = false
			}
			t.starts[k] = uint32(s)
		}
	}
	if !compact {
		t.starts = nil
		return nil
	}
	t.top = make([]uint32, (t.n+topStride-1)/topStride)
	for j := range t.top {
		t.top[j] = t.starts[j*topStride]
	}
	return nil
}

// NumFDEs returns the number of functions in the section.
func (t *Table) NumFDEs() int { return t.n }

// FDE returns the fields of FDE i (in index order) without its FREs.
func (t *Table) FDE(i int) FDE {
	var d FDE
	t.fdeAt(i, &d)
	return d
}

// findFDE returns the index of the FDE covering pc, or -1.
func (t *Table) findFDE(pc uint64) int {
	lo, hi := 0, t.n
	at := func(k int) int {
		if t.order != nil {
			return int(t.order[k])
		}
		return k
	}
	switch {
	case t.starts != nil:
		if pc < t.base {
			return -1
		}
		key := uint32(math.MaxUint32)
		if pc-t.base < math.MaxUint32 {
			key = uint32(pc - t.base)
		}
		// Last block whose first start is <= key, then the last start
		// <= key inside it.
		top := t.top
		bl, bh := 0, len(top)
		for bl < bh {
			m := int(uint(bl+bh) >> 1)
			if top[m] <= key {
				bl = m + 1
			} else {
				bh = m
			}
		}
		if bl == 0 {
			return -1
		}
		lo = (bl - 1) * topStride
		hi = min(lo+topStride, t.n)
		st := t.starts[lo:hi]
		k := 1
		for k < len(st) && st[k] <= key {
			k++
		}
		lo += k
		// Walk back over functions with the same start (zero-sized ones
		// first).
		for k := lo - 1; k >= 0; k-- {
			i := k
			if t.order != nil {
				i = int(t.order[k])
			}
			if pc-(t.base+uint64(t.starts[k])) < uint64(t.size(i)) {
				return i
			}
			if k == 0 || t.starts[k-1] != t.starts[k] {
				break
			}
		}
		return -1
	default:
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if t.start(at(m)) <= pc {
				lo = m + 1
			} else {
				hi = m
			}
		}
	}
	// Walk back over FDEs with the same start (zero-sized ones first).
	for k := lo - 1; k >= 0; k-- {
		i := at(k)
		s := t.start(i)
		if pc-s < uint64(t.size(i)) {
			return i
		}
		if k == 0 || t.start(at(k-1)) != s {
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
	i := t.findFDE(pc)
	if i < 0 {
		return Rule{}, ErrNoFDE
	}
	var d FDE
	pos := t.fdeAt(i, &d)
	if d.FREType > FREAddr4 {
		return Rule{}, errorf(int64(t.fdeBase+i*t.fdeSize), "FDE %d: unknown FRE type %d", i, d.FREType)
	}
	if d.FDEType > FDETypeFlex {
		return Rule{}, errorf(int64(t.fdeBase+i*t.fdeSize), "FDE %d: unknown FDE type %d", i, d.FDEType)
	}
	if d.NumFREs == 0 {
		r := Rule{FuncStart: d.Start, FuncSize: d.Size, PCType: d.PCType,
			Flex: d.FDEType == FDETypeFlex, Signal: d.Signal, PauthKeyB: d.PauthKeyB, NoFREs: true}
		switch {
		case d.Signal:
			return r, nil
		case t.Header.Version == Version3 && d.FDEType == FDETypeDefault:
			r.RAUndefined = true
			return r, nil
		}
		return Rule{}, ErrNoFRE
	}
	off := pc - d.Start
	if d.PCType == PCMask && d.RepSize != 0 {
		off %= uint64(d.RepSize)
	}
	end := t.freBase + t.freLen
	asz := 1 << d.FREType
	found := -1
	for j := 0; j < int(d.NumFREs); j++ {
		if pos+asz+1 > end {
			return Rule{}, errorf(int64(pos), "FDE %d FRE %d: truncated FRE header", i, j)
		}
		var s uint32
		switch asz {
		case 1:
			s = uint32(t.b[pos])
		case 2:
			s = uint32(t.u16(pos))
		default:
			s = t.u32(pos)
		}
		if uint64(s) > off {
			break
		}
		info := t.b[pos+asz]
		if (info>>5)&3 > DataWord4 {
			return Rule{}, errorf(int64(pos+asz), "FDE %d FRE %d: bad data-word size code %d", i, j, (info>>5)&3)
		}
		n := int((info>>1)&0xf) << ((info >> 5) & 3)
		found = pos
		pos += asz + 1 + n
	}
	if found < 0 {
		return Rule{}, ErrNoFRE
	}
	var f FRE
	if err := t.decodeFRE(found, asz, &f); err != nil {
		return Rule{}, err
	}
	return interpret(&t.Header, &d, &f), nil
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
