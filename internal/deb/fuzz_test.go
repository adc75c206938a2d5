package deb

import (
	"archive/tar"
	"bytes"
	"context"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/tartest"
)

// seedDeb makes a package in Go (the fuzz seeds cannot count on
// dpkg-deb): control.tar with control and md5sums, data.tar with the
// files given and a hard link to the first, the members compressed as
// comp.
func seedDeb(t testing.TB, comp layer.Codec, files map[string][]byte) []byte {
	t.Helper()
	control, data := seedTars(t, files)
	return debOf(comp, compressed(t, comp, control), comp, compressed(t, comp, data))
}

// seedTars are seedDeb's control and data tar streams.
func seedTars(t testing.TB, files map[string][]byte) (control, data []byte) {
	t.Helper()
	reg := func(name string, data []byte) tartest.Entry {
		return tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755}, Data: data}
	}
	var es []tartest.Entry
	sums := ""
	first := ""
	for _, name := range []string{"usr/bin/hello", "usr/share/doc/t/notes"} {
		if b, ok := files[name]; ok {
			es = append(es, reg("./"+name, b))
			sums += "00000000000000000000000000000000  " + name + "\n"
			if first == "" {
				first = name
			}
		}
	}
	if first != "" {
		es = append(es, tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeLink, Name: "./usr/bin/again", Linkname: "./" + first}})
		sums += "00000000000000000000000000000000  usr/bin/again\n"
	}
	return tartest.Write(t, []tartest.Entry{reg("./control", []byte("Package: t\n")), reg("./md5sums", []byte(sums))}), tartest.Write(t, es)
}

// compressed is b compressed with c as members are written.
func compressed(t testing.TB, c layer.Codec, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	enc, err := newEncoder(c, &out, nil, int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(b)
	enc.Close()
	return out.Bytes()
}

// debOf is a package of the control and data members given, compressed
// with cc and dc.
func debOf(cc layer.Codec, control []byte, dc layer.Codec, data []byte) []byte {
	return hostile.Deb("control.tar"+suffix(cc), control, "data.tar"+suffix(dc), data)
}

// FuzzDeb converts arbitrary bytes as a package: no panic; a package
// with nothing to convert is written back as it is; a converted one is
// a package again, with nothing left to convert.
func FuzzDeb(f *testing.F) {
	// A 544-byte program, converted with its program headers moved
	// (FragileLayout), keeps the inputs small.
	tiny := hostile.EHFrameOnly(hostile.EHFrame(0x401000, 16, nil))
	o := Options{Convert: convert.Options{FragileLayout: true}}
	notes := map[string][]byte{"usr/share/doc/t/notes": []byte("notes\n")}
	both := map[string][]byte{"usr/bin/hello": tiny, "usr/share/doc/t/notes": []byte("notes\n")}
	f.Add(seedDeb(f, layer.Uncompressed, notes))
	f.Add(seedDeb(f, layer.Uncompressed, both))
	f.Add(seedDeb(f, layer.Gzip, both))
	f.Add(seedDeb(f, layer.Xz, both))
	f.Add(seedDeb(f, layer.Zstd, both))
	f.Add(seedDeb(f, layer.Zstd, notes))
	f.Fuzz(func(t *testing.T, in []byte) {
		ctx := context.Background()
		res, err := Convert(ctx, bytes.NewReader(in), int64(len(in)), o)
		if err != nil {
			return
		}
		defer res.Close()
		var out bytes.Buffer
		if err := res.Write(&out); err != nil {
			t.Fatal(err)
		}
		if res.Unchanged() != "" {
			if !bytes.Equal(out.Bytes(), in) {
				t.Fatal("a package with nothing to convert was written differently")
			}
			return
		}
		again, err := Convert(ctx, bytes.NewReader(out.Bytes()), int64(out.Len()), o)
		if err != nil {
			t.Fatalf("the output does not convert again: %v", err)
		}
		defer again.Close()
		if again.Unchanged() == "" {
			t.Fatal("the output has files to convert again")
		}
	})
}
