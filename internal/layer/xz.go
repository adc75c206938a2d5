package layer

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"

	"github.com/ulikunitz/xz/lzma"
)

// The xz container (https://tukaani.org/xz/xz-file-format.txt) is read
// here, and only each block's LZMA2 data is handed to ulikunitz's
// lzma.Reader2, with the dictionary the block header declares once it
// is checked against MaxWindow. ulikunitz's xz reader allocates the
// declared dictionary, up to 4 GiB, with no limit; and a guard that
// merely watched the bytes it reads could be fooled, since that reader
// ends an LZMA chunk when its data is decoded, not where the chunk's
// header says: a chunk claiming more bytes than its data needs would hide
// a block header the guard took for chunk data. Here the LZMA2 decoder
// reads through a framing reader that hands on the block's chunks and
// nothing after them, and the block ends only where the chunks end.

var (
	xzMagic     = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	xzEndMagic  = []byte{'Y', 'Z'}
	crc64Table  = crc64.MakeTable(crc64.ECMA)
	errXzLength = errors.New("integer longer than 9 bytes")
)

const (
	xzHeaderLen = 12 // a stream header, or footer
	lzma2Filter = 0x21
)

// xzReader decodes an xz file: one stream or more, with stream padding
// between them.
type xzReader struct {
	in    *bufio.Reader
	check byte // the stream's check type
	// The current block (lz nil between blocks).
	lz     io.Reader
	data   lzma2Data
	hdrLen int64     // its header's size
	csize  int64     // the compressed size its header declares (-1: none)
	usize  int64     // the uncompressed size its header declares (-1: none)
	out    int64     // bytes it decoded
	sum    hash.Hash // its check (nil: none)
	// The blocks of the stream, as its index must list them.
	blocks  uint64
	records hash.Hash
	err     error
}

// newXzReader reads the first stream header of the xz file r, which it
// reads through a buffer of size bytes (at least 1 KiB, for a block
// header).
func newXzReader(r io.Reader, size int) (*xzReader, error) {
	x := &xzReader{in: bufio.NewReaderSize(r, max(size, 1<<10))}
	x.data.in = x.in
	if err := x.streamHeader(); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *xzReader) Read(p []byte) (int, error) {
	for x.err == nil && len(p) > 0 {
		if x.lz == nil {
			x.err = x.next()
			continue
		}
		n, err := x.lz.Read(p)
		x.out += int64(n)
		if x.sum != nil {
			x.sum.Write(p[:n])
		}
		if err == io.EOF {
			err = x.endBlock()
		}
		if err != nil {
			x.err = err
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, x.err
}

// next reads what follows a block, or a stream's header: the next block's
// header, or the index, the footer, stream padding and the next stream's
// header (io.EOF if the file ends there).
func (x *xzReader) next() error {
	b, err := x.in.Peek(1)
	if err != nil {
		return noEOF(err)
	}
	if b[0] != 0 {
		return x.blockHeader(int(b[0]))
	}
	indexLen, err := x.index()
	if err != nil {
		return err
	}
	if err := x.footer(indexLen); err != nil {
		return err
	}
	for {
		pad, err := x.in.Peek(4)
		switch {
		case len(pad) == 0 && err == io.EOF:
			return io.EOF
		case err != nil:
			return fmt.Errorf("stream padding: %w", noEOF(err))
		case bytes.Equal(pad, []byte{0, 0, 0, 0}):
			x.in.Discard(4)
			continue
		}
		return x.streamHeader()
	}
}

// streamHeader reads a stream header: magic bytes, flags (the check
// type), CRC32 of the flags.
func (x *xzReader) streamHeader() error {
	h, err := x.in.Peek(xzHeaderLen)
	if err != nil {
		return noEOF(err)
	}
	switch {
	case !bytes.Equal(h[:6], xzMagic):
		return errors.New("not an xz stream (bad magic bytes)")
	case crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:]):
		return errors.New("stream header: CRC32 mismatch")
	case h[6] != 0 || h[7]&0xf0 != 0:
		return errors.New("stream header: unsupported flags")
	}
	if _, err := checkSize(h[7]); err != nil {
		return err
	}
	x.check, x.blocks, x.records = h[7], 0, sha256.New()
	x.in.Discard(xzHeaderLen)
	return nil
}

// checkSize is the size of the check field of type id; the types
// supported are none, CRC32, CRC64 and SHA-256.
func checkSize(id byte) (int, error) {
	switch id {
	case 0x00:
		return 0, nil
	case 0x01:
		return 4, nil
	case 0x04:
		return 8, nil
	case 0x0a:
		return 32, nil
	}
	return 0, fmt.Errorf("unsupported check type %#x", id)
}

// newCheck is the hash of a block's check (nil for none).
func newCheck(id byte) hash.Hash {
	switch id {
	case 0x01:
		return crc32.NewIEEE()
	case 0x04:
		return crc64.New(crc64Table)
	case 0x0a:
		return sha256.New()
	}
	return nil
}

