package rpm

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// cpioOf is the payload archive of p and the file list it is read
// against.
func cpioOf(t testing.TB, p testPkg) ([]byte, *files) {
	t.Helper()
	p.codec = layer.Uncompressed
	b := buildRPM(t, p)
	pk, err := readPackage(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return b[pk.payload:], pk.files
}

// TestCPIO converts payload archives of each form: the converted hard
// link set changes once, with its last name, for all its names; every
// other entry keeps its bytes; the 070702 checksum follows the data.
func TestCPIO(t *testing.T) {
	elfb := hello(t)
	for _, tc := range []struct {
		name string
		p    testPkg
	}{
		{"newc", testPkg{}},
		{"crc", testPkg{crc: true}},
		{"07070X", testPkg{stripped: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.p.files = sampleFiles(elfb)
			in, fs := cpioOf(t, tc.p)
			var out bytes.Buffer
			st, changed, err := convertCPIO(context.Background(), bytes.NewReader(in), &out, fs, cpioOptions{TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if st.Counts[tree.Converted] != 1 || st.Counts[tree.NotELF] != 1 || len(changed) != 2 || changed[1] != changed[2] {
				t.Fatalf("counts %v, changed %v", st.Counts, changed)
			}
			// The output, read against the file list with the new sizes,
			// has every entry, and checksums of the new data.
			nfs := *fs
			nfs.sizes = slices.Clone(fs.sizes)
			for i, ch := range changed {
				nfs.sizes[i] = ch.size
			}
			c := &cpioConverter{files: &nfs, r: bytes.NewReader(out.Bytes())}
			var got []string
			for {
				h, done, err := c.readHead()
				if err != nil {
					t.Fatal(err)
				}
				if done {
					break
				}
				data := make([]byte, h.size+int64(pad4(h.size)))
				if _, err := io.ReadFull(c.r, data); err != nil {
					t.Fatal(err)
				}
				got = append(got, string(h.raw[:6]))
				if h.size > 0 && tc.p.crc {
					var sum byteSum
					sum.Write(data[:h.size])
					if c, _ := hexField(h.raw[offCheck : offCheck+8]); uint32(c) != sum.n {
						t.Errorf("%s: checksum %x, data %x", h.name, c, sum.n)
					}
				}
			}
			if len(got) != len(tc.p.files) {
				t.Errorf("%d entries, want %d", len(got), len(tc.p.files))
			}
		})
	}
}

// TestCPIOErrors: a stream that is not what the header says fails,
// naming the entry.
func TestCPIOErrors(t *testing.T) {
	elfb := hello(t)
	in, fs := cpioOf(t, testPkg{files: sampleFiles(elfb)})
	stripped, sfs := cpioOf(t, testPkg{files: sampleFiles(elfb), stripped: true})
	notes := bytes.Index(in, []byte("notes\n"))
	for _, tc := range []struct {
		name, want string
		in         []byte
		fs         *files
	}{
		{"truncated", "unexpected EOF", in[:len(in)/2], fs},
		{"bad magic", "bad magic", append([]byte("070799"), in[6:]...), fs},
		{"bad hex", "hexadecimal", append([]byte("070701zzzzzzzz"), in[14:]...), fs},
		{"size disagrees", "the header says", bytes.Replace(in, []byte("00000006"), []byte("00000007"), 1), fs},
		{"unknown name", "not in the header's file list", bytes.Replace(in, []byte("./usr/share/notes"), []byte("./usr/share/xotes"), 1), fs},
		{"file index", "file index", bytes.Replace(stripped, []byte("07070X00000000"), []byte("07070X00000099"), 1), sfs},
		{"no trailer", "unexpected EOF", in[:notes+8], fs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := convertCPIO(context.Background(), bytes.NewReader(tc.in), &bytes.Buffer{}, tc.fs, cpioOptions{TempDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzHeader reads arbitrary bytes as a header: no panic; one that
// reads is written back byte for byte, and laid out again it reads the
// same.
func FuzzHeader(f *testing.F) {
	f.Add(sampleHeader())
	f.Add(makeHeader(tagHeaderSignatures, []entry{{sigSize, typeInt32, 1, u32s(5)}, {sigMD5, typeBin, 16, make([]byte, 16)}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := parseHeader(in)
		if err != nil {
			return
		}
		if !bytes.Equal(h.Bytes(), in) {
			t.Fatal("not written back byte for byte")
		}
		h.Delete(func(tag uint32) bool { return tag%2 == 1 })
		h.data = nil
		again, err := parseHeader(h.Bytes())
		if err != nil {
			t.Fatalf("laid out again: %v", err)
		}
		for i, e := range again.Entries[1:] {
			if !bytes.Equal(e.Value, h.Entries[i+1].Value) {
				t.Fatalf("tag %d changed", e.Tag)
			}
		}
	})
}

// FuzzCPIO converts arbitrary bytes as a payload archive read against
// a sample file list: no panic, and a stream converted converts again
// to itself.
func FuzzCPIO(f *testing.F) {
	tiny := hostile.EHFrameOnly(hostile.EHFrame(0x401000, 16, nil))
	_, fs := cpioOf(f, testPkg{files: sampleFiles(tiny)})
	for _, p := range []testPkg{{}, {crc: true}, {stripped: true}} {
		p.files = sampleFiles(tiny)
		in, _ := cpioOf(f, p)
		f.Add(in)
	}
	o := cpioOptions{Convert: convert.Options{FragileLayout: true}}
	f.Fuzz(func(t *testing.T, in []byte) {
		fs := *fs
		fs.long = true // lets the 07070X form through
		var out bytes.Buffer
		_, changed, err := convertCPIO(context.Background(), bytes.NewReader(in), &out, &fs, o)
		if err != nil || len(changed) == 0 {
			return
		}
		var again bytes.Buffer
		if _, changed, err := convertCPIO(context.Background(), bytes.NewReader(out.Bytes()), &again, &fs, o); err == nil && len(changed) > 0 {
			t.Fatal("converted twice")
		}
	})
}
