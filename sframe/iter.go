package sframe

import (
	"encoding/binary"
)

// Reader is an SFrame section checked as a whole but read one function at
// a time: NewReader checks every byte Decode checks, with the same errors,
// and keeps no per-function memory; ReadFDE decodes one function's FREs
// into a buffer the caller reuses. Dump, verify and report walk sections
// of millions of functions this way instead of materialising every FRE
// (Decode's Section).
//
// The section bytes are kept (not copied) and must not change while the
// Reader is in use. A Reader is not safe for concurrent use: FindFRE keeps
// the last function it decoded.
type Reader struct {
	Header Header // AuxHdr points into the section bytes
	Order  binary.ByteOrder
	Addr   uint64 // the section's address

	b       []byte
	fdeBase int // section offset of the FDE index
	fdeSize int
	freBase int    // section offset of the FRE sub-section
	freSub  []byte // the FRE sub-section

	// ordered: the FDE index is sorted by start address (whatever the
	// header's flag says).
	ordered bool
	// FindFRE's cache: the function it decoded last (index cur, or -1).
	cur   int
	curFD FDE
}

// NewReader checks an SFrame section as Decode does (same checks, same
// errors, in the same order) without keeping what it decodes. addr is the
// section's address (see Decode).
func NewReader(b []byte, addr uint64) (*Reader, error) {
	if len(b) < HeaderSize {
		return nil, errorf(int64(len(b)), "section too short for a header (%d bytes, need %d)", len(b), HeaderSize)
	}
	var order binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint16(b) == Magic:
		order = binary.LittleEndian
	case binary.BigEndian.Uint16(b) == Magic:
		order = binary.BigEndian
	default:
		return nil, errorf(0, "bad magic %#04x", binary.LittleEndian.Uint16(b))
	}
	h := Header{
		Magic:      Magic,
		Version:    b[2],
		Flags:      b[3],
		ABI:        b[4],
		CFAFixedFP: int8(b[5]),
		CFAFixedRA: int8(b[6]),
		AuxHdrLen:  b[7],
		NumFDEs:    order.Uint32(b[8:]),
		NumFREs:    order.Uint32(b[12:]),
		FRELen:     order.Uint32(b[16:]),
		FDEOff:     order.Uint32(b[20:]),
		FREOff:     order.Uint32(b[24:]),
	}
	hsz, fdeSize, err := h.checkSizes(len(b))
	if err != nil {
		return nil, err
	}
	h.AuxHdr = b[HeaderSize:hsz:hsz]
	r := &Reader{Header: h, Order: order, Addr: addr, b: b, cur: -1,
		fdeBase: hsz + int(h.FDEOff), fdeSize: int(fdeSize), freBase: hsz + int(h.FREOff)}
	r.freSub = b[r.freBase : r.freBase+int(h.FRELen)]
	left := int(h.NumFREs)
	var d FDE
	var f FRE
	r.ordered = true
	var prev uint64
	for i := 0; i < int(h.NumFDEs); i++ {
		pos, err := r.head(i, &d, left)
		if err != nil {
			return nil, err
		}
		if i > 0 && d.Start < prev {
			r.ordered = false
		}
		prev = d.Start
		left -= int(d.NumFREs)
		for j := 0; j < int(d.NumFREs); j++ {
			if pos, err = r.fre(i, j, pos, &d, &f); err != nil {
				return nil, err
			}
		}
	}
	if left != 0 {
		return nil, errorf(12, "header claims %d FREs but the FDEs hold %d", h.NumFREs, int(h.NumFREs)-left)
	}
	return r, nil
}

// NumFDEs returns the number of functions in the section.
func (r *Reader) NumFDEs() int { return int(r.Header.NumFDEs) }

