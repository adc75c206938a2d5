// Package leb128 decodes and encodes the LEB128 numbers of DWARF
// call-frame information: one decoder for cfi's parser and interpreter,
// translate's direct path and the expression recognisers, one encoder
// for the .debug_frame images made of Go's tables and of code.
package leb128

// Uleb decodes the unsigned LEB128 number at the start of p (bits past 64
// dropped); n is the bytes it took, 0 when it runs past p.
func Uleb(p []byte) (v uint64, n int) {
	var shift uint
	for n < len(p) {
		c := p[n]
		n++
		if shift < 64 {
			v |= uint64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			return v, n
		}
	}
	return 0, 0
}

// Sleb decodes the signed LEB128 number at the start of p (bits past 64
// dropped); n is the bytes it took, 0 when it runs past p.
func Sleb(p []byte) (v int64, n int) {
	var shift uint
	for n < len(p) {
		c := p[n]
		n++
		if shift < 64 {
			v |= int64(c&0x7f) << shift
		}
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, n
		}
	}
	return 0, 0
}

// AppendUleb appends v as an unsigned LEB128 number.
func AppendUleb(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendSleb appends v as a signed LEB128 number.
func AppendSleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
