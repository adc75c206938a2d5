package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// Compression is a layer's compression: the codecs of internal/layer
// that layers use, by the names --dest-compress-format takes.
type Compression = layer.Codec

const (
	None = layer.Uncompressed
	Gzip = layer.Gzip
	Zstd = layer.Zstd
)

// compressionOf says how a layer of media type mt is compressed, and
// whether its content is a tar stream this tool may convert (not a
// foreign or non-distributable layer, nor an artifact's blob).
func compressionOf(mt types.MediaType) (Compression, bool) {
	s := string(mt)
	if strings.Contains(s, "foreign") || strings.Contains(s, "nondistributable") {
		return "", false
	}
	switch mt {
	case types.DockerLayer, types.OCILayer:
		return Gzip, true
	case types.DockerUncompressedLayer, types.OCIUncompressedLayer:
		return None, true
	case types.OCILayerZStd, "application/vnd.docker.image.rootfs.diff.tar.zstd":
		return Zstd, true
	}
	return "", false
}

// layerType is the media type of a layer compressed with c, in an OCI
// manifest or a Docker one.
func layerType(c Compression, oci bool) types.MediaType {
	switch {
	case c == Zstd:
		return types.OCILayerZStd // Docker's schema 2 has no zstd type; the manifest becomes OCI
	case c == None && oci:
		return types.OCIUncompressedLayer
	case c == None:
		return types.DockerUncompressedLayer
	case oci:
		return types.OCILayer
	}
	return types.DockerLayer
}

// spooled is a converted layer: its compressed bytes in an unnamed
// temporary file (elfwrite.Scratch, so that a killed run leaves
// nothing), with the digests computed while it was written. Reading it
// stops when ctx is done.
type spooled struct {
	ctx    context.Context
	f      *os.File
	size   int64
	digest v1.Hash
	diffID v1.Hash
	mt     types.MediaType
}

func (s *spooled) Digest() (v1.Hash, error) { return s.digest, nil }
func (s *spooled) DiffID() (v1.Hash, error) { return s.diffID, nil }
func (s *spooled) Size() (int64, error)     { return s.size, nil }
func (s *spooled) MediaType() (types.MediaType, error) {
	return s.mt, nil
}
func (s *spooled) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(layer.Cancellable(s.ctx, io.NewSectionReader(s.f, 0, s.size))), nil
}
func (s *spooled) close() { s.f.Close() }

// counter hashes and counts what goes through it.
type counter struct {
	h hash.Hash
	n int64
}

func newCounter() *counter { return &counter{h: sha256.New()} }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

func (c *counter) hash() v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(c.h.Sum(nil))}
}

// compressor returns a writer compressing into w with c, and a function
// that flushes and closes it. The settings are fixed, so the same bytes
// give the same output.
func compressor(w io.Writer, c Compression) (io.Writer, func() error, error) {
	switch c {
	case Gzip:
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return nil, nil, err
		}
		return zw, zw.Close, nil
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return nil, nil, err
		}
		return zw, zw.Close, nil
	}
	return w, func() error { return nil }, nil
}

// convertLayer converts one layer, whose bytes are compressed with src:
// its tar stream through layer.Convert, compressed with dst into a
// temporary file. The layer is checked whole as it is read: what
// follows the tar's end (at most layer.MaxTail bytes) too, the
// uncompressed stream against the config's diffID, and the compressed
// blob, to its end, against its descriptor's digest and size. The
// result is nil when no file changed (the source layer is then kept as
// it is).
func convertLayer(ctx context.Context, l *checkedLayer, diffID v1.Hash, src, dst Compression, mt types.MediaType, lo layer.Options, b layer.Bounds) (_ *spooled, _ *layer.Stats, err error) {
	rc, err := l.open()
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	defer func() {
		// A blob that is not what its descriptor says is the cause of
		// whatever else went wrong in reading it: a decoder's error, a
		// tar's, a file's.
		var be *BlobError
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.As(err, &be) || errors.As(rc.finish(), &be) {
			err = be
		}
	}()
	dec, err := layer.NewReader(ctx, src, rc, l.d.Size, b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", lo.Name, err)
	}
	defer dec.Close()
	f, err := elfwrite.Scratch(lo.TempDir)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	digest := newCounter()
	zw, closeZ, err := compressor(io.MultiWriter(f, digest), dst)
	if err != nil {
		return nil, nil, err
	}
	in, newDiffID := newCounter(), newCounter()
	st, err := layer.Convert(ctx, io.TeeReader(dec, in), io.MultiWriter(zw, newDiffID), lo)
	if err != nil {
		return nil, st, err
	}
	if err := dec.Tail(in); err != nil {
		return nil, st, fmt.Errorf("%s: %w", lo.Name, err)
	}
	if got := in.hash(); got != diffID {
		return nil, st, &BlobError{lo.Name, l.d.Digest, fmt.Errorf("its tar stream hashes to %s, which does not match the config's diff_id %s", got, diffID)}
	}
	if err := rc.finish(); err != nil {
		return nil, st, err
	}
	if !st.Changed() {
		f.Close()
		return nil, st, nil
	}
	if err := closeZ(); err != nil {
		return nil, st, fmt.Errorf("%s: compressing: %w", lo.Name, err)
	}
	// Read when the image is written, after the image's own ctx ends: the run's ctx.
	out := &spooled{ctx: l.ctx, f: f, mt: mt, size: digest.n, digest: digest.hash(), diffID: newDiffID.hash()}
	return out, st, nil
}

var _ partial.CompressedLayer = (*spooled)(nil)
