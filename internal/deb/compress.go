package deb

import (
	"fmt"
	"io"
	"strings"

	"github.com/dsnet/compress/bzip2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// suffixes are the compressions of members, by the suffix of their name.
var suffixes = map[string]layer.Codec{
	"":     layer.Uncompressed,
	".gz":  layer.Gzip,
	".xz":  layer.Xz,
	".zst": layer.Zstd,
	".bz2": layer.Bzip2,
}

// codecOf says how the member name, base plus a suffix, is compressed:
// dpkg takes control.tar, data.tar and each of them followed by .gz,
// .xz, .zst; data.tar.bz2 is read too.
func codecOf(name, base string) (layer.Codec, error) {
	s := strings.TrimPrefix(name, base)
	c, ok := suffixes[s]
	if !ok || c == layer.Bzip2 && base != dataBase {
		return "", fmt.Errorf("unknown compression %q", s)
	}
	return c, nil
}

// suffix is the member name suffix of compression c.
func suffix(c layer.Codec) string {
	for s, sc := range suffixes {
		if sc == c {
			return s
		}
	}
	return ""
}

// newEncoder writes compression c to w; the same input gives
// the same bytes (one zstd goroutine, gzip's header gz, that of the
// input, when given). size, when known (else 0), is how much will be
// written: xz's dictionary and zstd's window are made no larger than
// needed (8 MiB at most, xz -6's and zstd -3's), which saves some 60 MB
// of xz tables for a control member of a few kilobytes. bzip2 (only
// data.tar.bz2) is written by dsnet/compress's writer, as internal/rpm
// writes bzip2 payloads (see its compress.go for why that library), with
// 900 kB blocks, the bzip2 tool's default.
func newEncoder(c layer.Codec, w io.Writer, gz *gzip.Header, size int64) (io.WriteCloser, error) {
	window := 8 << 20
	for size > 0 && window > 1<<12 && int64(window/2) >= size {
		window /= 2
	}
	switch c {
	case layer.Uncompressed:
		return nopCloser{w}, nil
	case layer.Gzip:
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return nil, err
		}
		if gz != nil {
			zw.Header = *gz
		}
		return zw, nil
	case layer.Xz:
		return xz.WriterConfig{DictCap: window}.NewWriter(w)
	case layer.Zstd:
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(max(window, zstd.MinWindowSize)))
	case layer.Bzip2:
		return bzip2.NewWriter(w, &bzip2.WriterConfig{Level: bzip2.BestCompression})
	}
	return nil, fmt.Errorf("unknown compression %q", string(c))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
