package cfi

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// Pointer encodings (DW_EH_PE_*), LSB "Exception Frames".
const (
	peAbsptr  = 0x00
	peUleb128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSleb128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c

	pePCRel   = 0x10
	peTextRel = 0x20
	peDataRel = 0x30
	peFuncRel = 0x40
	peAligned = 0x50

	peIndirect = 0x80
	peOmit     = 0xff
)

// ptrCtx is what decoding an encoded pointer needs besides the bytes.
type ptrCtx struct {
	sec       *Section
	ptrSize   int
	funcStart uint64
}

// readEncoded reads a pointer in encoding enc. The reader's offset is a
// section offset (r.b is the whole section), so DW_EH_PE_pcrel adds the
// field's address.
func readEncoded(r *reader, enc uint8, c ptrCtx) (uint64, error) {
	if enc == peOmit {
		return 0, nil
	}
	fieldAddr := c.sec.addr + uint64(r.off)
	var v uint64
	app := enc & 0x70
	if app == peAligned {
		a := c.ptrSize
		if pad := (a - r.off%a) % a; pad > 0 {
			r.bytes(pad)
		}
		fieldAddr = c.sec.addr + uint64(r.off)
	}
	switch enc & 0x0f {
	case peAbsptr:
		v = r.uN(c.ptrSize)
	case peUleb128:
		v = r.uleb()
	case peUdata2:
		v = uint64(r.u16())
	case peUdata4:
		v = uint64(r.u32())
	case peUdata8:
		v = r.u64()
	case peSleb128:
		v = uint64(r.sleb())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	case peSdata8:
		v = r.u64()
	default:
		return 0, fmt.Errorf("unknown pointer encoding %#x", enc)
	}
	if r.err != nil {
		return 0, r.err
	}
	switch app {
	case 0, peAligned:
	case pePCRel:
		v += fieldAddr
	case peTextRel:
		v += c.sec.textRel
	case peDataRel:
		v += c.sec.dataRel
	case peFuncRel:
		v += c.funcStart
	default:
		return 0, fmt.Errorf("unknown pointer encoding %#x", enc)
	}
	if c.ptrSize == 4 {
		v &= 0xffffffff
	}
	return v, nil
}

// readRange reads an FDE's address-range field: the format of enc without
// its application (the range is a length, not an address).
func readRange(r *reader, enc uint8, c ptrCtx) (uint64, error) {
	return readEncoded(r, enc&0x0f, c)
}

// parser walks one section.
type parser struct {
	s    *Section
	cies map[int64]*CIE
	bad  map[int64]error
	errs []error
	// The CIE found last: FDEs of one CIE mostly follow one another.
	lastOff int64
	last    *CIE
	le      bool // s.Order is little-endian
	slow    bool // quickFDE takes nothing
}

// reader reads the section's bytes b from off.
func (p *parser) reader(b []byte, off int) *reader {
	return &reader{b: b, off: off, order: p.s.order, le: p.le}
}

func (p *parser) errorf(off int64, format string, args ...any) *Error {
	return &Error{Section: p.s.kind.String(), Off: off, Msg: fmt.Sprintf(format, args...)}
}

// record is the framing of one CIE or FDE.
type record struct {
	off     int64 // offset of the length field
	idOff   int   // offset of the CIE id / CIE pointer field
	body    int   // offset just after the id field
	end     int   // offset of the next record
	is64    bool
	id      uint64
	isCIE   bool
	zeroLen bool
}

// frame reads the record header at off. ok is false when the walk cannot
// continue (an error was recorded).
func (p *parser) frame(off int) (rec record, ok bool) {
	r := p.reader(p.s.data, off)
	rec.off = int64(off)
	length := uint64(r.u32())
	if r.err != nil {
		p.errs = append(p.errs, p.errorf(rec.off, "truncated record length (%d bytes left)", len(p.s.data)-off))
		return rec, false
	}
	if length == 0 {
		rec.zeroLen = true
		rec.end = r.off
		return rec, true
	}
	if length == 0xffffffff {
		rec.is64 = true
		length = r.u64()
		if r.err != nil {
			p.errs = append(p.errs, p.errorf(rec.off, "truncated 64-bit record length"))
			return rec, false
		}
	} else if length >= 0xfffffff0 {
		p.errs = append(p.errs, p.errorf(rec.off, "reserved record length %#x", length))
		return rec, false
	}
	if length > uint64(r.left()) {
		p.errs = append(p.errs, p.errorf(rec.off, "record length %d runs past the end of the section (%d bytes left)", length, r.left()))
		return rec, false
	}
	rec.idOff = r.off
	rec.end = r.off + int(length)
	idSize := 4
	if rec.is64 {
		idSize = 8
	}
	if int(length) < idSize {
		p.errs = append(p.errs, p.errorf(rec.off, "record of %d bytes has no room for its CIE id", length))
		rec.id = 1 // not a CIE; skipped by the caller through the error below
		return rec, true
	}
	rec.id = r.uN(idSize)
	rec.body = r.off
	if p.s.kind == kindEH {
		rec.isCIE = rec.id == 0
	} else {
		rec.isCIE = rec.id == 0xffffffff || (rec.is64 && rec.id == ^uint64(0))
	}
	return rec, true
}

