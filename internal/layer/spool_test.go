package layer

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadBlob reads files in memory and through a temporary file, whole
// or short, and with the run cancelled.
func TestReadBlob(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1000)
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("stopped"))
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		rest     []byte // what the stream holds after the head
		inMemory int64
		want     string // error; "": the blob reads data
	}{
		{"in memory", context.Background(), data[8:], int64(len(data)), ""},
		{"to a file", context.Background(), data[8:], 100, ""},
		{"short in memory", context.Background(), data[8:100], int64(len(data)), io.ErrUnexpectedEOF.Error()},
		{"short to a file", context.Background(), data[8:100], 100, io.ErrUnexpectedEOF.Error()},
		{"cancelled to a file", cancelled, data[8:], 100, "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ReadBlob(tc.ctx, "f", data[:8], bytes.NewReader(tc.rest), int64(len(data)), tc.inMemory, t.TempDir())
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || b != nil {
					t.Fatalf("error %v, blob %v; want %q", err, b != nil, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if (b.file != nil) != (int64(len(data)) > tc.inMemory) {
				t.Errorf("in a file: %v, with InMemory %d", b.file != nil, tc.inMemory)
			}
			var got bytes.Buffer
			if err := b.CopyTo(context.Background(), &got); err != nil || !bytes.Equal(got.Bytes(), data) || b.Size() != int64(len(data)) {
				t.Errorf("read back %d of %d bytes: %v", got.Len(), len(data), err)
			}
			at := make([]byte, 16)
			if _, err := b.ReaderAt().ReadAt(at, 32); err != nil || !bytes.Equal(at, data[32:48]) {
				t.Errorf("ReadAt: %q, %v", at, err)
			}
		})
	}
}

// TestSpool writes a spool in pieces and reads it back.
func TestSpool(t *testing.T) {
	s, err := NewSpool(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var want []byte
	for i := range 300 {
		p := bytes.Repeat([]byte{byte(i)}, i*7)
		s.Write(p)
		want = append(want, p...)
	}
	if err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(s.Reader())
	if err != nil || !bytes.Equal(got, want) || s.Size() != int64(len(want)) {
		t.Errorf("read %d bytes of %d (size %d): %v", len(got), len(want), s.Size(), err)
	}
}
