package layer

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// The temporary storage of the stream converters: this package's tar
// stream, internal/deb's members and internal/rpm's cpio payload share
// it, so that each keeps memory bounded the same way.

// Spool is a stream written before what must precede it is known (a
// .deb member's size in its ar header, an rpm payload's digests in the
// headers before it): an unlinked temporary file (elfwrite.Scratch),
// which no kill leaves behind, written through a buffer and read back
// with read(2).
type Spool struct {
	f    *os.File
	w    *bufio.Writer
	size int64
}

// NewSpool makes a spool in dir ("": os.TempDir()).
func NewSpool(dir string) (*Spool, error) {
	f, err := elfwrite.Scratch(dir)
	if err != nil {
		return nil, err
	}
	return &Spool{f: f, w: bufio.NewWriterSize(f, 1<<16)}, nil
}

func (s *Spool) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.size += int64(n)
	return n, err
}

// Finish flushes what is written; Reader then reads it.
func (s *Spool) Finish() error { return s.w.Flush() }

// Size is the number of bytes written.
func (s *Spool) Size() int64 { return s.size }

// Reader reads what was written, from the start, after Finish.
func (s *Spool) Reader() io.Reader { return io.NewSectionReader(s.f, 0, s.size) }

// Close removes the spool.
func (s *Spool) Close() { s.f.Close() }

// Blob is one file's bytes, in memory or in an unlinked temporary file:
// a file read from a stream to be converted, or its conversion.
type Blob struct {
	Name string // as errors call it
	data []byte
	file *os.File
	size int64
}

// ReadBlob reads a file of size bytes, whose first bytes head are read
// already, from r: into memory when size is at most inMemory, else into
// a temporary file in tempDir. size is the archive's word: only that many
// bytes are read, and a short file is io.ErrUnexpectedEOF. Reading stops
// once ctx is done.
func ReadBlob(ctx context.Context, name string, head []byte, r io.Reader, size, inMemory int64, tempDir string) (*Blob, error) {
	b := &Blob{Name: name, size: size}
	if size <= inMemory {
		b.data = make([]byte, size)
		copy(b.data, head)
		if _, err := io.ReadFull(r, b.data[len(head):]); err != nil {
			return nil, noEOF(err)
		}
		return b, nil
	}
	f, err := elfwrite.Scratch(tempDir)
	if err != nil {
		return nil, err
	}
	b.file = f
	if _, err := f.Write(head); err != nil {
		b.Close()
		return nil, err
	}
	if _, err := io.CopyN(f, Cancellable(ctx, r), size-int64(len(head))); err != nil {
		b.Close()
		return nil, noEOF(err)
	}
	return b, nil
}

// Size is the blob's size in bytes.
func (b *Blob) Size() int64 { return b.size }

// Close removes the blob's temporary file, if any.
func (b *Blob) Close() {
	if b.file != nil {
		b.file.Close()
	}
}

// ReaderAt reads the blob.
func (b *Blob) ReaderAt() io.ReaderAt {
	if b.file != nil {
		return b.file
	}
	return bytes.NewReader(b.data)
}

// CopyTo writes the blob to w, until ctx is done.
func (b *Blob) CopyTo(ctx context.Context, w io.Writer) error {
	if b.file == nil {
		_, err := w.Write(b.data)
		return err
	}
	// Read with read(2), not a mapping, so that the file's pages do not
	// count against the process.
	_, err := io.Copy(w, Cancellable(ctx, io.NewSectionReader(b.file, 0, b.size)))
	return err
}

// ConvertBlob converts in as the file command converts a file, into
// memory when in is in memory, else into a temporary file in tempDir;
// out is nil unless the conversion succeeded and changed the file.
func ConvertBlob(in *Blob, o convert.Options, tempDir string) (out *Blob, res *convert.Result, err error) {
	cf, err := convert.NewFile(in.Name, in.ReaderAt(), in.size)
	if err != nil {
		return nil, nil, err
	}
	defer cf.Close()
	res, err = cf.Convert(o)
	if err != nil || res.Unchanged != "" {
		return nil, res, err
	}
	if in.file == nil {
		var buf bytes.Buffer
		buf.Grow(int(in.size) + len(res.SFrame) + 4096)
		if err := res.Write(&buf); err != nil {
			return nil, nil, &convert.Error{File: in.Name, Err: err}
		}
		return &Blob{Name: in.Name, data: buf.Bytes(), size: int64(buf.Len())}, res, nil
	}
	f, err := elfwrite.Scratch(tempDir)
	if err != nil {
		return nil, nil, err
	}
	out = &Blob{Name: in.Name, file: f}
	if err := res.Write(f); err != nil {
		out.Close()
		return nil, nil, &convert.Error{File: in.Name, Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		out.Close()
		return nil, nil, err
	}
	out.size = fi.Size()
	return out, res, nil
}