// checkSum is the check field h gives, as the file stores it (CRC32 and
// CRC64 little-endian).
func checkSum(h hash.Hash) []byte {
	switch h := h.(type) {
	case nil:
		return nil
	case hash.Hash32:
		return binary.LittleEndian.AppendUint32(nil, h.Sum32())
	case hash.Hash64:
		return binary.LittleEndian.AppendUint64(nil, h.Sum64())
	default:
		return h.Sum(nil)
	}
}

// blockHeader reads the header of a block, of (code+1)×4 bytes, and
// starts decoding the block. A dictionary over MaxWindow is a
// *LimitError, found before anything is allocated for it.
func (x *xzReader) blockHeader(code int) error {
	size := (code + 1) * 4
	h, err := x.in.Peek(size)
	if err != nil {
		return fmt.Errorf("block header: %w", noEOF(err))
	}
	if crc32.ChecksumIEEE(h[:size-4]) != binary.LittleEndian.Uint32(h[size-4:]) {
		return errors.New("block header: CRC32 mismatch")
	}
	flags := h[1]
	if flags&0x3c != 0 {
		return errors.New("block header: reserved flags set")
	}
	p := h[2 : size-4]
	sizes := [2]int64{-1, -1} // compressed, uncompressed
	for i, bit := range []byte{0x40, 0x80} {
		if flags&bit == 0 {
			continue
		}
		v, n, err := uvarintOf(p)
		if err != nil || v == 0 && i == 0 {
			return errors.New("block header: bad size field")
		}
		sizes[i], p = int64(v), p[n:]
	}
	if flags&3 != 0 {
		return fmt.Errorf("block header: %d filters; only LZMA2 alone is supported", flags&3+1)
	}
	id, n, err := uvarintOf(p)
	if err != nil {
		return fmt.Errorf("block header: filter ID: %w", err)
	}
	p = p[n:]
	props, n, err := uvarintOf(p)
	if err != nil || id != lzma2Filter || props != 1 || n >= len(p) {
		return fmt.Errorf("block header: filter %#x with %d bytes of properties; only LZMA2 is supported", id, props)
	}
	dict, err := lzma2Dict(p[n])
	if err != nil {
		return err
	}
	if dict > MaxWindow {
		return &LimitError{What: "dictionary", Got: dict, Limit: MaxWindow, codec: Xz}
	}
	for _, b := range p[n+1:] {
		if b != 0 {
			return errors.New("block header: non-zero padding")
		}
	}
	x.in.Discard(size)
	x.hdrLen, x.csize, x.usize, x.out = int64(size), sizes[0], sizes[1], 0
	x.sum = newCheck(x.check)
	x.data = lzma2Data{in: x.in}
	lz, err := lzma.Reader2Config{DictCap: max(int(dict), lzma.MinDictCap)}.NewReader2(&x.data)
	if err != nil {
		return err
	}
	x.lz = lz
	return nil
}

// lzma2Dict is the dictionary size an LZMA2 properties byte declares.
func lzma2Dict(b byte) (int64, error) {
	switch {
	case b > 40:
		return 0, fmt.Errorf("block header: LZMA2 dictionary size byte %#x", b)
	case b == 40:
		return 1<<32 - 1, nil
	}
	return int64(2|b&1) << (b/2 + 11), nil
}

// endBlock checks a block whose LZMA2 data is decoded: its data ended
// where its chunks say, its sizes, padding and check; and it counts the
// block for the index.
func (x *xzReader) endBlock() error {
	x.lz = nil
	if !x.data.done || x.data.left > 0 {
		return errors.New("block: the LZMA2 data ends before its end marker")
	}
	csize := x.data.n
	if x.csize >= 0 && x.csize != csize || x.usize >= 0 && x.usize != x.out {
		return errors.New("block: sizes differ from its header's")
	}
	cs, _ := checkSize(x.check)
	pad := int((4 - csize%4) % 4)
	b, err := x.in.Peek(pad + cs)
	if err != nil {
		return fmt.Errorf("block check: %w", noEOF(err))
	}
	if !bytes.Equal(b[:pad], make([]byte, pad)) {
		return errors.New("block: non-zero padding")
	}
	if !bytes.Equal(b[pad:], checkSum(x.sum)) {
		return errors.New("block: check mismatch (the data is corrupt)")
	}
	x.in.Discard(pad + cs)
	x.blocks++
	x.records.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(x.hdrLen+csize+int64(cs))), uint64(x.out)))
	return nil
}