// Parse reads every CIE and FDE of s, one of a File's Sections, and
// keeps them all: those Open leaves out of the Entries too (a
// .debug_frame FDE for code .eh_frame covers), for a caller that compares
// a section record by record. Malformed records are reported as *Error
// values and skipped; a record whose length runs past the end of the
// section stops the walk.
func Parse(s *Section) ([]*FDE, []error) {
	return parse(s, false)
}

// parse is Parse, with quickFDE left out when slow (for the tests that
// hold it to frame and fde).
func parse(s *Section, slow bool) ([]*FDE, []error) {
	p, err := newParser(s)
	if err != nil {
		return nil, []error{err}
	}
	p.slow = slow
	var fdes []*FDE
	var f FDE
	p.walk(&f, func(f *FDE) {
		c := *f
		fdes = append(fdes, &c)
	})
	return fdes, p.errs
}

func newParser(s *Section) (*parser, error) {
	if s.order == nil {
		return nil, &Error{Section: s.kind.String(), Msg: "no byte order"}
	}
	if s.ptrSize != 4 && s.ptrSize != 8 {
		return nil, &Error{Section: s.kind.String(), Msg: fmt.Sprintf("unsupported pointer size %d", s.ptrSize)}
	}
	return &parser{s: s, cies: map[int64]*CIE{}, bad: map[int64]error{}, le: s.order == binary.LittleEndian}, nil
}

// walk reads every record of the section; each FDE is parsed into f
// (overwritten from one to the next) and handed to yield. Malformed
// records go to p.errs.
func (p *parser) walk(f *FDE, yield func(*FDE)) {
	s := p.s
	for off := 0; off < len(s.data); {
		if next, ok := p.quickFDE(off, f); ok {
			off = next
			yield(f)
			continue
		}
		rec, ok := p.frame(off)
		if !ok {
			break
		}
		off = rec.end
		if rec.zeroLen {
			if s.untilTerminator {
				break
			}
			continue
		}
		if rec.body == 0 {
			continue // too short; reported
		}
		if rec.isCIE {
			if _, err := p.cie(rec.off); err != nil && !isReported(err) {
				p.errs = append(p.errs, err)
			}
			continue
		}
		if err := p.fde(rec, f); err != nil {
			p.errs = append(p.errs, err)
			continue
		}
		yield(f)
	}
}

// fdeAt parses the FDE whose record starts at off (one walk already
// accepted) into f.
func (p *parser) fdeAt(off int64, f *FDE) error {
	if _, ok := p.quickFDE(int(off), f); ok {
		return nil
	}
	rec, ok := p.frame(int(off))
	if !ok || rec.zeroLen || rec.body == 0 || rec.isCIE {
		return p.errorf(off, "no FDE at this offset")
	}
	return p.fde(rec, f)
}

// reported wraps a CIE error already in the list, so FDEs using that CIE
// don't repeat it.
type reported struct{ error }

func isReported(err error) bool { _, ok := err.(reported); return ok }

// cie parses (once) the CIE whose record starts at off.
func (p *parser) cie(off int64) (*CIE, error) {
	if p.last != nil && off == p.lastOff {
		return p.last, nil
	}
	if c := p.cies[off]; c != nil {
		p.lastOff, p.last = off, c
		return c, nil
	}
	if err := p.bad[off]; err != nil {
		return nil, reported{err}
	}
	c, err := p.parseCIE(off)
	if err != nil {
		p.bad[off] = err
		return nil, err
	}
	p.cies[off] = c
	return c, nil
}

