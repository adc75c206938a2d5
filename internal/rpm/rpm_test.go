package rpm

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// The tags a conversion may change; every other keeps its bytes.
var (
	mayChangeMain = []uint32{tagHeaderImmutable, tagFileDigests, tagFileSizes, tagLongFileSizes, tagSize, tagLongSize,
		tagArchiveSize, tagPayloadSize, tagPayloadSizeAlt, tagPayloadDigest, tagPayloadDigestAlt,
		tagPayloadSHA512, tagPayloadSHA512Alt, tagPayloadSHA3_256, tagPayloadSHA3Alt}
	mayChangeSig = []uint32{tagHeaderSignatures, sigSHA1, sigSHA256, sigSHA3_256, sigMD5, sigSize, sigLongSize, sigPayloadSize, sigLongArchiveSize}
)

func convertBytes(t *testing.T, in []byte) (*Result, []byte, error) {
	t.Helper()
	o := Options{Convert: convert.Options{}, Name: "t.rpm", TempDir: t.TempDir()}
	res, err := Convert(context.Background(), bytes.NewReader(in), int64(len(in)), o)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { res.Close() })
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	return res, out.Bytes(), nil
}

// sameTags checks that b has a's entries in a's order with their types
// and counts, and their bytes but for the tags in mayChange; dropped
// tags of a may be missing.
func sameTags(t *testing.T, what string, a, b *Header, mayChange []uint32, dropped func(uint32) bool) {
	t.Helper()
	j := 0
	for _, e := range a.Entries {
		if j < len(b.Entries) && b.Entries[j].Tag == e.Tag {
			f := b.Entries[j]
			j++
			if f.Type != e.Type || f.Count != e.Count {
				t.Errorf("%s: tag %d: type %d count %d, was %d, %d", what, e.Tag, f.Type, f.Count, e.Type, e.Count)
			}
			if !bytes.Equal(f.Value, e.Value) && !slices.Contains(mayChange, e.Tag) {
				t.Errorf("%s: tag %d changed", what, e.Tag)
			}
			continue
		}
		if !dropped(e.Tag) {
			t.Errorf("%s: tag %d missing", what, e.Tag)
		}
	}
	if j != len(b.Entries) {
		t.Errorf("%s: %d entries more", what, len(b.Entries)-j)
	}
}

// payloadFiles is the content of the payload's files, by index.
func payloadFiles(t *testing.T, p *pkg, b []byte) (cpio []byte, files map[int][]byte) {
	t.Helper()
	dec, err := layer.NewReader(context.Background(), p.comp.codec, bytes.NewReader(b[p.payload:]), int64(len(b))-p.payload, layer.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	cpio, err = io.ReadAll(dec)
	if err != nil {
		t.Fatal(err)
	}
	c := &cpioConverter{files: p.files, r: bytes.NewReader(cpio)}
	files = map[int][]byte{}
	for {
		h, done, err := c.readHead()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return cpio, files
		}
		data := make([]byte, h.size+int64(pad4(h.size)))
		if _, err := io.ReadFull(c.r, data); err != nil {
			t.Fatal(err)
		}
		if h.size > 0 {
			files[h.fx] = data[:h.size]
		}
	}
}

