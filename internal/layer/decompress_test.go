package layer

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// zeros is n zero bytes (a multiple of 8 MiB) compressed with c.
func zeros(c Codec, n int64) []byte {
	switch c {
	case Gzip:
		return hostile.GzipZeros(n)
	case Xz:
		return hostile.XzZeros(n)
	case Zstd:
		return hostile.ZstdZeros(n)
	case Bzip2:
		return hostile.Bzip2Zeros(n)
	}
	panic("no zeros for " + c)
}

var bombCodecs = []Codec{Gzip, Xz, Zstd, Bzip2}

// TestZeros: hostile's streams of zeros are valid streams, which decode
// to what they say.
func TestZeros(t *testing.T) {
	for _, c := range bombCodecs {
		t.Run(string(c), func(t *testing.T) {
			in := zeros(c, 16<<20)
			r, err := NewReader(context.Background(), c, bytes.NewReader(in), int64(len(in)), Bounds{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			out, err := io.ReadAll(r)
			if err != nil || len(out) != 16<<20 || bytes.Count(out, []byte{0}) != len(out) {
				t.Fatalf("%d bytes, %v", len(out), err)
			}
		})
	}
}

// compress is data compressed with c (not bzip2: internal/deb and
// internal/rpm own the writer; bzip2 bombs are hostile.Bzip2Zeros).
func compress(t *testing.T, c Codec, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch c {
	case Uncompressed:
		return data
	case Gzip:
		zw := gzip.NewWriter(&buf)
		zw.Name = "layer.tar"
		w = zw
	case Xz:
		w, err = xz.NewWriter(&buf)
	case Zstd:
		w, err = zstd.NewWriter(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarOf is a tar archive of one file, followed by pad zero bytes (as a
// tar writer padding to its record size leaves them).
func tarOf(t *testing.T, pad int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	data := text(5000)
	tw.WriteHeader(&tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: int64(len(data)), Mode: 0o644})
	tw.Write(data)
	tw.Close()
	return append(b.Bytes(), make([]byte, pad)...)
}

// readTar reads the tar stream of r to its end, then its tail.
func readTar(r *Reader) error {
	tr := tar.NewReader(r)
	for {
		_, err := tr.Next()
		if err == io.EOF {
			return r.Tail(io.Discard)
		}
		if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return err
		}
	}
}

// TestRoundTrip: a tar stream, with the 10 KiB of padding tar's records
// leave, is read through every codec with the default bound.
func TestRoundTrip(t *testing.T) {
	in := tarOf(t, 10<<10)
	for _, c := range []Codec{Uncompressed, Gzip, Xz, Zstd} {
		t.Run(string(c), func(t *testing.T) {
			z := compress(t, c, in)
			r, err := NewReader(context.Background(), c, bytes.NewReader(z), int64(len(z)), Bounds{Expansion: DefaultMaxExpansion})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := readTar(r); err != nil {
				t.Fatal(err)
			}
			if h := r.GzipHeader(); (h != nil) != (c == Gzip) || h != nil && h.Name != "layer.tar" {
				t.Errorf("gzip header %+v", h)
			}
		})
	}
}

// TestBombs: 4 GiB of zeros, some kilobytes to a few megabytes
// compressed, stop at the bound with one line, in every codec; without
// the bound each would be decoded whole.
func TestBombs(t *testing.T) {
	for _, c := range bombCodecs {
		t.Run(string(c), func(t *testing.T) {
			in := zeros(c, 4<<30)
			r, err := NewReader(context.Background(), c, bytes.NewReader(in), int64(len(in)), Bounds{Expansion: DefaultMaxExpansion})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			n, err := io.Copy(io.Discard, r)
			var le *LimitError
			want := Bounds{DefaultMaxExpansion}.limit(int64(len(in)))
			if !errors.As(err, &le) || le.What != "expansion" || le.Limit != want || n != want {
				t.Fatalf("%d bytes read, error %v; want %d and a LimitError", n, err, want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, string(c)+": expands past 64 MiB + 250 × its ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q", msg)
			}
			t.Logf("%d bytes compressed: %v", len(in), err)
		})
	}
}

// TestTail: after the tar's end at most MaxTail bytes are read: 4 GiB
// of zeros (an empty archive, then zeros) is a LimitError at once.
func TestTail(t *testing.T) {
	for _, c := range bombCodecs {
		t.Run(string(c), func(t *testing.T) {
			in := zeros(c, 4<<30)
			r, err := NewReader(context.Background(), c, bytes.NewReader(in), int64(len(in)), Bounds{Expansion: DefaultMaxExpansion})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = readTar(r)
			var le *LimitError
			if !errors.As(err, &le) || le.What != "tail" || r.n > 2*MaxTail {
				t.Fatalf("%d bytes read, error %v; want a LimitError for the tail", r.n, err)
			}
			if want := string(c) + ": more than 1 MiB after the tar archive's end"; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
}

// TestReaderCancel: a decode without a bound stops once its context is
// cancelled, with an error that is context.Canceled, and its cause.
func TestReaderCancel(t *testing.T) {
	for _, c := range bombCodecs {
		t.Run(string(c), func(t *testing.T) {
			in := zeros(c, 4<<30)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			r, err := NewReader(ctx, c, bytes.NewReader(in), int64(len(in)), Bounds{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			buf := make([]byte, 32<<10)
			var n int64
			for n < 16<<20 {
				k, err := r.Read(buf)
				if err != nil {
					t.Fatal(err)
				}
				n += int64(k)
			}
			cancel(errors.New("the run was interrupted"))
			_, err = r.Read(buf)
			if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "the run was interrupted") {
				t.Fatalf("error %v, want context.Canceled and its cause", err)
			}
			if _, err := NewReader(ctx, c, bytes.NewReader(in), int64(len(in)), Bounds{}); !errors.Is(err, context.Canceled) {
				t.Fatalf("a new reader on a cancelled context: %v", err)
			}
		})
	}
}

// TestZstdWindow: a zstd frame declaring a window over MaxWindow is a
// LimitError.
func TestZstdWindow(t *testing.T) {
	// A frame header: magic, a descriptor with a window descriptor and
	// no content size, a window of 2^(10+23) bytes (8 GiB); then a last,
	// empty raw block.
	in := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 23 << 3, 1, 0, 0}
	r, err := NewReader(context.Background(), Zstd, bytes.NewReader(in), int64(len(in)), Bounds{})
	if err == nil {
		_, err = io.ReadAll(r)
		r.Close()
	}
	var le *LimitError
	if !errors.As(err, &le) || le.What != "window" || err.Error() != "zstd: a frame's window is over the 128 MiB limit" {
		t.Fatalf("error %v, want a LimitError for the window", err)
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 bytes", 1023: "1023 bytes", 1024: "1 KiB", 640 << 10: "640 KiB", 3 << 29: "1.5 GiB",
		1<<32 - 1: "4 GiB", 64 << 20: "64 MiB", 1536 + 1<<20: "1 MiB",
	} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
