package rpm

import (
	"bytes"
	"errors"
	"testing"
)

// failAfter is a writer that takes n bytes, then fails.
type failAfter struct {
	n   int
	got bytes.Buffer
}

var errFull = errors.New("full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.got.Len()+len(p) > f.n {
		return 0, errFull
	}
	return f.got.Write(p)
}

// TestPipeWriter writes through a pipe in pieces of several sizes (less
// than, across and many times a chunk), to a writer that takes it all or
// fails part way: the bytes arrive in order, and the writer's error comes
// back from Close (and from Write, once seen) without a deadlock.
func TestPipeWriter(t *testing.T) {
	var data []byte
	for i := range 9 * pipeChunk / 1000 {
		data = append(data, byte(i), byte(i>>8), byte(i>>16), 'x')
	}
	for _, tc := range []struct {
		name  string
		piece int
		limit int // the writer fails past it
	}{
		{"small writes", 1000, len(data)},
		{"chunk-sized", pipeChunk, len(data)},
		{"one write", len(data), len(data)},
		{"failing early", 4096, pipeChunk / 2},
		{"failing late", 3 * pipeChunk / 2, 7 * pipeChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &failAfter{n: tc.limit}
			p := newPipeWriter(w)
			var werr error
			for b := data; len(b) > 0 && werr == nil; {
				k := min(tc.piece, len(b))
				_, werr = p.Write(b[:k])
				b = b[k:]
			}
			err := p.Close()
			if tc.limit >= len(data) {
				if err != nil || werr != nil || !bytes.Equal(w.got.Bytes(), data) {
					t.Fatalf("%d of %d bytes, errors %v, %v", w.got.Len(), len(data), werr, err)
				}
				return
			}
			if !errors.Is(err, errFull) || werr != nil && !errors.Is(werr, errFull) || !bytes.HasPrefix(data, w.got.Bytes()) {
				t.Fatalf("errors %v, %v; %d bytes written, a prefix: %v", werr, err, w.got.Len(), bytes.HasPrefix(data, w.got.Bytes()))
			}
		})
	}
}