// checkConverted checks the package out converted from in against what
// rpm checks: every tag kept but those a conversion changes, which are
// those of the content (each file's digest and size, the header's and
// the payload's digests and sizes, computed here anew).
func checkConverted(t *testing.T, in, out []byte, wantChanged int) {
	t.Helper()
	a, err := readPackage(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := readPackage(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		t.Fatalf("the output: %v", err)
	}
	if !bytes.Equal(out[:leadSize], in[:leadSize]) {
		t.Error("the lead changed")
	}
	sameTags(t, "header", a.main, b.main, mayChangeMain, func(uint32) bool { return false })
	sameTags(t, "signature header", a.sig, b.sig, mayChangeSig, func(t uint32) bool { _, ok := signatureTags[t]; return ok })
	for tag := range signatureTags {
		if b.sig.Find(tag) != nil {
			t.Errorf("signature %d kept", tag)
		}
	}
	main := out[b.payload-b.main.Size() : b.payload]
	payload := out[b.payload:]
	s1, s256, m5 := sha1.Sum(main), sha256.Sum256(main), md5.Sum(out[b.payload-b.main.Size():])
	if got := b.sig.String(sigSHA1); got != hex.EncodeToString(s1[:]) {
		t.Errorf("SHA1 %s", got)
	}
	if got := b.sig.String(sigSHA256); got != hex.EncodeToString(s256[:]) {
		t.Errorf("SHA256 %s", got)
	}
	if got := b.sig.Find(sigMD5).Value; !bytes.Equal(got, m5[:]) {
		t.Errorf("MD5 %x", got)
	}
	if got, _ := b.sig.Ints(sigSize); got[0] != uint64(len(main)+len(payload)) {
		t.Errorf("SIZE %d, want %d", got[0], len(main)+len(payload))
	}
	cpio, files := payloadFiles(t, b, out)
	_, oldFiles := payloadFiles(t, a, in)
	pd, ud := sha256.Sum256(payload), sha256.Sum256(cpio)
	if got := b.main.String(tagPayloadDigest); got != hex.EncodeToString(pd[:]) {
		t.Errorf("PAYLOADDIGEST %s", got)
	}
	if got := b.main.String(tagPayloadDigestAlt); got != hex.EncodeToString(ud[:]) {
		t.Errorf("PAYLOADDIGESTALT %s", got)
	}
	if got, _ := b.sig.Ints(sigPayloadSize); got[0] != uint64(len(cpio)) {
		t.Errorf("PAYLOADSIZE %d, want %d", got[0], len(cpio))
	}
	changed := 0
	var size, oldSize uint64
	for i := range b.files.names {
		data, ok := files[i]
		if s := b.files.links[i]; len(s) > 1 {
			data, ok = files[s[len(s)-1]]
		}
		if !b.files.regular(i) || !ok {
			continue
		}
		h, _ := newHash(b.files.algo)
		h.Write(data)
		if d := hex.EncodeToString(h.Sum(nil)); d != b.files.digest[i] || uint64(len(data)) != b.files.sizes[i] {
			t.Errorf("%s: digest %s size %d in the header, %s %d in the payload", b.files.names[i], b.files.digest[i], b.files.sizes[i], d, len(data))
		}
		if b.files.digest[i] != a.files.digest[i] {
			changed++
			ef, err := elf.NewFile(bytes.NewReader(data))
			if err != nil || ef.Section(".sframe") == nil {
				t.Errorf("%s: changed, without .sframe (%v)", b.files.names[i], err)
			}
		} else if !bytes.Equal(data, oldFiles[i]) && len(oldFiles[i]) > 0 {
			t.Errorf("%s: content changed, digest not", b.files.names[i])
		}
		if s := b.files.links[i]; len(s) == 0 || s[0] == i {
			size += b.files.sizes[i]
			oldSize += a.files.sizes[i]
		}
	}
	if changed != wantChanged {
		t.Errorf("%d files changed, want %d", changed, wantChanged)
	}
	for _, tag := range []uint32{tagSize, tagLongSize} {
		was, ok := a.main.Ints(tag)
		if !ok {
			continue
		}
		if got, _ := b.main.Ints(tag); got[0]-was[0] != size-oldSize {
			t.Errorf("SIZE %d, was %d: the files grew by %d", got[0], was[0], size-oldSize)
		}
	}
}

func TestConvert(t *testing.T) {
	elfb := hello(t)
	for _, tc := range []struct {
		name string
		p    testPkg
	}{
		{"gzip md5", testPkg{codec: layer.Gzip}},
		{"xz sha256 signed", testPkg{codec: layer.Xz, algo: hashSHA256, sign: true}},
		{"zstd sha1 crc", testPkg{codec: layer.Zstd, algo: hashSHA1, crc: true}},
		{"uncompressed 07070X", testPkg{codec: layer.Uncompressed, algo: hashSHA256, stripped: true}},
		{"bzip2 sha256", testPkg{codec: layer.Bzip2, algo: hashSHA256}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.files = sampleFiles(elfb)
			in := buildRPM(t, tc.p)
			res, out, err := convertBytes(t, in)
			if err != nil {
				t.Fatal(err)
			}
			if why := res.Unchanged(); why != "" {
				t.Fatal(why)
			}
			if got := res.Stats.Counts[tree.Converted]; got != 1 {
				t.Errorf("%d converted, want 1 (the hard link set's data)", got)
			}
			if tc.p.sign != (res.Warning() != "") {
				t.Errorf("warning %q", res.Warning())
			}
			checkConverted(t, in, out, 2)
			again, out2, err := convertBytes(t, out)
			if err != nil {
				t.Fatal(err)
			}
			if again.Unchanged() == "" || !bytes.Equal(out2, out) {
				t.Errorf("converted again: %q", again.Unchanged())
			}
		})
	}
}

