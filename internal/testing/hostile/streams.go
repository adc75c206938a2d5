package hostile

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"

	"github.com/ulikunitz/xz"
)

// Compressed streams of zero bytes, for decompression bombs: each is built
// from one piece compressed once and repeated, so that a stream of 4 GiB
// costs milliseconds to make. Each decodes to exactly n zero bytes with
// valid checksums: what stops a reader is its own bound, not an error in
// the stream.

// zeroChunk is the uncompressed size of the repeated piece: n must be a
// multiple of it.
const zeroChunk = 8 << 20

func zeroChunks(n int64) int {
	if n <= 0 || n%zeroChunk != 0 {
		panic("hostile: a stream of zeros must be a positive multiple of 8 MiB")
	}
	return int(n / zeroChunk)
}

// crcZeros is the CRC32 of n zero bytes.
func crcZeros(n int64) uint32 {
	zero := make([]byte, 1<<20)
	var crc uint32
	for ; n > 0; n -= int64(len(zero)) {
		crc = crc32.Update(crc, crc32.IEEETable, zero[:min(n, int64(len(zero)))])
	}
	return crc
}

// GzipZeros is a gzip stream of n zero bytes (a multiple of 8 MiB): the
// deflate blocks of 8 MiB of zeros that follow zeros, ended by a sync
// flush (so byte-aligned), repeated; their matches reach back only into
// zeros.
func GzipZeros(n int64) []byte {
	k := zeroChunks(n)
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	zero := make([]byte, zeroChunk)
	w.Write(zero)
	w.Flush()
	first := buf.Len()
	w.Write(zero)
	w.Flush()
	b := []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	b = append(b, buf.Bytes()[:first]...)
	b = append(b, bytes.Repeat(buf.Bytes()[first:], k-1)...)
	b = append(b, 0x03, 0x00) // a last, empty block with fixed codes
	b = binary.LittleEndian.AppendUint32(b, crcZeros(n))
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

// ZstdZeros is a zstd frame of n zero bytes made of RLE blocks.
func ZstdZeros(n int64) []byte { return zstdZeros(int(n)) }

// bzip2Zeros is `head -c 8M /dev/zero | bzip2 -9`: Go has no bzip2
// writer. A bzip2 reader takes streams one after another.
var bzip2Zeros = []byte{
	0x42, 0x5a, 0x68, 0x39, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 0xa2, 0x3d, 0x4b, 0x58, 0x00, 0x40,
	0x40, 0x40, 0x80, 0xc0, 0x00, 0x00, 0x04, 0x00, 0x08, 0x20, 0x00, 0x30, 0xcc, 0x05, 0x29, 0xa6,
	0x01, 0x00, 0xd8, 0x80, 0x80, 0x78, 0xbb, 0x92, 0x29, 0xc2, 0x84, 0x85, 0x11, 0xea, 0x5a, 0xc0,
}

// Bzip2Zeros is n zero bytes (a multiple of 8 MiB) as bzip2 streams of
// 8 MiB each.
func Bzip2Zeros(n int64) []byte { return bytes.Repeat(bzip2Zeros, zeroChunks(n)) }

// XzZeros is an xz stream of n zero bytes (a multiple of 8 MiB): one
// block of 8 MiB, compressed by ulikunitz/xz, repeated, then an index
// listing every copy and the footer.
func XzZeros(n int64) []byte {
	k := zeroChunks(n)
	var buf bytes.Buffer
	w, err := xz.WriterConfig{DictCap: 1 << 20, CheckSum: xz.CRC32, BlockSize: 2 * zeroChunk}.NewWriter(&buf)
	if err != nil {
		panic(err)
	}
	w.Write(make([]byte, zeroChunk))
	w.Close()
	one := buf.Bytes()
	indexLen := int(binary.LittleEndian.Uint32(one[len(one)-8:])+1) * 4
	block := one[12 : len(one)-12-indexLen]
	// The index of one block: its indicator, 1 record, and the record's
	// unpadded size, which the one record gives.
	index := one[len(one)-12-indexLen:]
	unpadded, m := binary.Uvarint(index[2:])
	if m <= 0 || index[0] != 0 || index[1] != 1 {
		panic("hostile: unexpected xz index")
	}
	b := append([]byte{}, one[:12]...)
	b = append(b, bytes.Repeat(block, k)...)
	idx := []byte{0}
	idx = binary.AppendUvarint(idx, uint64(k))
	for i := 0; i < k; i++ {
		idx = binary.AppendUvarint(idx, unpadded)
		idx = binary.AppendUvarint(idx, zeroChunk)
	}
	for len(idx)%4 != 0 {
		idx = append(idx, 0)
	}
	idx = binary.LittleEndian.AppendUint32(idx, crc32.ChecksumIEEE(idx))
	b = append(b, idx...)
	footer := binary.LittleEndian.AppendUint32(nil, uint32(len(idx)/4-1))
	footer = append(footer, one[6:8]...) // the stream flags
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(footer))
	b = append(b, footer...)
	return append(b, 'Y', 'Z')
}
