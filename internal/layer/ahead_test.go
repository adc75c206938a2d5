package layer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadAhead reads streams of each codec through ReadAhead whole,
// in small reads, with Tail after a prefix, and stops part way: the
// bytes are the same, a decoder's error comes after the bytes before it,
// and Close ends the goroutine however far the reading got.
func TestReadAhead(t *testing.T) {
	data := bytes.Repeat([]byte("read ahead, in order; "), 5*aheadChunk/22)
	for _, c := range []Codec{Uncompressed, Gzip, Xz, Zstd} {
		z := compress(t, c, data)
		open := func(b []byte) *Reader {
			d, err := NewReader(context.Background(), c, bytes.NewReader(b), int64(len(b)), Bounds{})
			if err != nil {
				t.Fatal(err)
			}
			d.ReadAhead()
			return d
		}
		t.Run(string(c), func(t *testing.T) {
			d := open(z)
			got, err := io.ReadAll(iotest.OneByteReader(io.LimitReader(d, 1000)))
			if err != nil || !bytes.Equal(got, data[:1000]) {
				t.Fatalf("first 1000 bytes: %v", err)
			}
			rest, err := io.ReadAll(d)
			if err != nil || !bytes.Equal(append(got, rest...), data) {
				t.Fatalf("read %d of %d bytes: %v", len(got)+len(rest), len(data), err)
			}
			d.Close()

			// Stopped part way, with chunks waiting.
			d = open(z)
			io.ReadFull(d, make([]byte, 10))
			d.Close()

			if c == Uncompressed {
				return
			}
			// A truncated stream: the bytes before the damage, then the
			// decoder's error, never io.EOF.
			d = open(z[:len(z)/2])
			got, err = io.ReadAll(d)
			d.Close()
			if err == nil || errors.Is(err, io.EOF) || !bytes.HasPrefix(data, got) {
				t.Errorf("truncated: %d bytes, error %v", len(got), err)
			}
		})
	}
}