// TestRealRoundTrip reads packages rpmbuild made (testdata/*.rpm) and
// writes their headers back byte for byte; converted, they keep every
// tag but those a conversion changes.
func TestRealRoundTrip(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.rpm")
	if len(names) == 0 {
		t.Fatal("no testdata/*.rpm")
	}
	for _, name := range names {
		t.Run(filepath.Base(name), func(t *testing.T) {
			in, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := readPackage(bytes.NewReader(in), int64(len(in)))
			if err != nil {
				t.Fatal(err)
			}
			sig := p.sig.Bytes()
			sig = append(sig, make([]byte, pad8(int64(len(sig))))...)
			got := append(append(bytes.Clone(p.lead), sig...), p.main.Bytes()...)
			if !bytes.Equal(got, in[:p.payload]) {
				t.Fatal("the headers are not written back byte for byte")
			}
			res, out, err := convertBytes(t, in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Digests == 0 {
				t.Fatal("nothing converted")
			}
			checkConverted(t, in, out, res.Digests)
		})
	}
}

func TestNothingToConvert(t *testing.T) {
	in := buildRPM(t, testPkg{codec: layer.Xz, algo: hashSHA256, sign: true, files: []testFile{
		{name: "/etc/x.conf", mode: 0o100644, data: []byte("x=1\n"), inode: 1}}})
	res, out, err := convertBytes(t, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Unchanged(), "no ELF file") || !bytes.Equal(out, in) {
		t.Errorf("%q; identical: %v", res.Unchanged(), bytes.Equal(out, in))
	}
}

// TestSignedFiles: a file with an IMA signature is left alone.
func TestSignedFiles(t *testing.T) {
	in := buildRPM(t, testPkg{codec: layer.Gzip, files: sampleFiles(hello(t))})
	p, err := readPackage(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	p.files.signed[2] = "IMA signature"
	var out bytes.Buffer
	st, changed, err := convertCPIO(context.Background(), mustPayload(t, p, in), &out, p.files, cpioOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts[tree.Signed] != 1 || len(changed) != 0 {
		t.Errorf("signed %d, changed %v", st.Counts[tree.Signed], changed)
	}
}

func mustPayload(t *testing.T, p *pkg, b []byte) io.Reader {
	t.Helper()
	dec, err := layer.NewReader(context.Background(), p.comp.codec, bytes.NewReader(b[p.payload:]), int64(len(b))-p.payload, layer.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.Close)
	return dec
}

func TestBadPackages(t *testing.T) {
	good := buildRPM(t, testPkg{codec: layer.Gzip, files: sampleFiles(hello(t))})
	p, err := readPackage(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	sigEnd := p.payload - p.main.Size()
	patched := func(off int64, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[off:], b)
		return c
	}
	// Refused from the header, before the payload is read.
	lzma := buildRPM(t, testPkg{codec: layer.Gzip, compressor: "lzma", files: sampleFiles(hello(t))})
	// The first 32-bit entry's offset, made odd.
	misaligned := bytes.Clone(good)
	for i, e := range p.main.Entries {
		if e.Type == typeInt32 {
			misaligned[sigEnd+16+16*int64(i)+11] |= 1
			break
		}
	}
	for _, tc := range []struct {
		name, want string
		in         []byte
	}{
		{"empty", "no lead", nil},
		{"lead only", "signature header", good[:leadSize]},
		{"truncated header", "left in the file", good[:sigEnd+100]},
		{"lying entry count", "over rpm's limits", patched(sigEnd+8, 0x7f, 0xff, 0xff, 0xff)},
		{"lying data size", "left in the file", patched(sigEnd+12, 0x0f, 0xff, 0xff, 0x00)},
		{"lying signature size", "over rpm's limits", patched(leadSize+12, 0x10, 0, 0, 0)},
		{"bad header magic", "bad magic", patched(sigEnd, 0)},
		{"misaligned int32", "misaligned", misaligned},
		{"truncated payload", "payload", good[:len(good)-20]},
		{"lzma", `compressor "lzma"`, lzma},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := convertBytes(t, tc.in)
			var re *Error
			if err == nil || !errors.As(err, &re) || !strings.HasPrefix(err.Error(), "t.rpm: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming t.rpm and saying %q", err, tc.want)
			}
		})
	}
}