// ReadFDE decodes FDE i (index order, 0 <= i < NumFDEs) into d, its FREs
// into d.FREs, whose memory is reused: they stay valid until the next call
// with the same d.
func (r *Reader) ReadFDE(i int, d *FDE) {
	fres := d.FREs[:0]
	pos, _ := r.head(i, d, int(r.Header.NumFREs)) // checked by NewReader
	if cap(fres) < int(d.NumFREs) {
		fres = make([]FRE, d.NumFREs)
	}
	d.FREs = fres[:d.NumFREs]
	for j := range d.FREs {
		pos, _ = r.fre(i, j, pos, d, &d.FREs[j])
	}
}

// head reads the index entry of FDE i (and its V3 attribute) into d,
// leaving d.FREs alone, and checks it: left is the number of FREs the
// header has left for it. It returns the FRE sub-section offset of the
// function's first FRE.
func (r *Reader) head(i int, d *FDE, left int) (int, error) {
	order := r.Order
	off := r.fdeBase + i*r.fdeSize
	p := r.b[off:]
	var attrOff int
	d.Info2, d.RepSize, d.Padding, d.FDEType, d.Signal = 0, 0, 0, FDETypeDefault, false
	switch r.Header.Version {
	case Version1, Version2:
		d.StartOff = int64(int32(order.Uint32(p)))
		d.Size = order.Uint32(p[4:])
		d.FREOff = order.Uint32(p[8:])
		d.NumFREs = order.Uint32(p[12:])
		d.Info = p[16]
		if r.Header.Version == Version2 {
			d.RepSize = p[17]
			d.Padding = order.Uint16(p[18:])
		}
		attrOff = int(d.FREOff)
	case Version3:
		d.StartOff = int64(order.Uint64(p))
		d.Size = order.Uint32(p[8:])
		d.FREOff = order.Uint32(p[12:])
		if uint64(d.FREOff)+fdeAttrSizeV3 > uint64(len(r.freSub)) {
			return 0, errorf(int64(off+12), "FDE %d: attribute at FRE offset %d runs past the FRE sub-section (%d bytes)", i, d.FREOff, len(r.freSub))
		}
		a := r.freSub[d.FREOff:]
		d.NumFREs = uint32(order.Uint16(a))
		d.Info = a[2]
		d.Info2 = a[3]
		d.RepSize = a[4]
		d.FDEType = d.Info2 & fdeTypeMaskV3
		d.Signal = d.Info&fdeInfoSignalBit != 0
		attrOff = int(d.FREOff) + fdeAttrSizeV3
	}
	d.Start = r.Addr + uint64(d.StartOff)
	if r.Header.Flags&FlagFDEFuncStartPCRel != 0 {
		d.Start += uint64(off)
	}
	d.FREType = d.Info & 0xf
	d.PCType = (d.Info >> 4) & 1
	d.PauthKeyB = d.Info&fdeInfoPauthBit != 0
	if d.FREType > FREAddr4 {
		return 0, errorf(int64(off), "FDE %d: unknown FRE type %d", i, d.FREType)
	}
	if d.FDEType > FDETypeFlex {
		return 0, errorf(int64(off), "FDE %d: unknown FDE type %d", i, d.FDEType)
	}
	if uint64(d.NumFREs) > uint64(left) {
		return 0, errorf(int64(off), "FDE %d: %d FREs exceed the header's remaining FRE count %d", i, d.NumFREs, left)
	}
	if attrOff > len(r.freSub) {
		return 0, errorf(int64(off), "FDE %d: FRE offset %d past the FRE sub-section (%d bytes)", i, attrOff, len(r.freSub))
	}
	return attrOff, nil
}