// index reads a stream's index and checks it lists the blocks read; it
// returns the index's size.
func (x *xzReader) index() (int64, error) {
	crc := crc32.NewIEEE()
	var n int64
	next := func() (byte, error) {
		b, err := x.in.ReadByte()
		if err != nil {
			return 0, fmt.Errorf("index: %w", noEOF(err))
		}
		crc.Write([]byte{b})
		n++
		return b, nil
	}
	next() // the indicator, 0
	count, err := uvarint(next)
	if err != nil {
		return 0, err
	}
	if count != x.blocks {
		return 0, fmt.Errorf("index: %d records for %d blocks", count, x.blocks)
	}
	records := sha256.New()
	for i := uint64(0); i < count; i++ {
		unpadded, err := uvarint(next)
		if err != nil {
			return 0, err
		}
		size, err := uvarint(next)
		if err != nil {
			return 0, err
		}
		records.Write(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, unpadded), size))
	}
	if !bytes.Equal(records.Sum(nil), x.records.Sum(nil)) {
		return 0, errors.New("index: its records differ from the blocks")
	}
	for n%4 != 0 {
		if b, err := next(); err != nil || b != 0 {
			return 0, errors.New("index: bad padding")
		}
	}
	sum := crc.Sum32()
	b, err := x.in.Peek(4)
	if err != nil {
		return 0, fmt.Errorf("index: %w", noEOF(err))
	}
	if binary.LittleEndian.Uint32(b) != sum {
		return 0, errors.New("index: CRC32 mismatch")
	}
	x.in.Discard(4)
	return n + 4, nil
}

// footer reads a stream footer: CRC32, the index size, flags, magic
// bytes.
func (x *xzReader) footer(indexLen int64) error {
	f, err := x.in.Peek(xzHeaderLen)
	if err != nil {
		return fmt.Errorf("stream footer: %w", noEOF(err))
	}
	switch {
	case !bytes.Equal(f[10:], xzEndMagic):
		return errors.New("stream footer: bad magic bytes")
	case crc32.ChecksumIEEE(f[4:10]) != binary.LittleEndian.Uint32(f):
		return errors.New("stream footer: CRC32 mismatch")
	case f[8] != 0 || f[9] != x.check:
		return errors.New("stream footer: flags differ from the header's")
	case (int64(binary.LittleEndian.Uint32(f[4:]))+1)*4 != indexLen:
		return errors.New("stream footer: the index size differs")
	}
	x.in.Discard(xzHeaderLen)
	return nil
}

// uvarint reads a multibyte integer: at most 9 bytes, 7 bits each, low
// first, with no needless zero byte at its end.
func uvarint(next func() (byte, error)) (uint64, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		b, err := next()
		if err != nil {
			return 0, err
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			if b == 0 && i > 0 {
				return 0, errors.New("integer with a needless zero byte")
			}
			return v, nil
		}
	}
	return 0, errXzLength
}

// uvarintOf reads a multibyte integer from p: its value and length.
func uvarintOf(p []byte) (uint64, int, error) {
	i := 0
	v, err := uvarint(func() (byte, error) {
		if i == len(p) {
			return 0, io.ErrUnexpectedEOF
		}
		i++
		return p[i-1], nil
	})
	return v, i, err
}

// lzma2Data hands on a block's LZMA2 chunks, headers and data, as their
// headers frame them, up to the end marker and no further.
type lzma2Data struct {
	in   *bufio.Reader
	left int   // bytes of the current chunk not handed on yet
	done bool  // the current chunk is the end marker
	n    int64 // bytes handed on
}

func (d *lzma2Data) Read(p []byte) (int, error) {
	if d.left == 0 {
		if d.done {
			return 0, io.EOF
		}
		if err := d.chunk(); err != nil {
			return 0, err
		}
	}
	n, err := d.in.Read(p[:min(len(p), d.left)])
	d.left -= n
	d.n += int64(n)
	return n, noEOF(err)
}

// chunk frames the next chunk from its header: 0x00 ends the data;
// 0x01 and 0x02 start an uncompressed chunk, whose size-1 follows in 16
// bits; 0x80 to 0xff an LZMA chunk, with its unpacked size-1 (21 bits,
// the control byte's low 5 and 16 more) and packed size-1 (16 bits), and
// from 0xc0 a properties byte.
func (d *lzma2Data) chunk() error {
	c, err := d.in.Peek(1)
	if err != nil {
		return noEOF(err)
	}
	switch ctl := c[0]; {
	case ctl == 0:
		d.left, d.done = 1, true
	case ctl == 1 || ctl == 2:
		h, err := d.in.Peek(3)
		if err != nil {
			return noEOF(err)
		}
		d.left = 3 + int(binary.BigEndian.Uint16(h[1:])) + 1
	case ctl >= 0x80:
		hl := 5
		if ctl >= 0xc0 {
			hl = 6
		}
		h, err := d.in.Peek(hl)
		if err != nil {
			return noEOF(err)
		}
		d.left = hl + int(binary.BigEndian.Uint16(h[3:])) + 1
	default:
		return fmt.Errorf("LZMA2 chunk control byte %#x", ctl)
	}
	return nil
}
