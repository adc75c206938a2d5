package layer

import (
	"bufio"
	"compress/bzip2"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Codec is a stream's compression.
type Codec string

const (
	Uncompressed Codec = "none"
	Gzip         Codec = "gzip"
	Xz           Codec = "xz"
	Zstd         Codec = "zstd"
	Bzip2        Codec = "bzip2"
)

// MaxWindow is the largest xz dictionary or zstd window a decoder takes
// (128 MiB, the zstd tool's default limit): a decoder allocates what the
// stream declares before it decodes a byte.
const MaxWindow = 128 << 20

// MaxTail is the most decompressed bytes read after a tar archive's end
// (Reader.Tail).
const MaxTail = 1 << 20

// DefaultMaxExpansion is the default of Bounds.Expansion.
const DefaultMaxExpansion = 250

// baseExpansion is what any stream may expand to, whatever its size.
const baseExpansion = 64 << 20

// Bounds limits what a stream may expand to: at most 64 MiB +
// Expansion × the compressed size (0: no limit).
type Bounds struct{ Expansion int64 }

// limit is the most bytes a stream of compressed bytes may expand to
// (0: no limit).
func (b Bounds) limit(compressed int64) int64 {
	if b.Expansion <= 0 {
		return 0
	}
	compressed = max(compressed, 0)
	if compressed > (1<<62)/b.Expansion {
		return 1 << 62
	}
	return baseExpansion + b.Expansion*compressed
}

// Reader decompresses a stream within Bounds, and stops when its context
// is done.
type Reader struct {
	ctx        context.Context
	codec      Codec
	dec        io.Reader
	close      func()
	gz         *gzip.Header
	n          int64 // bytes decompressed
	limit      int64 // the most n may reach (0: no limit)
	expansion  int64 // the bound's terms, for its error
	compressed int64
	err        error // the first error, returned again
}

// NewReader decompresses the stream r of compression c, whose size is
// compressedSize bytes (the unit of the bound b). Read stops with an error
// once ctx is done. Close the Reader.
func NewReader(ctx context.Context, c Codec, r io.Reader, compressedSize int64, b Bounds) (*Reader, error) {
	d := &Reader{ctx: ctx, codec: c, close: func() {}, limit: b.limit(compressedSize), expansion: b.Expansion, compressed: compressedSize}
	if err := ctx.Err(); err != nil {
		return nil, cancelled(ctx)
	}
	if err := d.open(r, bufSize(compressedSize)); err != nil {
		return nil, d.annotate(err)
	}
	return d, nil
}

// bufSize is the size of the buffer a stream of n bytes is read
// through: 64 KiB, or less for a smaller stream (an xz block header may
// take 1 KiB).
func bufSize(n int64) int { return int(min(max(n, 4<<10), 64<<10)) }

func (d *Reader) open(r io.Reader, size int) error {
	switch d.codec {
	case Uncompressed:
		d.dec = bufio.NewReaderSize(r, size)
	case Gzip:
		zr, err := gzip.NewReader(bufio.NewReaderSize(r, size))
		if err != nil {
			return err
		}
		d.dec, d.gz, d.close = zr, &zr.Header, func() { zr.Close() }
	case Xz:
		xr, err := newXzReader(r, size)
		if err != nil {
			return err
		}
		d.dec = xr
	case Zstd:
		zr, err := zstd.NewReader(bufio.NewReaderSize(r, size), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(MaxWindow), zstd.WithDecoderMaxMemory(MaxWindow))
		if err != nil {
			return err
		}
		d.dec, d.close = zr, zr.Close
	case Bzip2:
		d.dec = bzip2.NewReader(bufio.NewReaderSize(r, size))
	default:
		return fmt.Errorf("unknown compression %q", string(d.codec))
	}
	return nil
}

// Read decompresses into p. It fails once the context is done (with an
// error wrapping its cause), or when the stream expands past its bound
// (a *LimitError).
func (d *Reader) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.ctx.Err() != nil {
		d.err = cancelled(d.ctx)
		return 0, d.err
	}
	n, err := d.dec.Read(p)
	d.n += int64(n)
	if d.limit > 0 && d.n > d.limit {
		n -= int(d.n - d.limit)
		d.err = &LimitError{What: "expansion", Got: d.n, Limit: d.limit, codec: d.codec, expansion: d.expansion, compressed: d.compressed}
		return n, d.err
	}
	if err != nil && err != io.EOF {
		d.err = d.annotate(err)
		return n, d.err
	}
	return n, err
}

// Tail reads what follows a tar archive's end, at most MaxTail
// decompressed bytes, so that the codec's checksums are checked, and
// writes it to w (an image's layer hashes it into its diff_id); more is
// a *LimitError.
func (d *Reader) Tail(w io.Writer) error {
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := d.Read(buf)
		n += int64(k)
		if n > MaxTail {
			return &LimitError{What: "tail", Got: n, Limit: MaxTail, codec: d.codec}
		}
		if _, werr := w.Write(buf[:k]); werr != nil {
			return werr
		}
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// Close frees the decoder.
func (d *Reader) Close() {
	d.close()
	d.close = func() {}
}

// GzipHeader is a gzip stream's header (nil for other codecs): its name,
// time and OS, which a stream compressed again keeps.
func (d *Reader) GzipHeader() *gzip.Header { return d.gz }

// annotate says which codec an error comes from, in the words of the
// limit when a decoder refused a window.
func (d *Reader) annotate(err error) error {
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return &LimitError{What: "window", Limit: MaxWindow, codec: d.codec}
	}
	if d.codec == Uncompressed || strings.HasPrefix(err.Error(), string(d.codec)+":") {
		return err
	}
	return fmt.Errorf("%s: %w", d.codec, err)
}

// cancelled is the error of a read once ctx is done: its cause, which
// errors.Is finds to be context.Canceled (or DeadlineExceeded) too.
func cancelled(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if errors.Is(cause, err) {
		return cause
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// LimitError is a bound that was reached. What is "dictionary" (an xz
// block's), "window" (a zstd frame's), "expansion" (Bounds) or "tail"
// (MaxTail); Got is what the stream declared or reached (0 when a
// decoder does not say), Limit the bound.
type LimitError struct {
	What       string
	Got, Limit int64

	codec                 Codec
	expansion, compressed int64 // Bounds: the bound's terms
}

func (e *LimitError) Error() string {
	var msg string
	switch e.What {
	case "dictionary":
		msg = fmt.Sprintf("the block declares a %s dictionary, over the %s limit", byteSize(e.Got), byteSize(e.Limit))
	case "window":
		msg = fmt.Sprintf("a frame's window is over the %s limit", byteSize(e.Limit))
	case "expansion":
		msg = fmt.Sprintf("expands past %s + %d × its %s", byteSize(baseExpansion), e.expansion, byteSize(e.compressed))
	case "tail":
		msg = fmt.Sprintf("more than %s after the tar archive's end", byteSize(e.Limit))
	default:
		msg = fmt.Sprintf("%s of %d bytes, over the %d limit", e.What, e.Got, e.Limit)
	}
	if e.codec == "" || e.codec == Uncompressed {
		return msg
	}
	return string(e.codec) + ": " + msg
}

// byteSize says n in the largest binary unit it reaches, with at most one
// decimal ("640 KiB", "1.5 GiB").
func byteSize(n int64) string {
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n)/(1<<10), 0
	for v >= 1<<10 && i < len(units)-1 {
		v /= 1 << 10
		i++
	}
	return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + " " + units[i]
}
