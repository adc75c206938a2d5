package rpm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// headerMagic starts every header structure: three magic bytes, the
// version (1) and four reserved bytes.
var headerMagic = []byte{0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0}

// The types of header values.
const (
	typeNull        = 0
	typeChar        = 1
	typeInt8        = 2
	typeInt16       = 3
	typeInt32       = 4
	typeInt64       = 5
	typeString      = 6
	typeBin         = 7
	typeStringArray = 8
	typeI18NString  = 9
)

// align is the alignment of each type's data in the data store.
var align = [...]int{typeNull: 1, typeChar: 1, typeInt8: 1, typeInt16: 2, typeInt32: 4, typeInt64: 8,
	typeString: 1, typeBin: 1, typeStringArray: 1, typeI18NString: 1}

// The region tags: a header's first entry, whose data (the trailer, at
// the end of the data store) says how many entries the region holds.
const (
	tagHeaderImage      = 61
	tagHeaderSignatures = 62
	tagHeaderImmutable  = 63
	regionSize          = 16 // an index entry, and a region's trailer
)

// Limits rpm itself puts on a header (lib/header.cc): what a header may
// declare before a byte of it is read.
const (
	maxEntries    = 0xffff
	maxData       = 0x0fffffff
	maxSigEntries = 32
	maxSigData    = 64 << 20
	maxArray      = 0x000fffff
)

// Entry is one index entry of a header and its value, the bytes of the
// data store it covers (for a region tag, the trailer).
type Entry struct {
	Tag, Type, Count uint32
	Offset           int32
	Value            []byte
}

// Header is a header structure (the signature header or the main
// header), as read: its entries in index order, each with its value.
// Bytes writes it back byte for byte until a value changes size; then
// the data store is laid out again in index order, each value at the
// next offset its type's alignment allows, the region's trailer last,
// as rpm lays a header out.
type Header struct {
	Entries []Entry
	data    []byte // the data store; nil once a value changed size
}

// readHeader reads the header at off in r, whose size is size bytes;
// sig says it is the signature header (rpm's tighter limits apply).
// What the intro declares is checked against the limits and the file's
// size before anything more is read. n is the header's size.
func readHeader(r io.ReaderAt, off, size int64, sig bool) (h *Header, n int64, err error) {
	var intro [16]byte
	if _, err := r.ReadAt(intro[:], off); err != nil {
		return nil, 0, fmt.Errorf("header at offset %d: %w", off, noEOF(err))
	}
	if !bytes.Equal(intro[:8], headerMagic) {
		return nil, 0, fmt.Errorf("header at offset %d: bad magic %x", off, intro[:8])
	}
	il, dl := int64(binary.BigEndian.Uint32(intro[8:])), int64(binary.BigEndian.Uint32(intro[12:]))
	maxIL, maxDL := int64(maxEntries), int64(maxData)
	if sig {
		maxIL, maxDL = maxSigEntries, maxSigData
	}
	if il < 1 || il > maxIL || dl > maxDL {
		return nil, 0, fmt.Errorf("header at offset %d: %d entries and %d data bytes, over rpm's limits (%d, %d)", off, il, dl, maxIL, maxDL)
	}
	n = 16 + il*16 + dl
	if n > size-off {
		return nil, 0, fmt.Errorf("header at offset %d: %d bytes declared, %d left in the file", off, n, size-off)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, off); err != nil {
		return nil, 0, fmt.Errorf("header at offset %d: %w", off, noEOF(err))
	}
	h, err = parseHeader(b)
	if err != nil {
		return nil, 0, fmt.Errorf("header at offset %d: %w", off, err)
	}
	return h, n, nil
}

// parseHeader parses a whole header, magic included, as rpm checks one
// of a package file: a region tag first whose trailer ends the data
// store and covers every entry, then entries whose values are of their
// type's size and alignment, in order and not overlapping.
func parseHeader(b []byte) (*Header, error) {
	if len(b) < 16 || !bytes.Equal(b[:8], headerMagic) {
		return nil, errors.New("bad magic")
	}
	il, dl := uint64(binary.BigEndian.Uint32(b[8:])), uint64(binary.BigEndian.Uint32(b[12:]))
	if il < 1 || il > maxEntries || dl > maxData || uint64(len(b)) != 16+16*il+dl {
		return nil, fmt.Errorf("%d entries and %d data bytes in a header of %d bytes", il, dl, len(b))
	}
	index, data := b[16:16+16*il], b[16+16*il:]
	h := &Header{Entries: make([]Entry, il), data: data}
	end := 0
	for i := range h.Entries {
		e := &h.Entries[i]
		p := index[16*i:]
		e.Tag, e.Type = binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		e.Offset, e.Count = int32(binary.BigEndian.Uint32(p[8:])), binary.BigEndian.Uint32(p[12:])
		if err := h.value(i, end); err != nil {
			return nil, fmt.Errorf("entry %d (tag %d, type %d, offset %d, count %d): %w", i, e.Tag, e.Type, e.Offset, e.Count, err)
		}
		if i > 0 {
			end = int(e.Offset) + len(e.Value)
		}
	}
	if err := h.checkRegion(); err != nil {
		return nil, err
	}
	return h, nil
}

