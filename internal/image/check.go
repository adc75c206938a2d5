package image

import (
	"bytes"
	"context"
	"fmt"
	"hash"
	"io"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The limits on what an image may declare. Each is checked before
// anything is read or allocated on the image's word; docs/commands.md
// documents them.
const (
	// MaxDocument is the largest manifest, index or config read: the
	// limit of containers/image (skopeo, podman), which real images stay
	// far below (a manifest of 1000 layers is under 200 KiB).
	MaxDocument = 4 << 20
	// MaxLayers is the most layers an image may have; overlayfs stacks
	// at most 128 and docker refuses more than 127.
	MaxLayers = 1000
	// MaxManifests is the most manifests an index may list.
	MaxManifests = 1000
	// MaxDepth is how deep indexes may nest within indexes.
	MaxDepth = 8
)

// BlobError is a blob whose bytes are not what the descriptor it was
// reached by says: content-addressed storage that lies, a broken mirror
// or a tampered copy. Nothing is written from such an image.
type BlobError struct {
	What   string  // "manifest", "config", "layer 2", "index"
	Digest v1.Hash // as its descriptor says
	Err    error
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("%s: blob %s: %v", e.What, e.Digest, e.Err)
}

func (e *BlobError) Unwrap() error { return e.Err }

// checkDescriptor refuses a descriptor whose size no blob can have.
// (v1.Hash checked the digest's algorithm and length when it was
// parsed.)
func checkDescriptor(what string, d v1.Descriptor) error {
	if d.Size < 0 {
		return &BlobError{what, d.Digest, fmt.Errorf("negative size %d in its descriptor", d.Size)}
	}
	return nil
}

// checkDocument checks a manifest, index or config read whole: its size
// against MaxDocument, and against d (when there is one, digest too).
func checkDocument(what string, b []byte, d *v1.Descriptor) error {
	if len(b) > MaxDocument {
		return fmt.Errorf("%s: %d bytes, over the %d MiB limit on manifests, indexes and configs", what, len(b), MaxDocument>>20)
	}
	if d == nil {
		return nil
	}
	if int64(len(b)) != d.Size {
		return &BlobError{what, d.Digest, fmt.Errorf("%d bytes, but its descriptor's size is %d", len(b), d.Size)}
	}
	h, err := v1.Hasher(d.Digest.Algorithm)
	if err != nil {
		return &BlobError{what, d.Digest, err}
	}
	h.Write(b)
	if got := sum(h, d.Digest.Algorithm); got != d.Digest {
		return &BlobError{what, d.Digest, fmt.Errorf("does not match its digest: the content hashes to %s", got)}
	}
	return nil
}

func sum(h hash.Hash, algorithm string) v1.Hash {
	return v1.Hash{Algorithm: algorithm, Hex: fmt.Sprintf("%x", h.Sum(nil))}
}

// sizer tells the size of the blob h where the transport can without
// reading it (an OCI layout's file), so that a document is not read
// whole on a descriptor's word; ok is false where it cannot.
type sizer func(h v1.Hash) (n int64, ok bool)

// checkStored checks the size of the document d names, as stored,
// against MaxDocument and d before it is read.
func checkStored(what string, d v1.Descriptor, size sizer) error {
	if size == nil {
		return nil
	}
	n, ok := size(d.Digest)
	switch {
	case !ok:
		return nil
	case n > MaxDocument:
		return &BlobError{what, d.Digest, fmt.Errorf("%d bytes stored, over the %d MiB limit on manifests, indexes and configs", n, MaxDocument>>20)}
	case n != d.Size:
		return &BlobError{what, d.Digest, fmt.Errorf("%d bytes stored, but its descriptor's size is %d", n, d.Size)}
	}
	return nil
}

// checkedReader reads a blob, hashing and counting it: more bytes than
// its descriptor's size, fewer at the end, or another digest is an
// error, and so is a done ctx. Only a reader that reached io.EOF without
// an error has read the blob the descriptor names.
type checkedReader struct {
	ctx  context.Context
	rc   io.ReadCloser
	what string
	d    v1.Descriptor
	h    hash.Hash
	n    int64
	err  error
}

func newCheckedReader(ctx context.Context, rc io.ReadCloser, what string, d v1.Descriptor) (*checkedReader, error) {
	h, err := v1.Hasher(d.Digest.Algorithm)
	if err != nil {
		rc.Close()
		return nil, &BlobError{what, d.Digest, err}
	}
	return &checkedReader{ctx: ctx, rc: rc, what: what, d: d, h: h}, nil
}

func (c *checkedReader) fail(format string, a ...any) error {
	c.err = &BlobError{c.what, c.d.Digest, fmt.Errorf(format, a...)}
	return c.err
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if err := c.ctx.Err(); err != nil {
		c.err = context.Cause(c.ctx)
		return 0, c.err
	}
	// Ask for one byte past the size at most: enough to see a lie.
	if room := c.d.Size - c.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.rc.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	switch {
	case c.n > c.d.Size:
		return 0, c.fail("runs past its descriptor's size of %d bytes", c.d.Size)
	case err == io.EOF && c.n < c.d.Size:
		return n, c.fail("ends after %d bytes, short of its descriptor's size of %d", c.n, c.d.Size)
	case err == io.EOF:
		if got := sum(c.h, c.d.Digest.Algorithm); got != c.d.Digest {
			return n, c.fail("does not match its digest: the content hashes to %s", got)
		}
	case err != nil:
		c.err = err
	}
	return n, err
}

// finish reads the rest of the blob, so that its digest and size are
// checked; nil means the whole blob was what its descriptor says.
func (c *checkedReader) finish() error {
	_, err := io.Copy(io.Discard, c)
	return err
}

func (c *checkedReader) Close() error { return c.rc.Close() }

// checkedLayer is a source layer whose bytes are checked against its
// descriptor whenever they are read: by a conversion, or by a writer
// copying a layer that was kept.
type checkedLayer struct {
	ctx  context.Context
	l    v1.Layer
	what string
	d    v1.Descriptor
}

func (l *checkedLayer) Digest() (v1.Hash, error)            { return l.d.Digest, nil }
func (l *checkedLayer) Size() (int64, error)                { return l.d.Size, nil }
func (l *checkedLayer) MediaType() (types.MediaType, error) { return l.d.MediaType, nil }
func (l *checkedLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.open()
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// open is Compressed as the *checkedReader it is.
func (l *checkedLayer) open() (*checkedReader, error) {
	rc, err := l.l.Compressed()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.what, err)
	}
	return newCheckedReader(l.ctx, rc, l.what, l.d)
}

