package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// Compression is a layer's compression.
type Compression string

const (
	None Compression = "none"
	Gzip Compression = "gzip"
	Zstd Compression = "zstd"
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

// spooled is a converted layer: its compressed bytes in an unlinked
// temporary file (so that a killed run leaves nothing), with the digests
// computed while it was written.
type spooled struct {
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
	return io.NopCloser(io.NewSectionReader(s.f, 0, s.size)), nil
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

// convertLayer converts one layer: its tar stream through layer.Convert,
// compressed with c into a temporary file. The result is nil when no
// file changed (the source layer is then kept as it is).
func convertLayer(ctx context.Context, l v1.Layer, c Compression, mt types.MediaType, lo layer.Options) (*spooled, *layer.Stats, error) {
	rc, err := l.Uncompressed()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", lo.Name, err)
	}
	defer rc.Close()
	f, err := os.CreateTemp(lo.TempDir, "cfi2sframe-layer-*")
	if err != nil {
		return nil, nil, err
	}
	os.Remove(f.Name())
	out := &spooled{f: f, mt: mt}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	digest := newCounter()
	zw, closeZ, err := compressor(io.MultiWriter(f, digest), c)
	if err != nil {
		return nil, nil, err
	}
	diffID := newCounter()
	st, err := layer.Convert(ctx, rc, io.MultiWriter(zw, diffID), lo)
	if err != nil {
		return nil, st, err
	}
	if !st.Changed() {
		return nil, st, nil
	}
	if err := closeZ(); err != nil {
		return nil, st, fmt.Errorf("%s: compressing: %w", lo.Name, err)
	}
	out.size, out.digest, out.diffID = digest.n, digest.hash(), diffID.hash()
	ok = true
	return out, st, nil
}

var _ partial.CompressedLayer = (*spooled)(nil)
