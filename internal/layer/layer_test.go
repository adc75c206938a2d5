package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/tartest"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

func hello(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sample(t *testing.T) []tartest.Entry {
	mt := time.Unix(1700000000, 123456789)
	elf := hello(t)
	return []tartest.Entry{
		{Hdr: tar.Header{Typeflag: tar.TypeDir, Name: "usr/bin/", Mode: 0o755, ModTime: mt, Format: tar.FormatPAX}},
		{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/hello", Mode: 0o4755, Uid: 1000, Gid: 50, Uname: "someone", Gname: "staff", ModTime: mt,
			PAXRecords: map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}, Format: tar.FormatPAX}, Data: elf},
		{Hdr: tar.Header{Typeflag: tar.TypeLink, Name: "usr/bin/hello2", Linkname: "usr/bin/hello", ModTime: mt, Format: tar.FormatPAX}},
		{Hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/bin/hi", Linkname: "hello", ModTime: mt, Format: tar.FormatPAX}},
		{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/motd", Mode: 0o644, ModTime: mt, Format: tar.FormatPAX}, Data: []byte("hello\n")},
		{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/.wh.old", Mode: 0o600, ModTime: mt, Format: tar.FormatPAX}},
		{Hdr: tar.Header{Typeflag: tar.TypeChar, Name: "dev/null", Mode: 0o666, Devmajor: 1, Devminor: 3, ModTime: mt, Format: tar.FormatPAX}},
		{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/signed", Mode: 0o755, ModTime: mt,
			PAXRecords: map[string]string{"SCHILY.xattr.security.ima": "\x03\x02"}, Format: tar.FormatPAX}, Data: elf},
	}
}

// ignoreSize compares headers but for their size.
var ignoreSize = cmpopts.IgnoreFields(tar.Header{}, "Size")

func TestConvertKeepsHeaders(t *testing.T) {
	for _, inMem := range []int64{0, 1} { // in memory, and through temporary files
		in := sample(t)
		var out bytes.Buffer
		st, err := Convert(context.Background(), bytes.NewReader(tartest.Write(t, in)), &out, Options{InMemory: inMem, Sums: true, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		got := tartest.Read(t, out.Bytes())
		want := tartest.Read(t, tartest.Write(t, in))
		if diff := cmp.Diff(tartest.Headers(want), tartest.Headers(got), ignoreSize); diff != "" {
			t.Fatalf("headers changed (-want +got):\n%s", diff)
		}
		for i := range got {
			changed := !bytes.Equal(got[i].Data, want[i].Data)
			if changed != (got[i].Hdr.Name == "usr/bin/hello") {
				t.Errorf("%s: content changed %v", got[i].Hdr.Name, changed)
			}
		}
		wantCounts := map[tree.Outcome]int{tree.Converted: 1, tree.NotELF: 2, tree.Signed: 1}
		if diff := cmp.Diff(wantCounts, st.Counts); diff != "" || st.Entries != len(in) || !st.Changed() {
			t.Errorf("stats: entries %d, counts (-want +got):\n%s", st.Entries, diff)
		}
		if len(st.Files) != 1 || st.Files[0].MD5 != md5.Sum(got[1].Data) || st.Files[0].NewSize != int64(len(got[1].Data)) {
			t.Errorf("files: %+v", st.Files)
		}
		if want := []Link{{"usr/bin/hello2", "usr/bin/hello"}}; !cmp.Equal(st.Links, want) {
			t.Errorf("links %+v, want %+v", st.Links, want)
		}
		// The converted file is what the file command writes.
		cf, err := convert.NewFile("hello", bytes.NewReader(hello(t)), int64(len(hello(t))))
		if err != nil {
			t.Fatal(err)
		}
		res, err := cf.Convert(convert.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var direct bytes.Buffer
		if err := res.Write(&direct); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(direct.Bytes(), got[1].Data) {
			t.Error("the converted entry differs from the file command's output")
		}
	}
}

func TestNothingToConvert(t *testing.T) {
	in := tartest.Write(t, []tartest.Entry{{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "a.txt", Mode: 0o644}, Data: []byte("text")}})
	st, err := Convert(context.Background(), bytes.NewReader(in), io.Discard, Options{})
	if err != nil || st.Changed() {
		t.Fatalf("changed %v, err %v", st.Changed(), err)
	}
}

func TestFailure(t *testing.T) {
	elf := hello(t)
	bad := append([]byte(nil), elf[:200]...) // a header whose sections lie past the end
	in := tartest.Write(t, []tartest.Entry{
		{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "bin/bad", Mode: 0o755}, Data: bad},
		{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "bin/hello", Mode: 0o755}, Data: elf},
	})
	_, err := Convert(context.Background(), bytes.NewReader(in), io.Discard, Options{Name: "layer 1"})
	var le *Error
	if !errors.As(err, &le) || le.File != "bin/bad" {
		t.Fatalf("want an error naming bin/bad, got %v", err)
	}
	t.Log(err)
	var out bytes.Buffer
	st, err := Convert(context.Background(), bytes.NewReader(in), &out, Options{Name: "layer 1", KeepGoing: true})
	if err != nil {
		t.Fatal(err)
	}
	got := tartest.Read(t, out.Bytes())
	if !bytes.Equal(got[0].Data, bad) || bytes.Equal(got[1].Data, elf) {
		t.Error("with KeepGoing the bad file passes through and the good one is converted")
	}
	if f := st.Failed(); len(f) != 1 || f[0].Name != "bin/bad" {
		t.Errorf("failed: %+v", f)
	}
}

func TestTruncatedStream(t *testing.T) {
	in := tartest.Write(t, []tartest.Entry{{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: "bin/hello", Mode: 0o755}, Data: hello(t)}})
	for _, inMem := range []int64{0, 1} {
		_, err := Convert(context.Background(), bytes.NewReader(in[:len(in)/2]), io.Discard, Options{Name: "layer 1", InMemory: inMem})
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("in memory up to %d: want unexpected EOF, got %v", inMem, err)
		}
	}
}

