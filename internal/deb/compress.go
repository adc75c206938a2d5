package deb

import (
	"bufio"
	"compress/bzip2"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// codec is a member's compression, named by its suffix.
type codec string

const (
	none  codec = ""
	gz    codec = ".gz"
	xzc   codec = ".xz"
	zst   codec = ".zst"
	bzip  codec = ".bz2"
	maxZW       = 1 << 27 // the largest zstd window read, as the zstd tool's default limit
)

// codecOf says how the member name, base plus a suffix, is compressed:
// dpkg takes control.tar, data.tar and each of them followed by .gz,
// .xz, .zst; data.tar.bz2 is read too.
func codecOf(name, base string) (codec, error) {
	c := codec(strings.TrimPrefix(name, base))
	switch c {
	case none, gz, xzc, zst:
		return c, nil
	case bzip:
		if base == dataBase {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown compression %q", string(c))
}

// written is the compression c is written back with: bzip2, which Go
// can read only, becomes xz.
func (c codec) written() codec {
	if c == bzip {
		return xzc
	}
	return c
}

// decoder reads a member of compression c from r. Its header says how
// to write it again (gzip's name, time and OS are kept).
type decoder struct {
	io.Reader
	gzHeader *gzip.Header
	close    func()
}

func newDecoder(c codec, r io.Reader) (*decoder, error) {
	d, err := openDecoder(c, r)
	if err != nil {
		return nil, annotate(c.tool(), err)
	}
	if c != none {
		d.Reader = &streamReader{d.Reader, c.tool()}
	}
	return d, nil
}

// tool names the compression in errors.
func (c codec) tool() string {
	switch c {
	case gz:
		return "gzip"
	case xzc:
		return "xz"
	case zst:
		return "zstd"
	case bzip:
		return "bzip2"
	}
	return "tar"
}

// streamReader says which compression a read error comes from.
type streamReader struct {
	r    io.Reader
	tool string
}

func (s *streamReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = annotate(s.tool, err)
	}
	return n, err
}

// annotate starts err with "tool: " unless it says so already.
func annotate(tool string, err error) error {
	if strings.HasPrefix(err.Error(), tool+":") {
		return err
	}
	return fmt.Errorf("%s: %w", tool, err)
}

func openDecoder(c codec, r io.Reader) (*decoder, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	switch c {
	case none:
		return &decoder{Reader: br, close: func() {}}, nil
	case gz:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return &decoder{Reader: zr, gzHeader: &zr.Header, close: func() { zr.Close() }}, nil
	case xzc:
		zr, err := xz.NewReader(br)
		if err != nil {
			return nil, err
		}
		return &decoder{Reader: zr, close: func() {}}, nil
	case zst:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZW))
		if err != nil {
			return nil, err
		}
		return &decoder{Reader: zr, close: zr.Close}, nil
	case bzip:
		return &decoder{Reader: bzip2.NewReader(br), close: func() {}}, nil
	}
	return nil, fmt.Errorf("unknown compression %q", string(c))
}

// newEncoder writes compression c.written() to w; the same input gives
// the same bytes (one zstd goroutine, gzip's header from the input).
// size, when known (else 0), is how much will be written: xz's
// dictionary and zstd's window are made no larger than needed (8 MiB
// at most, xz -6's and zstd -3's), which saves some 60 MB of xz tables
// for a control member of a few kilobytes.
func newEncoder(c codec, w io.Writer, d *decoder, size int64) (io.WriteCloser, error) {
	window := 8 << 20
	for size > 0 && window > 1<<12 && int64(window/2) >= size {
		window /= 2
	}
	switch c.written() {
	case none:
		return nopCloser{w}, nil
	case gz:
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return nil, err
		}
		if d.gzHeader != nil {
			zw.Header = *d.gzHeader
		}
		return zw, nil
	case xzc:
		return xz.WriterConfig{DictCap: window}.NewWriter(w)
	case zst:
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(max(window, zstd.MinWindowSize)))
	}
	return nil, fmt.Errorf("unknown compression %q", string(c))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