func (p *parser) parseCIE(off int64) (*CIE, error) {
	if off < 0 || off >= int64(len(p.s.data)) {
		return nil, p.errorf(off, "CIE offset outside the section")
	}
	rec, ok := p.frame(int(off))
	if !ok {
		// frame appended the error; return it for FDEs that point here.
		err := p.errs[len(p.errs)-1]
		p.errs = p.errs[:len(p.errs)-1]
		return nil, err
	}
	if rec.zeroLen || rec.body == 0 || !rec.isCIE {
		return nil, p.errorf(off, "no CIE at this offset")
	}
	r := p.reader(p.s.data[:rec.end], rec.body)
	c := &CIE{Offset: off}
	c.version = r.u8()
	switch c.version {
	case 1, 3, 4:
	default:
		if r.err == nil {
			return nil, p.errorf(off, "unsupported CIE version %d", c.version)
		}
	}
	c.augmentation = r.cstring()
	aug := c.augmentation
	if strings.HasPrefix(aug, "eh") {
		r.bytes(p.s.ptrSize) // GCC 2.x exception-handler data
		aug = aug[2:]
	}
	if c.version == 4 {
		c.addrSize = r.u8()
		c.segSize = r.u8()
		if r.err == nil && c.addrSize != 1 && c.addrSize != 2 && c.addrSize != 4 && c.addrSize != 8 {
			return nil, p.errorf(off, "unsupported CIE address size %d", c.addrSize)
		}
		if r.err == nil && c.segSize != 0 {
			return nil, p.errorf(off, "segmented addresses (segment selector size %d) are not supported", c.segSize)
		}
	}
	c.CodeAlign = r.uleb()
	c.DataAlign = r.sleb()
	if c.version == 1 {
		c.RAColumn = uint64(r.u8())
	} else {
		c.RAColumn = r.uleb()
	}
	if r.err != nil {
		return nil, p.errorf(off, "truncated CIE: %v", r.err)
	}
	if aug != "" {
		if aug[0] != 'z' {
			return nil, p.errorf(off, "unsupported augmentation %q", c.augmentation)
		}
		n := r.uleb()
		if r.err != nil || n > uint64(r.left()) {
			return nil, p.errorf(off, "CIE augmentation data length %d runs past the record", n)
		}
		data := r.off
		ar := p.reader(p.s.data[:data+int(n)], data)
		ctx := ptrCtx{sec: p.s, ptrSize: p.s.ptrSize}
	augLoop:
		for _, ch := range aug[1:] {
			switch ch {
			case 'L':
				c.lsdaEnc = ar.u8()
			case 'R':
				c.fdeEnc = ar.u8()
			case 'P':
				enc := ar.u8()
				v, err := readEncoded(ar, enc&^peIndirect, ctx)
				if err != nil {
					return nil, p.errorf(off, "CIE personality pointer: %v", err)
				}
				c.personality = v
			case 'S':
				c.Signal = true
			case 'B':
				c.BKey = true
			case 'G':
				c.mteTagged = true
			default:
				// Unknown augmentation: its data (if any) is covered by the
				// 'z' length, but nothing after it can be interpreted.
				break augLoop
			}
		}
		if ar.err != nil {
			return nil, p.errorf(off, "truncated CIE augmentation data")
		}
		r.off = data + int(n)
	}
	c.Initial = r.b[r.off:rec.end:rec.end]
	c.initOff = r.off
	c.augZ, c.augL = c.hasZ(), strings.Contains(c.augmentation, "L")
	return c, nil
}

func (c *CIE) hasZ() bool {
	a := strings.TrimPrefix(c.augmentation, "eh")
	return strings.HasPrefix(a, "z")
}

// pcrelSdata4 reads an FDE's address fields encoded DW_EH_PE_pcrel |
// DW_EH_PE_sdata4, as readEncoded and readRange do; r has 8 bytes left.
func (p *parser) pcrelSdata4(r *reader) (start, size uint64) {
	b := r.b[r.off : r.off+8]
	var s, n int32
	if p.le {
		s, n = int32(binary.LittleEndian.Uint32(b)), int32(binary.LittleEndian.Uint32(b[4:]))
	} else {
		s, n = int32(p.s.order.Uint32(b)), int32(p.s.order.Uint32(b[4:]))
	}
	start, size = p.pcrel(s, r.off), uint64(int64(n))
	if p.s.ptrSize == 4 {
		size &= 0xffffffff
	}
	r.off += 8
	return start, size
}

// pcrel is the pointer a DW_EH_PE_pcrel | DW_EH_PE_sdata4 field at
// section offset off holding v stands for, as readEncoded makes it.
func (p *parser) pcrel(v int32, off int) uint64 {
	a := uint64(int64(v)) + p.s.addr + uint64(off)
	if p.s.ptrSize == 4 {
		a &= 0xffffffff
	}
	return a
}

