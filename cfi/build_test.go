package cfi

import "encoding/binary"

// bld assembles CFI bytes for tests.
type bld struct {
	b     []byte
	order binary.AppendByteOrder
}

func (b *bld) u8(v ...byte) *bld { b.b = append(b.b, v...); return b }
func (b *bld) u32(v uint32) *bld { b.b = b.order.AppendUint32(b.b, v); return b }
func (b *bld) u64(v uint64) *bld { b.b = b.order.AppendUint64(b.b, v); return b }
func (b *bld) str(s string) *bld { b.b = append(append(b.b, s...), 0); return b }
func (b *bld) uleb(v uint64) *bld {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			c |= 0x80
		}
		b.b = append(b.b, c)
		if v == 0 {
			return b
		}
	}
}
func (b *bld) sleb(v int64) *bld {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		done := (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0)
		if !done {
			c |= 0x80
		}
		b.b = append(b.b, c)
		if done {
			return b
		}
	}
}

// ins is a CFA instruction stream.
func ins(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func op(b ...byte) []byte { return b }

func uleb(v uint64) []byte { x := &bld{order: binary.LittleEndian}; return x.uleb(v).b }
func sleb(v int64) []byte  { x := &bld{order: binary.LittleEndian}; return x.sleb(v).b }

// cieSpec describes a CIE for ehFrame.
type cieSpec struct {
	version   byte
	aug       string
	augData   []byte // after the 'z' length
	codeAlign uint64
	dataAlign int64
	raCol     uint64
	initial   []byte
	pcrel     bool // FDE addresses are DW_EH_PE_pcrel|sdata4 ('R' 0x1b)
}

// fdeSpec describes an FDE; start is absolute (encoded pcrel sdata4 when
// the CIE says 'R' 0x1b, absptr otherwise).
type fdeSpec struct {
	start, size uint64
	augData     []byte
	program     []byte
}

var amd64CIE = cieSpec{version: 1, aug: "zR", augData: []byte{0x1b}, codeAlign: 1, dataAlign: -8, raCol: 16, pcrel: true,
	initial: ins(op(0x0c), uleb(7), uleb(8), op(0x80|16), uleb(1))} // def_cfa rsp+8; offset rip at cfa-8

// ehFrame builds an .eh_frame section at addr with one CIE and its FDEs.
func ehFrame(order binary.AppendByteOrder, addr uint64, c cieSpec, fdes ...fdeSpec) []byte {
	b := &bld{order: order}
	body := &bld{order: order}
	body.u32(0).u8(c.version).str(c.aug).uleb(c.codeAlign).sleb(c.dataAlign)
	if c.version == 1 {
		body.u8(byte(c.raCol))
	} else {
		body.uleb(c.raCol)
	}
	if len(c.aug) > 0 && c.aug[0] == 'z' {
		body.uleb(uint64(len(c.augData))).u8(c.augData...)
	}
	body.u8(c.initial...)
	for len(body.b)%8 != 4 {
		body.u8(0)
	}
	b.u32(uint32(len(body.b))).u8(body.b...)
	pcrel := c.pcrel
	for _, f := range fdes {
		start := len(b.b)
		fb := &bld{order: order}
		fb.u32(uint32(start + 4)) // CIE pointer: back to offset 0
		if pcrel {
			field := addr + uint64(start+8)
			fb.u32(uint32(int32(int64(f.start) - int64(field)))).u32(uint32(f.size))
		} else {
			fb.u64(f.start).u64(f.size)
		}
		if len(c.aug) > 0 && c.aug[0] == 'z' {
			fb.uleb(uint64(len(f.augData))).u8(f.augData...)
		}
		fb.u8(f.program...)
		b.u32(uint32(len(fb.b))).u8(fb.b...)
	}
	return b.u32(0).b
}
