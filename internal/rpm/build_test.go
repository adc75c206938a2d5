package rpm

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"sort"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// A package made in Go, as rpmbuild lays one out (the unit tests and
// fuzz seeds cannot count on rpmbuild).

// testFile is a file of a package made by buildRPM.
type testFile struct {
	name  string // absolute
	mode  uint64
	data  []byte // a symbolic link's target
	inode uint64 // files of one inode are hard links
}

// testPkg describes a package to make.
type testPkg struct {
	files    []testFile
	codec    layer.Codec
	algo     uint64 // file digests (0: none, MD5)
	stripped bool   // the 07070X payload, LONGFILESIZES
	crc      bool   // 070702 headers
	sign     bool   // a (fake) RSA signature
	// compressor, if set, is PAYLOADCOMPRESSOR, whatever the codec.
	compressor string
}

// entry is a header entry to make.
type entry struct {
	tag, typ uint32
	count    int
	value    []byte
}

// makeHeader lays out a header of the entries es (sorted by tag) under
// the region tag region.
func makeHeader(region uint32, es []entry) []byte {
	sort.Slice(es, func(i, j int) bool { return es[i].tag < es[j].tag })
	trailer := binary.BigEndian.AppendUint32(nil, region)
	trailer = binary.BigEndian.AppendUint32(trailer, typeBin)
	trailer = append(trailer, 0, 0, 0, 0, 0, 0, 0, regionSize)
	h := &Header{Entries: []Entry{{Tag: region, Type: typeBin, Count: regionSize, Value: trailer}}}
	for _, e := range es {
		h.Entries = append(h.Entries, Entry{Tag: e.tag, Type: e.typ, Count: uint32(e.count), Value: e.value})
	}
	return h.Bytes()
}

func u32s(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, uint32(v))
	}
	return b
}

func u64s(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint64(b, v)
	}
	return b
}

func u16s(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	return b
}

func str(s string) entry { return entry{typ: typeString, count: 1, value: encodeStrings([]string{s})} }

// buildRPM makes the package p.
func buildRPM(t testing.TB, p testPkg) []byte {
	t.Helper()
	n := len(p.files)
	var names, dirs []string
	var dirIdx, sizes, modes, inodes, devs, flags []uint64
	var digests []string
	dirOf := map[string]int{}
	last := map[uint64]int{} // the last file of each inode
	for i, f := range p.files {
		last[f.inode] = i
	}
	var total uint64
	for i, f := range p.files {
		d, b := path.Dir(f.name)+"/", path.Base(f.name)
		if _, ok := dirOf[d]; !ok {
			dirOf[d] = len(dirs)
			dirs = append(dirs, d)
		}
		names, dirIdx = append(names, b), append(dirIdx, uint64(dirOf[d]))
		sizes, modes = append(sizes, uint64(len(f.data))), append(modes, f.mode)
		inodes, devs, flags = append(inodes, f.inode), append(devs, 1), append(flags, 0)
		dig := ""
		if f.mode&0o170000 == 0o100000 {
			h, _ := newHash(max(p.algo, hashMD5))
			h.Write(f.data)
			dig = hex.EncodeToString(h.Sum(nil))
			if last[f.inode] == i {
				total += uint64(len(f.data))
			}
		}
		digests = append(digests, dig)
	}
	cpio := p.cpio(t, last)
	payload := compressedWith(t, p.codec, cpio)
	pd := sha256.Sum256(payload)
	ud := sha256.Sum256(cpio)
	main := []entry{
		{tagFileModes, typeInt16, n, u16s(modes...)},
		{tagFileDigests, typeStringArray, n, encodeStrings(digests)},
		{tagFileFlags, typeInt32, n, u32s(flags...)},
		{tagFileDevices, typeInt32, n, u32s(devs...)},
		{tagFileInodes, typeInt32, n, u32s(inodes...)},
		{tagDirIndexes, typeInt32, n, u32s(dirIdx...)},
		{tagBaseNames, typeStringArray, n, encodeStrings(names)},
		{tagDirNames, typeStringArray, len(dirs), encodeStrings(dirs)},
		{tagPayloadDigest, typeStringArray, 1, encodeStrings([]string{hex.EncodeToString(pd[:])})},
		{tagPayloadDigestAlgo, typeInt32, 1, u32s(hashSHA256)},
		{tagPayloadDigestAlt, typeStringArray, 1, encodeStrings([]string{hex.EncodeToString(ud[:])})},
		{1000, typeString, 1, encodeStrings([]string{"t"})},
	}
	compressor := codecName(p.codec)
	if p.compressor != "" {
		compressor = p.compressor
	}
	for tag, s := range map[uint32]string{tagPayloadFormat: "cpio", tagPayloadCompressor: compressor, tagPayloadFlags: "9"} {
		e := str(s)
		e.tag = tag
		main = append(main, e)
	}
	if p.stripped {
		main = append(main, entry{tagLongFileSizes, typeInt64, n, u64s(sizes...)}, entry{tagLongSize, typeInt64, 1, u64s(total)})
	} else {
		main = append(main, entry{tagFileSizes, typeInt32, n, u32s(sizes...)}, entry{tagSize, typeInt32, 1, u32s(total)})
	}
	if p.algo != 0 {
		main = append(main, entry{tagFileDigestAlgo, typeInt32, 1, u32s(p.algo)})
	}
	hdr := makeHeader(tagHeaderImmutable, main)
	s1, s256, m5 := sha1.Sum(hdr), sha256.Sum256(hdr), md5.Sum(append(bytes.Clone(hdr), payload...))
	sig := []entry{
		{sigSize, typeInt32, 1, u32s(uint64(len(hdr) + len(payload)))},
		{sigMD5, typeBin, 16, m5[:]},
		{sigPayloadSize, typeInt32, 1, u32s(uint64(len(cpio)))},
		{sigSHA1, typeString, 1, encodeStrings([]string{hex.EncodeToString(s1[:])})},
		{sigSHA256, typeString, 1, encodeStrings([]string{hex.EncodeToString(s256[:])})},
		{1008, typeBin, 32, make([]byte, 32)},
	}
	if p.sign {
		sig = append(sig, entry{sigRSA, typeBin, 7, []byte("RSA sig")})
	}
	sh := makeHeader(tagHeaderSignatures, sig)
	sh = append(sh, make([]byte, pad8(int64(len(sh))))...)
	lead := make([]byte, leadSize)
	copy(lead, leadMagic)
	lead[4], lead[79] = 3, 5
	return append(append(append(lead, sh...), hdr...), payload...)
}