// value finds entry i's value in the data store; end is where the
// previous entry's value ends (a region's trailer, entry 0, is apart).
func (h *Header) value(i, end int) error {
	e := &h.Entries[i]
	switch {
	case e.Type < typeChar || e.Type > typeI18NString:
		return errors.New("unknown type")
	case e.Count < 1 || e.Count > uint32(len(h.data)) || e.Type != typeBin && e.Count > maxArray:
		return errors.New("bad count")
	case e.Offset < 0 || int(e.Offset) > len(h.data):
		return errors.New("offset outside the data store")
	case int(e.Offset)%align[e.Type] != 0:
		return errors.New("misaligned")
	case i > 0 && int(e.Offset) < end:
		return errors.New("overlaps the previous entry")
	}
	n, err := valueLen(e.Type, e.Count, h.data[e.Offset:])
	if err != nil {
		return err
	}
	e.Value = h.data[e.Offset : int(e.Offset)+n]
	return nil
}

// valueLen is the size of a value of type t and count values at the
// start of p.
func valueLen(t, count uint32, p []byte) (int, error) {
	var n uint64
	switch t {
	case typeChar, typeInt8, typeBin:
		n = uint64(count)
	case typeInt16:
		n = 2 * uint64(count)
	case typeInt32:
		n = 4 * uint64(count)
	case typeInt64:
		n = 8 * uint64(count)
	case typeString, typeStringArray, typeI18NString:
		if t == typeString && count != 1 {
			return 0, errors.New("a string of count other than 1")
		}
		for range count {
			k := bytes.IndexByte(p[n:], 0)
			if k < 0 {
				return 0, errors.New("unterminated string")
			}
			n += uint64(k) + 1
		}
	}
	if n > uint64(len(p)) {
		return 0, errors.New("value past the data store")
	}
	return int(n), nil
}

// checkRegion checks the region tag that starts a package's header and
// its trailer, which must end the data store and count every entry.
func (h *Header) checkRegion() error {
	e := h.Entries[0]
	if e.Tag != tagHeaderSignatures && e.Tag != tagHeaderImmutable && e.Tag != tagHeaderImage {
		return fmt.Errorf("first tag %d, not a region tag", e.Tag)
	}
	if e.Type != typeBin || e.Count != regionSize || int(e.Offset)+regionSize != len(h.data) {
		return fmt.Errorf("region tag %d: type %d, count %d, trailer at %d of %d data bytes", e.Tag, e.Type, e.Count, e.Offset, len(h.data))
	}
	t := e.Value
	tag, typ := binary.BigEndian.Uint32(t), binary.BigEndian.Uint32(t[4:])
	off, count := int64(int32(binary.BigEndian.Uint32(t[8:]))), binary.BigEndian.Uint32(t[12:])
	// Old packages name HEADERIMAGE in the signature region's trailer.
	if tag != e.Tag && !(e.Tag == tagHeaderSignatures && tag == tagHeaderImage) || typ != typeBin || count != regionSize {
		return fmt.Errorf("region trailer: tag %d, type %d, count %d", tag, typ, count)
	}
	if -off != int64(16*len(h.Entries)) {
		return fmt.Errorf("region trailer: covers %d bytes of index, not the %d entries", -off, len(h.Entries))
	}
	for _, e := range h.Entries[1:] {
		if int(e.Offset)+len(e.Value) > len(h.data)-regionSize {
			return fmt.Errorf("tag %d: overlaps the region trailer", e.Tag)
		}
	}
	return nil
}

// Find is the entry of tag tag (nil if none).
func (h *Header) Find(tag uint32) *Entry {
	for i := range h.Entries {
		if h.Entries[i].Tag == tag {
			return &h.Entries[i]
		}
	}
	return nil
}

// Set gives tag's entry the value v (of the same type and count).
func (h *Header) Set(tag uint32, v []byte) error {
	e := h.Find(tag)
	if e == nil {
		return fmt.Errorf("tag %d: absent", tag)
	}
	if len(v) == len(e.Value) && h.data != nil {
		copy(e.Value, v) // in place: every other byte stays where it was
		return nil
	}
	e.Value = bytes.Clone(v)
	h.data = nil
	return nil
}