// checkedImage is a source image whose manifest was checked against
// the descriptor it was reached by, whose config was checked against
// the manifest, and whose layers are checked as they are read.
type checkedImage struct {
	ctx      context.Context
	orig     v1.Image
	raw      []byte
	manifest *v1.Manifest
	config   []byte
	diffIDs  []v1.Hash
	layers   map[v1.Hash]*checkedLayer
	// out is what LayerByDigest gives: the checked layer, or a registry
	// layer's shim that lets a push mount it from its repository (the
	// registry holds it to its digest) and checks it when it is copied.
	out map[v1.Hash]partial.CompressedLayer
}

// checkImage checks img's manifest against d (nil where the transport
// has no descriptor to hold it to: a docker archive's manifest is made
// from its files) and its config against the manifest, and bounds what
// they declare. platform names it in errors.
func checkImage(ctx context.Context, img v1.Image, d *v1.Descriptor, platform string, size sizer) (*checkedImage, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("%smanifest: %w", prefix(platform), err)
	}
	if err := checkDocument(prefix(platform)+"manifest", raw, d); err != nil {
		return nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%smanifest: %w", prefix(platform), err)
	}
	if len(m.Layers) > MaxLayers {
		return nil, fmt.Errorf("%smanifest: %d layers, over the limit of %d", prefix(platform), len(m.Layers), MaxLayers)
	}
	ci := &checkedImage{ctx: ctx, orig: img, raw: raw, manifest: m, layers: map[v1.Hash]*checkedLayer{}, out: map[v1.Hash]partial.CompressedLayer{}}
	if err := checkDescriptor(prefix(platform)+"config", m.Config); err != nil {
		return nil, err
	}
	if m.Config.Size > MaxDocument {
		return nil, fmt.Errorf("%sconfig: %d bytes, over the %d MiB limit on manifests, indexes and configs", prefix(platform), m.Config.Size, MaxDocument>>20)
	}
	if err := checkStored(prefix(platform)+"config", m.Config, size); err != nil {
		return nil, err
	}
	if ci.config, err = img.RawConfigFile(); err != nil {
		return nil, fmt.Errorf("%sconfig: %w", prefix(platform), err)
	}
	if err := checkDocument(prefix(platform)+"config", ci.config, &m.Config); err != nil {
		return nil, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(ci.config))
	if err != nil {
		return nil, fmt.Errorf("%sconfig: %w", prefix(platform), err)
	}
	if ci.diffIDs = cfg.RootFS.DiffIDs; len(ci.diffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("%sconfig: %d diff_ids for %d layers", prefix(platform), len(ci.diffIDs), len(m.Layers))
	}
	for i, ld := range m.Layers {
		what := layerName(platform, i, ld.Digest)
		if err := checkDescriptor(what, ld); err != nil {
			return nil, err
		}
		l, err := img.LayerByDigest(ld.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if _, dup := ci.layers[ld.Digest]; dup {
			continue
		}
		cl := &checkedLayer{ctx: ctx, l: l, what: what, d: ld}
		ci.layers[ld.Digest], ci.out[ld.Digest] = cl, cl
		if ml, ok := l.(*remote.MountableLayer); ok {
			v, err := partial.CompressedToLayer(cl)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
			ci.out[ld.Digest] = &remote.MountableLayer{Layer: v, Reference: ml.Reference}
		}
	}
	return ci, nil
}

