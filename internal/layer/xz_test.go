package layer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// xzOf compresses data with ulikunitz's writer as cfg says.
func xzOf(t testing.TB, data []byte, cfg xz.WriterConfig) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := cfg.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// xzBlocks lists where the block headers of the one-stream xz file b
// start, from its index.
func xzBlocks(t testing.TB, b []byte) []int {
	t.Helper()
	indexLen := int(binary.LittleEndian.Uint32(b[len(b)-8:])+1) * 4
	p := b[len(b)-12-indexLen+1:]
	count, n := binary.Uvarint(p)
	p = p[n:]
	var offs []int
	for off, i := 12, uint64(0); i < count; i++ {
		unpadded, n := binary.Uvarint(p)
		p = p[n:]
		_, n = binary.Uvarint(p)
		p = p[n:]
		offs = append(offs, off)
		off += int(unpadded+3) &^ 3
	}
	return offs
}

// allocated is the heap f allocates, in all.
func allocated(f func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

// decodeXz decodes b as the Reader does, with no bound.
func decodeXz(b []byte) ([]byte, error) {
	r, err := NewReader(context.Background(), Xz, bytes.NewReader(b), int64(len(b)), Bounds{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// text is n bytes that compress, but not to nothing.
func text(n int) []byte {
	rng := rand.New(rand.NewSource(1))
	words := strings.Fields("the quick brown fox jumps over a lazy dog while seven wizards quietly hex zebras")
	var b []byte
	for len(b) < n {
		b = append(b, words[rng.Intn(len(words))]...)
		b = append(b, " \n"[rng.Intn(2)])
	}
	return b[:n]
}

// TestXzDictionary: a block declaring a dictionary over MaxWindow is a
// *LimitError found before the dictionary is allocated, in the first
// block or a later one; so is a block header hidden in an LZMA chunk
// that claims more bytes than its data uses, where a reader that ends
// the chunk when its data is decoded would find it.
func TestXzDictionary(t *testing.T) {
	data := text(300 << 10)
	one := xzOf(t, data, xz.WriterConfig{DictCap: 1 << 16, CheckSum: xz.CRC32})
	multi := xzOf(t, data, xz.WriterConfig{DictCap: 1 << 16, BlockSize: 64 << 10})
	if n := len(xzBlocks(t, multi)); n < 3 {
		t.Fatalf("%d blocks, want several", n)
	}
	patched := func(b []byte, block int, code byte) []byte {
		b = bytes.Clone(b)
		hostile.SetXzDict(b, xzBlocks(t, b)[block], code)
		return b
	}
	cases := []struct {
		name string
		in   []byte
		dict int64 // 0: an error that is not a LimitError
		msg  string
	}{
		{"1.5 GiB", patched(one, 0, 37), 3 << 29, "xz: the block declares a 1.5 GiB dictionary, over the 128 MiB limit"},
		{"3 GiB", patched(one, 0, 39), 3 << 30, "xz: the block declares a 3 GiB dictionary, over the 128 MiB limit"},
		{"4 GiB", patched(one, 0, 40), 1<<32 - 1, "xz: the block declares a 4 GiB dictionary, over the 128 MiB limit"},
		{"192 MiB", patched(one, 0, 31), 3 << 26, "xz: the block declares a 192 MiB dictionary, over the 128 MiB limit"},
		{"second block 4 GiB", patched(multi, 1, 40), 1<<32 - 1, ""},
		{"hidden block header", hiddenHeader(t, data[:2000], 40), 0, "xz: block: the LZMA2 data ends before its end marker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			var out []byte
			heap := allocated(func() { out, err = decodeXz(c.in) })
			var le *LimitError
			switch {
			case c.dict != 0 && (!errors.As(err, &le) || le.What != "dictionary" || le.Got != c.dict || le.Limit != MaxWindow):
				t.Fatalf("want a LimitError for a %d-byte dictionary, got %v", c.dict, err)
			case c.dict == 0 && (err == nil || errors.As(err, &le)):
				t.Fatalf("want an error that is not a LimitError, got %v", err)
			case c.msg != "" && err.Error() != c.msg:
				t.Errorf("error %q, want %q", err, c.msg)
			}
			if heap > 16<<20 {
				t.Errorf("%d MiB allocated", heap>>20)
			}
			t.Logf("%v (%d bytes decoded before, %d KiB allocated)", err, len(out), heap>>10)
		})
	}
}

// hiddenHeader is an xz file of data whose one LZMA chunk claims, after
// its own bytes, an end marker, padding, the block's CRC32 and a block
// header declaring dictionary size code: a reader that ends the chunk
// where its data is decoded reads them as such.
func hiddenHeader(t *testing.T, data []byte, code byte) []byte {
	b := xzOf(t, data, xz.WriterConfig{DictCap: 1 << 16, CheckSum: xz.CRC32})
	c := 12 + (int(b[12])+1)*4 // the first chunk
	if b[c] < 0xc0 {
		t.Fatalf("first chunk control byte %#x, want an LZMA chunk with properties", b[c])
	}
	packed := int(binary.BigEndian.Uint16(b[c+3:])) + 1
	end := c + 6 + packed
	if b[end] != 0 {
		t.Fatal("more than one chunk")
	}
	hidden := []byte{0}
	for (6+packed+len(hidden))%4 != 0 {
		hidden = append(hidden, 0)
	}
	hidden = binary.LittleEndian.AppendUint32(hidden, crc32.ChecksumIEEE(data))
	h := []byte{2, 0, lzma2Filter, 1, code, 0, 0, 0}
	hidden = append(binary.LittleEndian.AppendUint32(append(hidden, h...), crc32.ChecksumIEEE(h)), 0xe0, 0, 0, 0, 0, 0x5d)
	out := append([]byte{}, b[:end]...)
	binary.BigEndian.PutUint16(out[c+3:], uint16(packed+len(hidden)-1))
	return append(append(out, hidden...), b[end:]...)
}

// TestXzAccepts: the xz files ulikunitz's writer and the xz tool make
// decode as ulikunitz's reader decodes them: every check type, many
// blocks, streams one after another with stream padding, nothing.
func TestXzAccepts(t *testing.T) {
	data := text(300 << 10)
	two := append(xzOf(t, data[:1000], xz.WriterConfig{}), 0, 0, 0, 0, 0, 0, 0, 0)
	two = append(two, xzOf(t, data[1000:], xz.WriterConfig{CheckSum: xz.SHA256})...)
	cases := map[string][]byte{
		"crc64":         xzOf(t, data, xz.WriterConfig{}),
		"crc32":         xzOf(t, data, xz.WriterConfig{CheckSum: xz.CRC32}),
		"sha256":        xzOf(t, data, xz.WriterConfig{CheckSum: xz.SHA256}),
		"none":          xzOf(t, data, xz.WriterConfig{NoCheckSum: true}),
		"blocks":        xzOf(t, data, xz.WriterConfig{BlockSize: 16 << 10}),
		"streams":       two,
		"empty":         xzOf(t, nil, xz.WriterConfig{}),
		"random":        xzOf(t, randomBytes(200<<10), xz.WriterConfig{}),
		"small dict":    xzOf(t, data, xz.WriterConfig{DictCap: 1 << 12}),
		"binary stream": xzOf(t, append(randomBytes(100<<10), data...), xz.WriterConfig{BlockSize: 50 << 10}),
	}
	if _, err := exec.LookPath("xz"); err == nil {
		for name, args := range map[string][]string{
			"xz -0":               {"-0"},
			"xz -6e":              {"-6e"},
			"xz --check=none":     {"--check=none"},
			"xz --check=crc32":    {"--check=crc32"},
			"xz --check=sha256":   {"--check=sha256"},
			"xz -T2 --block-size": {"-T2", "--block-size=32KiB"},
			"xz --block-list":     {"--block-list=1KiB,10KiB,100KiB"},
			"xz uncompressible":   {"--lzma2=preset=1,nice=8"},
			"xz -9 -T2":           {"-9", "-T2"},
		} {
			in := data
			if name == "xz uncompressible" {
				in = randomBytes(200 << 10)
			}
			cmd := exec.Command("xz", append([]string{"-c"}, args...)...)
			cmd.Stdin = bytes.NewReader(in)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("xz %v: %v", args, err)
			}
			cases[name] = out
		}
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := ulikunitz(in)
			if err != nil {
				t.Fatalf("ulikunitz: %v", err)
			}
			got, err := decodeXz(in)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d bytes decoded, ulikunitz decodes %d", len(got), len(want))
			}
		})
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(2)).Read(b)
	return b
}

