package rpm

import (
	"bytes"
	"context"
	"io"
	"math/rand"
	"os/exec"
	"slices"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// TestCompressionOf reads PAYLOADCOMPRESSOR and PAYLOADFLAGS as rpm does.
func TestCompressionOf(t *testing.T) {
	for _, tc := range []struct {
		compressor, flags string
		want              compression
		bad               bool
	}{
		{"", "", compression{layer.Gzip, -1}, false},
		{"gzip", "9", compression{layer.Gzip, 9}, false},
		{"xz", "2", compression{layer.Xz, 2}, false},
		{"zstd", "19T8", compression{layer.Zstd, 19}, false},
		{"bzip2", "9", compression{layer.Bzip2, 9}, false},
		{"bzip2", "", compression{layer.Bzip2, -1}, false},
		{"identity", "", compression{layer.Uncompressed, -1}, false},
		{"lzma", "6", compression{}, true},
	} {
		h := &Header{}
		for tag, s := range map[uint32]string{tagPayloadCompressor: tc.compressor, tagPayloadFlags: tc.flags} {
			if s != "" {
				h.Entries = append(h.Entries, Entry{Tag: tag, Type: typeString, Count: 1, Value: encodeStrings([]string{s})})
			}
		}
		got, err := compressionOf(h)
		if (err != nil) != tc.bad || err == nil && got != tc.want {
			t.Errorf("%q %q: %+v, %v; want %+v (error: %v)", tc.compressor, tc.flags, got, err, tc.want, tc.bad)
		}
	}
}

// TestEncoderRoundTrip writes each codec at a few levels and reads the
// stream back through layer.NewReader, the payload reader; bzip2's is
// also read by the bzip2 tool, which rpm's libbz2 is.
func TestEncoderRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	// Text-like data with runs (bzip2's first RLE), random bytes (the
	// sorter's worst), and more than one 900 kB block.
	var data []byte
	for len(data) < 2<<20 {
		switch rng.Intn(3) {
		case 0:
			data = append(data, bytes.Repeat([]byte{byte(rng.Intn(256))}, rng.Intn(600))...)
		case 1:
			chunk := make([]byte, rng.Intn(4096))
			rng.Read(chunk)
			data = append(data, chunk...)
		default:
			data = append(data, "cfi2sframe converts rpm payloads, "...)
		}
	}
	for _, c := range []compression{
		{layer.Gzip, 1}, {layer.Gzip, 9}, {layer.Xz, 2}, {layer.Zstd, 19},
		{layer.Bzip2, 1}, {layer.Bzip2, 9}, {layer.Bzip2, -1}, {layer.Uncompressed, -1},
	} {
		for _, in := range [][]byte{nil, data[:1], data} {
			var z bytes.Buffer
			enc, err := newEncoder(c, &z, nil, int64(len(in)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := enc.Write(in); err != nil {
				t.Fatal(err)
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			dec, err := layer.NewReader(context.Background(), c.codec, bytes.NewReader(z.Bytes()), int64(z.Len()), layer.Bounds{})
			if err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
			got, err := io.ReadAll(dec)
			dec.Close()
			if err != nil || !bytes.Equal(got, in) {
				t.Errorf("%+v, %d bytes: read back %d bytes, %v", c, len(in), len(got), err)
			}
			if c.codec == layer.Bzip2 {
				checkBzip2Tool(t, z.Bytes(), in)
			}
		}
	}
}

func checkBzip2Tool(t *testing.T, z, want []byte) {
	t.Helper()
	if _, err := exec.LookPath("bzip2"); err != nil {
		return
	}
	cmd := exec.Command("bzip2", "-dc")
	cmd.Stdin = bytes.NewReader(z)
	got, err := cmd.Output()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("bzip2 -d: %d bytes of %d, %v", len(got), len(want), err)
	}
}

// TestPayloadDigests lists the payload digests a header holds, and only
// those, in PAYLOADDIGESTALGO's algorithm.
func TestPayloadDigests(t *testing.T) {
	entry := func(tag uint32) Entry {
		return Entry{Tag: tag, Type: typeStringArray, Count: 1, Value: encodeStrings([]string{"00"})}
	}
	algo := func(a uint64) Entry {
		return Entry{Tag: tagPayloadDigestAlgo, Type: typeInt32, Count: 1, Value: u32s(a)}
	}
	for _, tc := range []struct {
		name    string
		entries []Entry
		want    []payloadDigest
	}{
		{"none", nil, nil},
		{"rpm 4.14+", []Entry{entry(tagPayloadDigest), algo(hashSHA256), entry(tagPayloadDigestAlt)},
			[]payloadDigest{{tagPayloadDigest, hashSHA256, false}, {tagPayloadDigestAlt, hashSHA256, true}}},
		{"no algorithm: SHA-256", []Entry{entry(tagPayloadDigest)}, []payloadDigest{{tagPayloadDigest, hashSHA256, false}}},
		{"SHA-512 algorithm", []Entry{entry(tagPayloadDigest), algo(hashSHA512)}, []payloadDigest{{tagPayloadDigest, hashSHA512, false}}},
		{"rpm 6", []Entry{entry(tagPayloadDigest), entry(tagPayloadSHA512Alt), entry(tagPayloadSHA3_256)},
			[]payloadDigest{{tagPayloadDigest, hashSHA256, false}, {tagPayloadSHA512Alt, hashSHA512, true}, {tagPayloadSHA3_256, hashSHA3_256, false}}},
	} {
		got := payloadDigests(&Header{Entries: tc.entries})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
