package deb

import (
	"bufio"
	"context"
	"io"
	"os"
)

// spool is a member written before its size is known (its ar header
// comes first): an unlinked temporary file.
type spool struct {
	f    *os.File
	w    *bufio.Writer
	size int64
}

func newSpool(dir string) (*spool, error) {
	f, err := os.CreateTemp(dir, "cfi2sframe-deb-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return &spool{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (s *spool) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.size += int64(n)
	return n, err
}

// finish flushes what is written; reader then reads it.
func (s *spool) finish() error { return s.w.Flush() }

func (s *spool) reader() io.Reader { return io.NewSectionReader(s.f, 0, s.size) }

func (s *spool) close() { s.f.Close() }

// ctxReader reads r until ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if r.ctx.Err() != nil {
		return 0, context.Cause(r.ctx)
	}
	return r.r.Read(p)
}
