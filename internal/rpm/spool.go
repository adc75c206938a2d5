package rpm

import (
	"bufio"
	"io"
	"os"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// spool is the payload written before the headers that hold its digests
// and size: a temporary file with no name (elfwrite.Scratch), which no
// kill leaves behind.
type spool struct {
	f    *os.File
	w    *bufio.Writer
	size int64
}

func newSpool(dir string) (*spool, error) {
	f, err := elfwrite.Scratch(dir)
	if err != nil {
		return nil, err
	}
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

// writeTo writes what the spool holds to w.
func (s *spool) writeTo(w io.Writer) error {
	_, err := io.Copy(w, s.reader())
	return err
}

func (s *spool) close() { s.f.Close() }