// Delete removes the entries whose tag drop says to remove and returns
// their tags; the rest are laid out again.
func (h *Header) Delete(drop func(tag uint32) bool) []uint32 {
	var gone []uint32
	kept := h.Entries[:0:0]
	for i, e := range h.Entries {
		if i > 0 && drop(e.Tag) {
			gone = append(gone, e.Tag)
			continue
		}
		kept = append(kept, e)
	}
	if len(gone) > 0 {
		h.Entries, h.data = kept, nil
	}
	return gone
}

// Bytes is the header, magic included.
func (h *Header) Bytes() []byte {
	if h.data == nil {
		h.layout()
	}
	b := make([]byte, 0, 16+16*len(h.Entries)+len(h.data))
	b = append(b, headerMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(h.Entries)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h.data)))
	for _, e := range h.Entries {
		b = binary.BigEndian.AppendUint32(b, e.Tag)
		b = binary.BigEndian.AppendUint32(b, e.Type)
		b = binary.BigEndian.AppendUint32(b, uint32(e.Offset))
		b = binary.BigEndian.AppendUint32(b, e.Count)
	}
	return append(b, h.data...)
}

// layout lays the data store out again: the values in index order, each
// aligned for its type, then the region's trailer, which counts the
// entries there are now.
func (h *Header) layout() {
	var data []byte
	for i := 1; i < len(h.Entries); i++ {
		e := &h.Entries[i]
		for len(data)%align[e.Type] != 0 {
			data = append(data, 0)
		}
		e.Offset = int32(len(data))
		data = append(data, e.Value...)
	}
	r := &h.Entries[0]
	trailer := bytes.Clone(r.Value)
	binary.BigEndian.PutUint32(trailer[8:], uint32(-16*int32(len(h.Entries))))
	r.Offset = int32(len(data))
	data = append(data, trailer...)
	h.data = data
	// The values now point into the new store, so that a later Set of
	// the same size writes there.
	for i := range h.Entries {
		e := &h.Entries[i]
		e.Value = data[e.Offset : int(e.Offset)+len(e.Value)]
	}
}

// Size is the header's size in bytes.
func (h *Header) Size() int64 {
	if h.data == nil {
		h.layout()
	}
	return int64(16 + 16*len(h.Entries) + len(h.data))
}

// Strings is the value of a string, string array or I18N string entry.
func (h *Header) Strings(tag uint32) ([]string, bool) {
	e := h.Find(tag)
	if e == nil || e.Type != typeString && e.Type != typeStringArray && e.Type != typeI18NString {
		return nil, false
	}
	parts := bytes.Split(e.Value[:len(e.Value)-1], []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out, true
}

// String is the value of a string entry ("" if none).
func (h *Header) String(tag uint32) string {
	s, ok := h.Strings(tag)
	if !ok || len(s) == 0 {
		return ""
	}
	return s[0]
}

// Ints is the value of an integer entry, whatever its width.
func (h *Header) Ints(tag uint32) ([]uint64, bool) {
	e := h.Find(tag)
	if e == nil {
		return nil, false
	}
	var w int
	switch e.Type {
	case typeChar, typeInt8:
		w = 1
	case typeInt16:
		w = 2
	case typeInt32:
		w = 4
	case typeInt64:
		w = 8
	default:
		return nil, false
	}
	out := make([]uint64, e.Count)
	for i := range out {
		p := e.Value[i*w:]
		switch w {
		case 1:
			out[i] = uint64(p[0])
		case 2:
			out[i] = uint64(binary.BigEndian.Uint16(p))
		case 4:
			out[i] = uint64(binary.BigEndian.Uint32(p))
		case 8:
			out[i] = binary.BigEndian.Uint64(p)
		}
	}
	return out, true
}

// encodeInts encodes vs as the value of an integer entry of type t.
func encodeInts(t uint32, vs []uint64) ([]byte, error) {
	var b []byte
	for _, v := range vs {
		switch t {
		case typeInt32:
			if v > 0xffffffff {
				return nil, fmt.Errorf("%d does not fit a 32-bit size", v)
			}
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		case typeInt64:
			b = binary.BigEndian.AppendUint64(b, v)
		default:
			return nil, fmt.Errorf("a size of type %d", t)
		}
	}
	return b, nil
}

// encodeStrings encodes ss as the value of a string (array) entry.
func encodeStrings(ss []string) []byte {
	var b []byte
	for _, s := range ss {
		b = append(b, s...)
		b = append(b, 0)
	}
	return b
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