// fre decodes FRE j of FDE i (d, read by head) at FRE sub-section offset
// pos into f and returns the offset of the next FRE.
func (r *Reader) fre(i, j, pos int, d *FDE, f *FRE) (int, error) {
	order, freSub := r.Order, r.freSub
	asz := 1 << d.FREType
	at := int64(r.freBase + pos)
	if pos+asz+1 > len(freSub) {
		return 0, errorf(at, "FDE %d FRE %d: truncated FRE header", i, j)
	}
	q := freSub[pos:]
	switch asz {
	case 1:
		f.StartOff = uint32(q[0])
	case 2:
		f.StartOff = uint32(order.Uint16(q))
	default:
		f.StartOff = order.Uint32(q)
	}
	f.Info = q[asz]
	f.BaseReg = f.Info & 1
	f.NumWords = (f.Info >> 1) & 0xf
	sz := (f.Info >> 5) & 3
	if sz > DataWord4 {
		return 0, errorf(at+int64(asz), "FDE %d FRE %d: bad data-word size code %d", i, j, sz)
	}
	f.WordSize = 1 << sz
	f.MangledRA = f.Info&freInfoMangledRABit != 0
	pos += asz + 1
	n := int(f.NumWords) * int(f.WordSize)
	if pos+n > len(freSub) {
		return 0, errorf(int64(r.freBase+pos), "FDE %d FRE %d: %d data words of %d bytes run past the FRE sub-section", i, j, f.NumWords, f.WordSize)
	}
	w := freSub[pos : pos+n]
	clear(f.Words[f.NumWords:]) // as Decode leaves them, in a reused FRE
	switch f.WordSize {
	case 1:
		for k := range int(f.NumWords) {
			f.Words[k] = int32(int8(w[k]))
		}
	case 2:
		for k := range int(f.NumWords) {
			f.Words[k] = int32(int16(order.Uint16(w[2*k:])))
		}
	default:
		for k := range int(f.NumWords) {
			f.Words[k] = int32(order.Uint32(w[4*k:]))
		}
	}
	return pos + n, nil
}

// start and size read FDE i's start address and size from the index.
func (r *Reader) start(i int) uint64 {
	off := r.fdeBase + i*r.fdeSize
	var s uint64
	if r.Header.Version == Version3 {
		s = r.Order.Uint64(r.b[off:])
	} else {
		s = uint64(int64(int32(r.Order.Uint32(r.b[off:]))))
	}
	s += r.Addr
	if r.Header.Flags&FlagFDEFuncStartPCRel != 0 {
		s += uint64(off)
	}
	return s
}

func (r *Reader) size(i int) uint32 {
	off := r.fdeBase + i*r.fdeSize
	if r.Header.Version == Version3 {
		return r.Order.Uint32(r.b[off+8:])
	}
	return r.Order.Uint32(r.b[off+4:])
}

// FindFRE returns the rule that applies at pc, as (*Section).FindFRE does
// on the decoded section: the same FDE (binary search in a section flagged
// sorted, the first FDE in index order that holds pc otherwise), then its
// last FRE starting at or before pc. The FREs of the function found are
// decoded once and kept until another function is looked up.
func (r *Reader) FindFRE(pc uint64) (Rule, bool) {
	i := r.findFDE(pc)
	if i < 0 {
		return Rule{}, false
	}
	d := &r.curFD
	if r.cur != i {
		r.ReadFDE(i, d)
		r.cur = i
	}
	f := freAt(d, pc)
	if f == nil {
		return Rule{}, false
	}
	return interpret(&r.Header, d, f), true
}

// findFDE returns the index of the FDE FindFRE uses for pc, or -1.
func (r *Reader) findFDE(pc uint64) int {
	in := func(i int) bool {
		s := r.start(i)
		return pc >= s && pc-s < uint64(r.size(i))
	}
	n := r.NumFDEs()
	if r.Header.Flags&FlagFDESorted == 0 {
		for i := 0; i < n; i++ {
			if in(i) {
				return i
			}
		}
		return -1
	}
	if c := r.cur; r.ordered && c >= 0 && r.start(c) <= pc && (c+1 == n || r.start(c+1) > pc) {
		// In a truly sorted index the search below ends past the
		// cached function: skip it.
		if in(c) {
			return c
		}
		return -1
	}
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.start(m) <= pc {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo > 0 && in(lo-1) {
		return lo - 1
	}
	return -1
}

// Interpret decodes the rule of FRE f of FDE d.
func (r *Reader) Interpret(d *FDE, f *FRE) Rule { return interpret(&r.Header, d, f) }
