package cfi

import (
	"encoding/binary"
	"errors"

	"github.com/cfi2sframe/cfi2sframe/internal/leb128"
)

// errShort is returned by reader methods that run out of bytes.
var errShort = errors.New("unexpected end of data")

// reader decodes DWARF values from a byte slice; every read is
// bounds-checked and the first failure is sticky.
type reader struct {
	b     []byte
	off   int // position in b
	order binary.ByteOrder
	le    bool // order is little-endian: read without the interface call
	err   error
}

// newReader reads b from off in byte order order.
func newReader(b []byte, off int, order binary.ByteOrder) *reader {
	return &reader{b: b, off: off, order: order, le: order == binary.LittleEndian}
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) left() int { return len(r.b) - r.off }

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.left() {
		r.fail(errShort)
		r.off = len(r.b)
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *reader) u8() uint8 {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(errShort)
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) u16() uint16 {
	b := r.bytes(2)
	if b == nil {
		return 0
	}
	if r.le {
		return binary.LittleEndian.Uint16(b)
	}
	return r.order.Uint16(b)
}

func (r *reader) u32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	if r.le {
		return binary.LittleEndian.Uint32(b)
	}
	return r.order.Uint32(b)
}

func (r *reader) u64() uint64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	if r.le {
		return binary.LittleEndian.Uint64(b)
	}
	return r.order.Uint64(b)
}

// uN reads an n-byte unsigned value (n = 1, 2, 4 or 8).
func (r *reader) uN(n int) uint64 {
	switch n {
	case 1:
		return uint64(r.u8())
	case 2:
		return uint64(r.u16())
	case 4:
		return uint64(r.u32())
	case 8:
		return r.u64()
	}
	r.fail(errors.New("unsupported address size"))
	return 0
}

func (r *reader) uleb() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := leb128.Uleb(r.b[r.off:])
	r.take(n)
	return v // 0 when it ran past the end
}

func (r *reader) sleb() int64 {
	if r.err != nil {
		return 0
	}
	v, n := leb128.Sleb(r.b[r.off:])
	r.take(n)
	return v
}

// take moves past the n bytes of a LEB128 number, or fails the reader
// when the number ran past the end (n 0).
func (r *reader) take(n int) {
	if n == 0 {
		r.off = len(r.b)
		r.fail(errShort)
		return
	}
	r.off += n
}

// cstring reads a NUL-terminated string.
func (r *reader) cstring() string {
	if r.err != nil {
		return ""
	}
	for i := r.off; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.off:i])
			r.off = i + 1
			return s
		}
	}
	r.fail(errors.New("unterminated string"))
	r.off = len(r.b)
	return ""
}
