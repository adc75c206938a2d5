// Package tartest writes and reads tar streams whole, for the tests of
// the packages that convert them (internal/layer, internal/deb): a stream
// is a list of entries, each a header and its data.
package tartest

import (
	"archive/tar"
	"bytes"
	"io"
	"testing"
)

// An Entry is one member of a tar stream.
type Entry struct {
	Hdr  tar.Header
	Data []byte
}

// Write makes a tar stream of es. Each regular file's size is its data's,
// every other entry's 0.
func Write(t testing.TB, es []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.Hdr
		h.Size = int64(len(e.Data))
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Read returns every entry of the tar stream b, in order.
func Read(t testing.TB, b []byte) []Entry {
	t.Helper()
	var es []Entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return es
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, Entry{*h, data})
	}
}

// Headers returns the headers of es.
func Headers(es []Entry) []tar.Header {
	out := make([]tar.Header, len(es))
	for i, e := range es {
		out[i] = e.Hdr
	}
	return out
}
