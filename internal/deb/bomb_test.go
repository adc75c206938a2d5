package deb

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// zeros is n zero bytes (a multiple of 8 MiB) compressed with c.
func zeros(c layer.Codec, n int64) []byte {
	switch c {
	case layer.Gzip:
		return hostile.GzipZeros(n)
	case layer.Xz:
		return hostile.XzZeros(n)
	case layer.Zstd:
		return hostile.ZstdZeros(n)
	case layer.Bzip2:
		return hostile.Bzip2Zeros(n)
	}
	panic("no zeros for " + c)
}

// bombTar is a tar stream holding one file, name, of 4 GiB of zeros,
// compressed with c in three streams one after another (the header, the
// zeros, the archive's end): some kilobytes to a few megabytes that
// take minutes to decode.
func bombTar(t *testing.T, c layer.Codec, name string) []byte {
	t.Helper()
	const size = 4 << 30
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o644})
	tw.Flush()
	b := compressed(t, c, hdr.Bytes())
	b = append(b, zeros(c, size)...)
	return append(b, compressed(t, c, make([]byte, 1024))...)
}

// tiny is a 544-byte program that converts (with its program headers
// moved, FragileLayout), so that the control member is read too.
var tiny = hostile.EHFrameOnly(hostile.EHFrame(0x401000, 16, nil))

// bombOptions bound the members to 64 MiB and their size, which is soon
// reached, and keep temporary files in a directory of their own.
func bombOptions(t *testing.T) Options {
	return Options{Name: "t.deb", TempDir: t.TempDir(), Convert: convert.Options{FragileLayout: true}, Bounds: layer.Bounds{Expansion: 1}}
}

// noTemp fails if dir holds anything: every temporary file has no name.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		t.Errorf("temporary directory: %d entries, %v", len(ents), err)
	}
}

// TestBombs: a data or control member that expands past its bound, in
// every compression dpkg reads, fails the package with one line naming
// the member and the bound.
func TestBombs(t *testing.T) {
	notes := map[string][]byte{"usr/bin/hello": tiny, "usr/share/doc/t/notes": []byte("notes\n")}
	for _, member := range []string{"data", "control"} {
		for _, c := range []layer.Codec{layer.Gzip, layer.Xz, layer.Zstd, layer.Bzip2} {
			if member == "control" && c == layer.Bzip2 {
				continue // dpkg takes no control.tar.bz2
			}
			t.Run(member+"/"+string(c), func(t *testing.T) {
				control, data := seedTars(t, notes)
				var in []byte
				if member == "data" {
					in = debOf(layer.Gzip, compressed(t, layer.Gzip, control), c, bombTar(t, c, "./usr/share/big"))
				} else {
					in = debOf(c, bombTar(t, c, "./big"), layer.Gzip, compressed(t, layer.Gzip, data))
				}
				o := bombOptions(t)
				_, _, err := convertBytes(t, in, o)
				var le *layer.LimitError
				// The data member's error names the file being read too.
				where, what := "t.deb: "+member+".tar"+suffix(c)+": ", string(c)+": expands past 64 MiB + 1 × its "
				if msg := err.Error(); !errors.As(err, &le) || le.What != "expansion" || !strings.HasPrefix(msg, where) || !strings.Contains(msg, what) || strings.Contains(msg, "\n") {
					t.Fatalf("want an error starting %q and saying %q, got %v", where, what, err)
				}
				noTemp(t, o.TempDir)
				t.Logf("%d bytes: %v", len(in), err)
			})
		}
	}
}

// TestTail: 4 GiB of zeros after data.tar's end (an empty archive, then
// zeros) stop after layer.MaxTail bytes; a tar's usual padding does not.
func TestTail(t *testing.T) {
	control, _ := seedTars(t, nil)
	for _, c := range []layer.Codec{layer.Gzip, layer.Xz, layer.Zstd, layer.Bzip2} {
		t.Run(string(c), func(t *testing.T) {
			in := debOf(layer.Gzip, compressed(t, layer.Gzip, control), c, zeros(c, 4<<30))
			o := bombOptions(t)
			o.Bounds = layer.Bounds{} // no bound but MaxTail
			_, _, err := convertBytes(t, in, o)
			var le *layer.LimitError
			want := "t.deb: data.tar" + suffix(c) + ": " + string(c) + ": more than 1 MiB after the tar archive's end"
			if !errors.As(err, &le) || le.What != "tail" || err.Error() != want {
				t.Fatalf("want %q, got %v", want, err)
			}
		})
	}
	// 10 KiB of padding, as tar's records leave it, in every member.
	files := map[string][]byte{"usr/bin/hello": tiny, "usr/share/doc/t/notes": []byte("notes\n")}
	for _, c := range []layer.Codec{layer.Uncompressed, layer.Gzip, layer.Xz, layer.Zstd} {
		t.Run("padding/"+string(c), func(t *testing.T) {
			control, data := seedTars(t, files)
			pad := make([]byte, 10<<10)
			in := debOf(c, compressed(t, c, append(control, pad...)), c, compressed(t, c, append(data, pad...)))
			res, out, err := convertBytes(t, in, Options{Convert: convert.Options{FragileLayout: true}, Bounds: layer.Bounds{Expansion: layer.DefaultMaxExpansion}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Unchanged() != "" || res.Sums != 2 {
				t.Fatalf("unchanged %q, %d sums", res.Unchanged(), res.Sums)
			}
			// The control member keeps every byte but the sums, its
			// padding too.
			got := ctlStream(t, out, c)
			if len(got) != len(control)+len(pad) || !bytes.Equal(got[len(control):], pad) {
				t.Errorf("control stream of %d bytes, want %d ending in the padding", len(got), len(control)+len(pad))
			}
		})
	}
}

// ctlStream is the control member of the package b, decompressed.
func ctlStream(t *testing.T, b []byte, c layer.Codec) []byte {
	t.Helper()
	m := members(t, b)[1]
	r, err := layer.NewReader(context.Background(), c, bytes.NewReader(b[m.off:m.off+m.size]), m.size, layer.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestCancel: a package being decoded (its data member, or its control
// member) stops when the context is cancelled, with context.Canceled,
// leaving nothing; so does writing a result.
func TestCancel(t *testing.T) {
	files := map[string][]byte{"usr/bin/hello": tiny}
	control, data := seedTars(t, files)
	for name, in := range map[string][]byte{
		"data":    debOf(layer.Xz, compressed(t, layer.Xz, control), layer.Xz, bombTar(t, layer.Xz, "./big")),
		"control": debOf(layer.Xz, bombTar(t, layer.Xz, "./big"), layer.Xz, compressed(t, layer.Xz, data)),
	} {
		t.Run(name, func(t *testing.T) {
			o := bombOptions(t)
			o.Bounds = layer.Bounds{}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			_, err := Convert(ctx, bytes.NewReader(in), int64(len(in)), o)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("want context.Canceled, got %v", err)
			}
			noTemp(t, o.TempDir)
		})
	}
	t.Run("write", func(t *testing.T) {
		in := seedDeb(t, layer.Xz, files)
		ctx, cancel := context.WithCancel(context.Background())
		res, err := Convert(ctx, bytes.NewReader(in), int64(len(in)), bombOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		cancel()
		if err := res.Write(&bytes.Buffer{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
	})
}
