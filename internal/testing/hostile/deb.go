package hostile

import (
	"encoding/binary"
	"hash/crc32"
)

// Deb is a Debian package as dpkg-deb lays one out: an ar archive of
// debian-binary ("2.0"), then the control member and the data member,
// named and holding what is given.
func Deb(control string, controlData []byte, data string, dataData []byte) []byte {
	b := []byte("!<arch>\n")
	b = append(b, ArMember("debian-binary", []byte("2.0\n"))...)
	b = append(b, ArMember(control, controlData)...)
	return append(b, ArMember(data, dataData)...)
}

// SetXzDict makes the block header at off of the xz file b declare an
// LZMA2 dictionary of size code (40: 4 GiB; 2|code&1 << (code/2+11)
// below), and makes the header's CRC32 right again: the block still
// decodes, with whatever dictionary a reader allocates for it.
func SetXzDict(b []byte, off int, code byte) {
	size := (int(b[off]) + 1) * 4
	h := b[off : off+size]
	p := 2
	for _, bit := range []byte{0x40, 0x80} { // compressed and uncompressed sizes
		if h[1]&bit != 0 {
			_, n := binary.Uvarint(h[p:])
			p += n
		}
	}
	if h[p] != 0x21 || h[p+1] != 1 {
		panic("hostile: the block's first filter is not LZMA2")
	}
	h[p+2] = code
	binary.LittleEndian.PutUint32(h[size-4:], crc32.ChecksumIEEE(h[:size-4]))
}