// cpio is the package's payload archive, uncompressed: the files in
// order, a hard link set's data with its last file.
func (p testPkg) cpio(t testing.TB, last map[uint64]int) []byte {
	t.Helper()
	var b bytes.Buffer
	pad := func() {
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	nlink := map[uint64]int{}
	for _, f := range p.files {
		nlink[f.inode]++
	}
	for i, f := range p.files {
		data := f.data
		switch {
		case f.mode&0o170000 == 0o040000,
			f.mode&0o170000 == 0o100000 && last[f.inode] != i:
			data = nil
		}
		if p.stripped {
			fmt.Fprintf(&b, "%s%08x", magicStripped, i)
		} else {
			magic, check := magicNewc, 0
			if p.crc {
				magic = magicCRC
				for _, c := range data {
					check += int(c)
				}
			}
			fmt.Fprintf(&b, "%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x", magic,
				f.inode, f.mode, 0, 0, nlink[f.inode], 1700000000, len(data), 8, 1, 0, 0, len(f.name)+2, check)
			b.WriteString("." + f.name + "\x00")
		}
		pad()
		b.Write(data)
		pad()
	}
	fmt.Fprintf(&b, "%s%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%s\x00", magicNewc,
		0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, len(cpioTrailer)+1, 0, cpioTrailer)
	pad()
	return b.Bytes()
}

func codecName(c layer.Codec) string {
	if c == layer.Uncompressed {
		return "identity"
	}
	return string(c)
}

// compressedWith is b compressed as a payload of codec c is.
func compressedWith(t testing.TB, c layer.Codec, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := newEncoder(compression{codec: c, level: 9}, &out, nil, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(b)
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// hello is a program with CFI to convert.
func hello(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sampleFiles are a package's files: a program with a hard link (its
// data with the second name), a symbolic link, a directory, a text file.
func sampleFiles(elf []byte) []testFile {
	return []testFile{
		{name: "/usr/bin", mode: 0o040755, inode: 1},
		{name: "/usr/bin/hello", mode: 0o104755, data: elf, inode: 2},
		{name: "/usr/bin/hello-again", mode: 0o104755, data: elf, inode: 2},
		{name: "/usr/bin/hi", mode: 0o120777, data: []byte("hello"), inode: 3},
		{name: "/usr/share/notes", mode: 0o100644, data: []byte("notes\n"), inode: 4},
	}
}