// ulikunitz decodes b with ulikunitz's reader (only on files
// decodeXz takes: it allocates what a block declares).
func ulikunitz(b []byte) ([]byte, error) {
	r, err := xz.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// TestXzCorrupt: damage anywhere is an error, never a panic or a
// different output taken for the file's.
func TestXzCorrupt(t *testing.T) {
	data := text(6 << 10)
	b := xzOf(t, data, xz.WriterConfig{BlockSize: 2 << 10, CheckSum: xz.CRC32, DictCap: 1 << 12})
	for i := range b {
		for _, flip := range []byte{0x01, 0x80} {
			in := bytes.Clone(b)
			in[i] ^= flip
			out, err := decodeXz(in)
			if err == nil && !bytes.Equal(out, data) {
				t.Fatalf("byte %d ^ %#x: no error, and %d bytes decoded that are not the file's", i, flip, len(out))
			}
		}
	}
	for n := 0; n < len(b); n++ {
		if _, err := decodeXz(b[:n]); err == nil {
			t.Fatalf("cut to %d of %d bytes: no error", n, len(b))
		}
	}
}

// FuzzXzGuard: the xz reader never panics, and what it decodes
// ulikunitz's reader decodes alike (this reader is the stricter). Only
// the first MiB is read: a mutated chunk header can claim megabytes.
func FuzzXzGuard(f *testing.F) {
	data := text(20 << 10)
	f.Add(xzOf(f, data, xz.WriterConfig{DictCap: 1 << 12}))
	f.Add(xzOf(f, data[:100], xz.WriterConfig{CheckSum: xz.CRC32, DictCap: 1 << 12}))
	f.Add(xzOf(f, data, xz.WriterConfig{BlockSize: 4 << 10, DictCap: 1 << 12, CheckSum: xz.SHA256}))
	f.Add(append(append(xzOf(f, nil, xz.WriterConfig{}), 0, 0, 0, 0), xzOf(f, data[:10], xz.WriterConfig{NoCheckSum: true})...))
	f.Add(randomBytes(64))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(context.Background(), Xz, bytes.NewReader(in), int64(len(in)), Bounds{Expansion: DefaultMaxExpansion})
		if err != nil {
			return
		}
		defer r.Close()
		got, err := io.ReadAll(io.LimitReader(r, 1<<20))
		if err != nil || len(got) == 1<<20 {
			return
		}
		want, err := ulikunitz(in)
		if err != nil {
			t.Fatalf("decoded %d bytes; ulikunitz: %v", len(got), err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("decoded %d bytes, ulikunitz %d", len(got), len(want))
		}
	})
}
