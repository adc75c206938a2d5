package rpm

import (
	"fmt"
	"io"
	"strconv"

	"github.com/dsnet/compress/bzip2"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// A bzip2 payload is written back with github.com/dsnet/compress/bzip2.
// Go's standard library reads bzip2 but cannot write it, and a payload
// must keep its compressor (PAYLOADCOMPRESSOR is kept, and rpm decodes
// by it). dsnet/compress is the one Go bzip2 writer there is: pure Go,
// BSD-licensed, by a Go team member who wrote compress/bzip2's reader
// too, tested against the bzip2 tool's output, and small (the writer
// is a block sorter and Huffman coder, nothing we would write better).
// Its last release (v0.0.1, 2019) is old, but bzip2 has not changed
// since 1.0; a writer of our own would be more code to trust, not less.
// Reading stays with compress/bzip2 (layer.NewReader), whose bounds the
// other codecs share.

// compression is a payload's compression, from PAYLOADCOMPRESSOR and
// PAYLOADFLAGS, which say the codec and its level ("9", "19T8", "7T0").
type compression struct {
	codec layer.Codec
	level int // -1: the codec's default
}

// compressionOf reads the main header's compression: gzip when the
// header does not say, as rpm takes it.
func compressionOf(h *Header) (compression, error) {
	c := compression{level: -1}
	name := h.String(tagPayloadCompressor)
	switch name {
	case "", "gzip":
		c.codec = layer.Gzip
	case "xz":
		c.codec = layer.Xz
	case "zstd":
		c.codec = layer.Zstd
	case "identity":
		c.codec = layer.Uncompressed
	case "bzip2":
		c.codec = layer.Bzip2
	default:
		return c, fmt.Errorf("payload compressor %q: not one of gzip, xz, zstd, bzip2", name)
	}
	flags := h.String(tagPayloadFlags)
	n := 0
	for n < len(flags) && flags[n] >= '0' && flags[n] <= '9' {
		n++
	}
	if n > 0 {
		c.level, _ = strconv.Atoi(flags[:n])
	}
	if f := h.String(tagPayloadFormat); f != "" && f != "cpio" {
		return c, fmt.Errorf("payload format %q, not cpio", f)
	}
	return c, nil
}

// xzDict is the dictionary of xz's presets 0 to 9.
var xzDict = [10]int{256 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20, 8 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20}

// newEncoder compresses to w as c says, at its level: gzip's level as
// it is (with the input's gzip header gz), xz's preset as its dictionary
// size (no larger than size, the input's size, needs), zstd's level as
// the nearest of the encoder's four, bzip2's level as its block size
// (100 kB to 900 kB; rpm's default is 9, as the bzip2 tool's).
func newEncoder(c compression, w io.Writer, gz *gzip.Header, size int64) (io.WriteCloser, error) {
	switch c.codec {
	case layer.Uncompressed:
		return nopCloser{w}, nil
	case layer.Gzip:
		level := c.level
		if level < 0 || level > 9 {
			level = gzip.DefaultCompression
		}
		zw, err := gzip.NewWriterLevel(w, level)
		if err != nil {
			return nil, err
		}
		if gz != nil {
			zw.Header = *gz
		}
		return zw, nil
	case layer.Xz:
		dict := xzDict[6]
		if c.level >= 0 && c.level <= 9 {
			dict = xzDict[c.level]
		}
		for size > 0 && dict > 1<<12 && int64(dict/2) >= size {
			dict /= 2
		}
		return xz.WriterConfig{DictCap: dict}.NewWriter(w)
	case layer.Zstd:
		level := zstd.SpeedDefault
		if c.level > 0 {
			level = zstd.EncoderLevelFromZstd(c.level)
		}
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(level))
	case layer.Bzip2:
		level := c.level
		if level < bzip2.BestSpeed || level > bzip2.BestCompression {
			level = bzip2.BestCompression
		}
		return bzip2.NewWriter(w, &bzip2.WriterConfig{Level: level})
	}
	return nil, fmt.Errorf("unknown compression %q", string(c.codec))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