// TestParallelOrder converts a stream of many entries of every kind,
// several files at once: the output keeps the input's order, and every
// entry is what a one-at-a-time run writes.
func TestParallelOrder(t *testing.T) {
	elf := hello(t)
	large := bytes.Repeat([]byte("large text\n"), (smallEntry/11)+100)
	var es []tartest.Entry
	for i := range 60 {
		name := fmt.Sprintf("f%02d", i)
		switch i % 5 {
		case 0, 3:
			es = append(es, tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755}, Data: elf})
		case 1:
			es = append(es, tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, Data: []byte(name)})
		case 2:
			es = append(es, tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: "f00"}})
		case 4:
			es = append(es, tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, Data: large})
		}
	}
	in := tartest.Write(t, es)
	var one bytes.Buffer
	if _, err := Convert(context.Background(), bytes.NewReader(in), &one, Options{Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{Jobs: 4}, {Jobs: 3, InMemory: 1, TempDir: t.TempDir()}} {
		var out bytes.Buffer
		st, err := Convert(context.Background(), bytes.NewReader(in), &out, o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), one.Bytes()) {
			t.Errorf("jobs %d, in memory up to %d: the output differs from a one-at-a-time run", o.Jobs, o.InMemory)
		}
		if st.Entries != len(es) || st.Counts[tree.Converted] != 24 || len(st.Files) != 24 {
			t.Errorf("entries %d, counts %v", st.Entries, st.Counts)
		}
	}
}

// TestCancel stops a run: it returns the context's error and leaves no
// goroutine behind.
func TestCancel(t *testing.T) {
	elf := hello(t)
	var es []tartest.Entry
	for i := range 40 {
		es = append(es, tartest.Entry{Hdr: tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprint(i), Mode: 0o755}, Data: elf})
	}
	in := tartest.Write(t, es)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	w := &cancelAfter{n: 3 * len(elf), cancel: cancel}
	_, err := Convert(ctx, bytes.NewReader(in), w, Options{Jobs: 4})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want the context's error, got %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines before, %d after", before, n)
	}
}

// TestCancelLargeEntry: a large entry passed through (4 GiB of a file
// that is not ELF), or spooled to a temporary file (an ELF file larger
// than InMemory), stops being read once the run is cancelled.
func TestCancelLargeEntry(t *testing.T) {
	for _, head := range []string{"not ELF", "\x7fELF"} {
		t.Run(head, func(t *testing.T) {
			const size = 4 << 30
			var hdr bytes.Buffer
			tw := tar.NewWriter(&hdr)
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "big", Size: size, Mode: 0o644})
			tw.Flush()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			in := &cancelAfterRead{n: 64 << 20, cancel: cancel,
				r: io.MultiReader(&hdr, strings.NewReader(head), io.LimitReader(zeroReader{}, size-int64(len(head))), bytes.NewReader(make([]byte, 1024)))}
			_, err := Convert(ctx, in, io.Discard, Options{Jobs: 1, InMemory: 1 << 20, TempDir: t.TempDir()})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("want the context's error, got %v", err)
			}
			if in.read > 128<<20 {
				t.Errorf("%d MiB of the 4 GiB entry read, the run cancelled after 64", in.read>>20)
			}
		})
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// cancelAfterRead cancels once n bytes have been read.
type cancelAfterRead struct {
	r       io.Reader
	n, read int64
	cancel  func()
}

func (c *cancelAfterRead) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	if c.read > c.n {
		c.cancel()
	}
	return n, err
}

// cancelAfter cancels once n bytes have been written.
type cancelAfter struct {
	n      int
	cancel func()
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	c.n -= len(p)
	if c.n < 0 {
		c.cancel()
	}
	return len(p), nil
}

// FuzzConvert feeds arbitrary bytes as a tar stream: no panic, and a
// stream accepted is written as a tar stream of as many entries.
func FuzzConvert(f *testing.F) {
	elf, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		f.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "a", Size: 5, Mode: 0o644})
	tw.Write([]byte("hello"))
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "elf", Size: 512, Mode: 0o755})
	tw.Write(elf[:512])
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "l", Linkname: "a"})
	tw.Close()
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		st, err := Convert(context.Background(), bytes.NewReader(data), &out, Options{Jobs: 2, KeepGoing: true, InMemory: 4096, TempDir: t.TempDir()})
		if err != nil {
			return
		}
		n := 0
		tr := tar.NewReader(&out)
		for {
			_, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("the output does not read back: %v", err)
			}
			n++
		}
		if n != st.Entries {
			t.Fatalf("%d entries written, %d counted", n, st.Entries)
		}
	})
}