func layerName(platform string, i int, h v1.Hash) string {
	return fmt.Sprintf("%slayer %d (%s)", prefix(platform), i+1, short(h))
}

func (c *checkedImage) RawManifest() ([]byte, error)        { return c.raw, nil }
func (c *checkedImage) RawConfigFile() ([]byte, error)      { return c.config, nil }
func (c *checkedImage) MediaType() (types.MediaType, error) { return c.orig.MediaType() }
func (c *checkedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := c.out[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("blob %s is not a layer of the image", h)
}

// image is c as a v1.Image.
func (c *checkedImage) image() (v1.Image, error) { return partial.CompressedToImage(c) }

// checkedIndex is a source index whose manifest was checked against the
// descriptor it was reached by (the root of an OCI layout, index.json,
// has none), and whose images and indexes are checked as they are
// reached. chain is the digests of the indexes above it and its own: a
// digest listed again is a cycle, a longer chain than MaxDepth too deep.
type checkedIndex struct {
	ctx   context.Context
	orig  v1.ImageIndex
	raw   []byte
	im    *v1.IndexManifest
	chain []v1.Hash
	size  sizer
}

func checkIndex(ctx context.Context, idx v1.ImageIndex, d *v1.Descriptor, chain []v1.Hash, size sizer) (*checkedIndex, error) {
	raw, err := idx.RawManifest()
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if err := checkDocument("index", raw, d); err != nil {
		return nil, err
	}
	im, err := v1.ParseIndexManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if len(im.Manifests) > MaxManifests {
		return nil, fmt.Errorf("index: %d manifests, over the limit of %d", len(im.Manifests), MaxManifests)
	}
	for _, md := range im.Manifests {
		if err := checkDescriptor("manifest", md); err != nil {
			return nil, err
		}
		if md.Size > MaxDocument {
			return nil, &BlobError{"manifest", md.Digest, fmt.Errorf("%d bytes in its descriptor, over the %d MiB limit on manifests, indexes and configs", md.Size, MaxDocument>>20)}
		}
	}
	return &checkedIndex{ctx: ctx, orig: idx, raw: raw, im: im, chain: chain, size: size}, nil
}

func (x *checkedIndex) find(h v1.Hash) (*v1.Descriptor, error) {
	for i := range x.im.Manifests {
		if x.im.Manifests[i].Digest == h {
			return &x.im.Manifests[i], nil
		}
	}
	return nil, fmt.Errorf("index: %s is not listed", h)
}

func (x *checkedIndex) MediaType() (types.MediaType, error) { return x.orig.MediaType() }
func (x *checkedIndex) RawManifest() ([]byte, error)        { return x.raw, nil }
func (x *checkedIndex) Size() (int64, error)                { return int64(len(x.raw)), nil }
func (x *checkedIndex) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(x.raw))
	return h, err
}
func (x *checkedIndex) IndexManifest() (*v1.IndexManifest, error) {
	return v1.ParseIndexManifest(bytes.NewReader(x.raw))
}

// Image is the checked image h of the index.
func (x *checkedIndex) Image(h v1.Hash) (v1.Image, error) {
	ci, err := x.checkedImage(h, "")
	if err != nil {
		return nil, err
	}
	return ci.image()
}

func (x *checkedIndex) checkedImage(h v1.Hash, platform string) (*checkedImage, error) {
	d, err := x.find(h)
	if err != nil {
		return nil, err
	}
	if err := checkStored(prefix(platform)+"manifest", *d, x.size); err != nil {
		return nil, err
	}
	img, err := x.orig.Image(h)
	if err != nil {
		return nil, fmt.Errorf("%smanifest %s: %w", prefix(platform), h, err)
	}
	return checkImage(x.ctx, img, d, platform, x.size)
}

// ImageIndex is the checked index h of the index.
func (x *checkedIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	d, err := x.find(h)
	if err != nil {
		return nil, err
	}
	if slices.Contains(x.chain, h) {
		return nil, &BlobError{"index", h, fmt.Errorf("lists itself, or an index that lists it (a cycle)")}
	}
	if len(x.chain) >= MaxDepth {
		return nil, &BlobError{"index", h, fmt.Errorf("nested more than %d deep", MaxDepth)}
	}
	if err := checkStored("index", *d, x.size); err != nil {
		return nil, err
	}
	idx, err := x.orig.ImageIndex(h)
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", h, err)
	}
	return checkIndex(x.ctx, idx, d, append(slices.Clip(x.chain), h), x.size)
}