// quickFDE parses the record at off into f as frame and fde would, when
// it is an FDE of the shape nearly every little-endian .eh_frame FDE
// has: a 32-bit length, a pointer to the CIE found last, addresses (and
// an LSDA, if any) encoded DW_EH_PE_pcrel | DW_EH_PE_sdata4, augmentation
// data of under 128 bytes. It returns the offset of the next record; ok
// is false for any other record, which frame and fde then read (every
// malformed record among them).
func (p *parser) quickFDE(off int, f *FDE) (next int, ok bool) {
	d := p.s.data
	cie := p.last
	if p.slow || !p.le || p.s.kind != kindEH || cie == nil || cie.fdeEnc != pePCRel|peSdata4 || off < 0 || len(d)-off < 16 {
		return 0, false
	}
	length := binary.LittleEndian.Uint32(d[off:])
	idOff := off + 4
	if length < 12 || length >= 0xfffffff0 || uint64(length) > uint64(len(d)-idOff) {
		return 0, false // short, reserved or 64-bit lengths, or past the end
	}
	end := idOff + int(length)
	if id := binary.LittleEndian.Uint32(d[idOff:]); id == 0 || int64(idOff)-int64(id) != p.lastOff {
		return 0, false
	}
	body := idOff + 4
	start := p.pcrel(int32(binary.LittleEndian.Uint32(d[body:])), body)
	size := uint64(int64(int32(binary.LittleEndian.Uint32(d[body+4:]))))
	if p.s.ptrSize == 4 {
		size &= 0xffffffff
	}
	if start+size < start && size != 0 {
		return 0, false
	}
	q, lsda := body+8, uint64(0)
	if cie.augZ {
		if q >= end || d[q] >= 0x80 || int(d[q]) > end-q-1 {
			return 0, false
		}
		n := int(d[q])
		q++
		if cie.lsdaEnc != peOmit && cie.augL && n > 0 {
			if cie.lsdaEnc&^peIndirect != pePCRel|peSdata4 || n < 4 {
				return 0, false
			}
			lsda = p.pcrel(int32(binary.LittleEndian.Uint32(d[q:])), q)
		}
		q += n
	}
	*f = FDE{Offset: int64(off), CIE: cie, Start: start, Size: size, StartField: int64(body), lsda: lsda,
		Program: d[q:end:end], sec: p.s, progOff: q}
	return end, true
}

// fde parses the FDE of rec into f.
func (p *parser) fde(rec record, f *FDE) error {
	var ciePos int64
	if p.s.kind == kindEH {
		ciePos = int64(rec.idOff) - int64(rec.id)
	} else {
		ciePos = int64(rec.id)
	}
	if ciePos < 0 || ciePos >= int64(len(p.s.data)) {
		return p.errorf(rec.off, "FDE's CIE pointer %#x points outside the section", rec.id)
	}
	cie, err := p.cie(ciePos)
	if err != nil {
		if isReported(err) {
			return p.errorf(rec.off, "FDE uses the malformed CIE at offset %#x", ciePos)
		}
		p.errs = append(p.errs, err)
		return p.errorf(rec.off, "FDE uses the malformed CIE at offset %#x", ciePos)
	}
	r := p.reader(p.s.data[:rec.end], rec.body)
	*f = FDE{Offset: rec.off, CIE: cie, StartField: int64(r.off)}
	ctx := ptrCtx{sec: p.s, ptrSize: p.s.ptrSize}
	switch {
	case p.s.kind == kindEH && cie.fdeEnc == pePCRel|peSdata4 && r.left() >= 8:
		// What every common linker writes: readEncoded's result for
		// it, without its general steps.
		f.Start, f.Size = p.pcrelSdata4(r)
	case p.s.kind == kindEH:
		f.Start, err = readEncoded(r, cie.fdeEnc, ctx)
		if err == nil {
			f.Size, err = readRange(r, cie.fdeEnc, ctx)
		}
	default:
		size := p.s.ptrSize
		if cie.addrSize != 0 {
			size = int(cie.addrSize)
		}
		f.Start = r.uN(size)
		f.Size = r.uN(size)
		err = r.err
	}
	if err != nil {
		return p.errorf(rec.off, "FDE address fields: %v", err)
	}
	if cie.augZ {
		n := r.uleb()
		if r.err != nil || n > uint64(r.left()) {
			return p.errorf(rec.off, "FDE augmentation data length %d runs past the record", n)
		}
		if cie.lsdaEnc != peOmit && cie.augL && n > 0 {
			ar := p.reader(p.s.data[:r.off+int(n)], r.off)
			ctx.funcStart = f.Start
			f.lsda, _ = readEncoded(ar, cie.lsdaEnc&^peIndirect, ctx)
		}
		r.off += int(n)
	}
	if f.Start+f.Size < f.Start && f.Size != 0 {
		return p.errorf(rec.off, "FDE range [%#x, +%#x) wraps around", f.Start, f.Size)
	}
	f.Program = r.b[r.off:rec.end:rec.end]
	f.sec, f.progOff = p.s, r.off
	return nil
}
