// Package image converts the ELF files of container images: a registry's
// image or multi-platform index, an OCI image layout or a docker save
// archive, read and written with go-containerregistry.
//
// Each layer's tar stream goes through internal/layer, which keeps every
// header but the size of converted files, and is compressed again as it
// was (or as Options.Compression says) into an unlinked temporary file,
// hashing it on the way; a layer with nothing to convert is kept as it
// is, with its digest, so a registry stores no new blob for it. The
// config's diff_ids and one history entry, and the manifest's layer and
// config descriptors and one annotation, are the only other changes: the
// JSON documents are edited field by field, so fields this package does
// not know pass through. Layers are converted in parallel; nothing else
// depends on the order, so the same input and options give the same
// digests.
package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

// Annotation is the manifest annotation that says an image was
// converted; its value names the tool and options.
const Annotation = "dev.cfi2sframe.converted"

// Options configures a conversion.
type Options struct {
	Convert convert.Options
	// Compression, when set, compresses converted layers so instead of
	// as their source was.
	Compression Compression
	KeepGoing   bool   // pass failing files through unchanged (layer.Options.KeepGoing)
	Jobs        int    // layers converted at once (0: runtime.NumCPU())
	TempDir     string // for converted layers and large files ("": os.TempDir())
	// Bounds limits what a layer's stream may expand to.
	Bounds layer.Bounds
	// CreatedBy is the history entry's created_by and the annotation's
	// value: the command and its options.
	CreatedBy string
	// Layer, if set, receives each layer's record when it is done (from
	// one goroutine at a time), with the layers done and known so far
	// (an index's images are read one after the other).
	Layer func(r LayerRecord, done, total int)
}

// LayerRecord is the account of one layer.
type LayerRecord struct {
	Platform  string          `json:"platform,omitempty"`
	Index     int             `json:"layer"` // from 1, bottom up
	Digest    string          `json:"digest"`
	NewDigest string          `json:"new_digest,omitempty"` // "" when the layer was kept
	MediaType types.MediaType `json:"media_type"`
	Size      int64           `json:"size"`
	NewSize   int64           `json:"new_size,omitempty"`
	Entries   int             `json:"entries"`
	Counts    map[string]int  `json:"files"`            // regular files by outcome
	Failed    []layer.File    `json:"failed,omitempty"` // with KeepGoing: passed through unchanged
	Error     string          `json:"error,omitempty"`
}

// Stats sums a conversion up.
type Stats struct {
	Images    int            // images converted
	Passed    []string       // platforms passed through unchanged, with why
	Layers    int            // layers looked at
	NewLayers int            // layers written anew
	Files     map[string]int // regular files by outcome, over all layers
	Failed    []layer.File   // files passed through after failing (KeepGoing)
	mu        sync.Mutex
}

func (s *Stats) add(r LayerRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Layers++
	if r.NewDigest != "" {
		s.NewLayers++
	}
	if s.Files == nil {
		s.Files = map[string]int{}
	}
	for k, v := range r.Counts {
		s.Files[k] += v
	}
	s.Failed = append(s.Failed, r.Failed...)
}

// converter holds what one run shares: options, stats, the temporary
// layers to release.
type converter struct {
	o      Options
	stats  *Stats
	limits *layer.Limits // shared by the layers converted at once
	mu     sync.Mutex
	temps  []*spooled
	rec    sync.Mutex
	done   int // layers done, under rec
	total  int // layers known, under rec
}

// Close releases the converted layers' temporary files; the images
// returned cannot be read after it.
func (c *converter) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.temps {
		s.close()
	}
	c.temps = nil
}

// image converts one image: its layers in parallel, then the config and
// the manifest. platform names it in errors and records. changed is
// false when no layer changed: the image is then img, as it was.
func (c *converter) image(ctx context.Context, img *checkedImage, platform string) (_ v1.Image, changed bool, _ error) {
	manifest := img.manifest
	oci := manifest.MediaType == types.OCIManifestSchema1 || (manifest.MediaType == "" && manifest.Config.MediaType == types.OCIConfigJSON)
	c.rec.Lock()
	c.total += len(manifest.Layers)
	c.rec.Unlock()
	results := make([]*spooled, len(manifest.Layers))
	errs := make([]error, len(manifest.Layers))
	jobs := c.o.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i, d := range manifest.Layers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			results[i], errs[i] = c.layer(ctx, img, i, d, platform, oci)
			if errs[i] != nil {
				cancel() // the image will not be written: stop the others
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, false, err
	}
	return c.rebuild(img, results, platform)
}

// firstError is the first error that is not the cancellation the first
// error caused.
func firstError(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if !errors.Is(err, context.Canceled) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

func prefix(platform string) string {
	if platform == "" {
		return ""
	}
	return platform + ": "
}

// layer converts layer i of img (described by d).
func (c *converter) layer(ctx context.Context, img *checkedImage, i int, d v1.Descriptor, platform string, oci bool) (*spooled, error) {
	name := layerName(platform, i, d.Digest)
	rec := LayerRecord{Platform: platform, Index: i + 1, Digest: d.Digest.String(), MediaType: d.MediaType, Size: d.Size}
	defer func() {
		c.stats.add(rec)
		c.rec.Lock()
		c.done++
		if c.o.Layer != nil {
			c.o.Layer(rec, c.done, c.total)
		}
		c.rec.Unlock()
	}()
	src, ok := compressionOf(d.MediaType)
	if !ok {
		rec.Counts = map[string]int{}
		return nil, nil // foreign, non-distributable or not a tar layer: kept
	}
	comp := src
	if c.o.Compression != "" {
		comp = c.o.Compression
	}
	lo := layer.Options{Convert: c.o.Convert, Name: name, KeepGoing: c.o.KeepGoing, TempDir: c.o.TempDir, Limits: c.limits}
	s, st, err := convertLayer(ctx, img.layers[d.Digest], img.diffIDs[i], src, comp, layerType(comp, oci || comp == Zstd), lo, c.o.Bounds)
	if st != nil {
		rec.Entries = st.Entries
		rec.Counts = map[string]int{}
		for k, v := range st.Counts {
			rec.Counts[string(k)] = v
		}
		rec.Failed = st.Failed()
	}
	if err != nil {
		rec.Error = err.Error()
		return nil, err
	}
	if s != nil {
		c.mu.Lock()
		c.temps = append(c.temps, s)
		c.mu.Unlock()
		rec.NewDigest, rec.NewSize, rec.MediaType = s.digest.String(), s.size, s.mt
	}
	return s, nil
}

func short(h v1.Hash) string {
	s := h.String()
	if len(s) > 19 {
		return s[:19] + "…"
	}
	return s
}

// rebuild writes the new config and manifest of img: converted layers'
// descriptors and diff_ids replaced, one history entry and one
// annotation added, every other field as it was.
func (c *converter) rebuild(img *checkedImage, results []*spooled, platform string) (v1.Image, bool, error) {
	changed := false
	for _, s := range results {
		changed = changed || s != nil
	}
	if !changed {
		out, err := img.image()
		return out, false, err
	}
	rawManifest, manifest := img.raw, img.manifest
	fail := func(what string, err error) (v1.Image, bool, error) {
		return nil, false, fmt.Errorf("%s%s: %w", prefix(platform), what, err)
	}
	newConfig, err := editConfig(img.config, manifest, results, c.o.CreatedBy)
	if err != nil {
		return fail("config", err)
	}
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(newConfig))
	if err != nil {
		return fail("config", err)
	}
	zstdLayers := false
	for _, s := range results {
		zstdLayers = zstdLayers || (s != nil && s.mt == types.OCILayerZStd)
	}
	toOCI := zstdLayers && manifest.MediaType == types.DockerManifestSchema2
	layers := make([]map[string]json.RawMessage, len(manifest.Layers))
	var raw struct {
		Layers []map[string]json.RawMessage `json:"layers"`
		Config map[string]json.RawMessage   `json:"config"`
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(rawManifest, &m); err != nil {
		return fail("manifest", err)
	}
	if err := json.Unmarshal(rawManifest, &raw); err != nil || len(raw.Layers) != len(layers) || raw.Config == nil {
		return fail("manifest", fmt.Errorf("layers or config do not parse (%v)", err))
	}
	for i, d := range raw.Layers {
		layers[i] = d
		mt := manifest.Layers[i].MediaType
		if s := results[i]; s != nil {
			set(d, "digest", s.digest.String())
			set(d, "size", s.size)
			mt = s.mt
		}
		if toOCI {
			mt = ociType(mt)
		}
		set(d, "mediaType", mt)
	}
	set(raw.Config, "digest", configDigest.String())
	set(raw.Config, "size", configSize)
	if toOCI {
		set(raw.Config, "mediaType", types.OCIConfigJSON)
		set(m, "mediaType", types.OCIManifestSchema1)
	}
	set(m, "layers", layers)
	set(m, "config", raw.Config)
	ann := map[string]string{}
	if a, ok := m["annotations"]; ok {
		if err := json.Unmarshal(a, &ann); err != nil {
			return fail("manifest annotations", err)
		}
	}
	ann[Annotation] = c.o.CreatedBy
	set(m, "annotations", ann)
	newManifest, err := json.Marshal(m)
	if err != nil {
		return fail("manifest", err)
	}
	mt := manifest.MediaType
	if mt == "" {
		// An OCI manifest may leave mediaType out (umoci and skopeo 1.9
		// do): its descriptor or Content-Type says what it is.
		if mt, err = img.orig.MediaType(); err != nil {
			return fail("manifest", err)
		}
	}
	if toOCI {
		mt = types.OCIManifestSchema1
	}
	core := &converted{orig: img, manifest: newManifest, config: newConfig, mt: mt, layers: map[v1.Hash]partial.CompressedLayer{}}
	for _, s := range results {
		if s != nil {
			core.layers[s.digest] = s
		}
	}
	out, err := partial.CompressedToImage(core)
	return out, true, err
}

// ociType is the OCI media type of a Docker layer's.
func ociType(mt types.MediaType) types.MediaType {
	switch mt {
	case types.DockerLayer:
		return types.OCILayer
	case types.DockerUncompressedLayer:
		return types.OCIUncompressedLayer
	case types.DockerForeignLayer:
		return types.OCIRestrictedLayer
	}
	return mt
}

func set[T any](m map[string]json.RawMessage, key string, v T) {
	b, _ := json.Marshal(v)
	m[key] = b
}

// editConfig replaces the converted layers' diff_ids in raw and adds one
// history entry (empty_layer, so the entries still match the layers).
func editConfig(raw []byte, manifest *v1.Manifest, results []*spooled, createdBy string) ([]byte, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, err
	}
	var rootfs map[string]json.RawMessage
	if err := json.Unmarshal(cfg["rootfs"], &rootfs); err != nil {
		return nil, fmt.Errorf("rootfs: %w", err)
	}
	var diffIDs []string
	if err := json.Unmarshal(rootfs["diff_ids"], &diffIDs); err != nil {
		return nil, fmt.Errorf("rootfs.diff_ids: %w", err)
	}
	if len(diffIDs) != len(manifest.Layers) {
		return nil, fmt.Errorf("%d diff_ids for %d layers", len(diffIDs), len(manifest.Layers))
	}
	for i, s := range results {
		if s != nil {
			diffIDs[i] = s.diffID.String()
		}
	}
	set(rootfs, "diff_ids", diffIDs)
	set(cfg, "rootfs", rootfs)
	var history []json.RawMessage
	if h, ok := cfg["history"]; ok {
		if err := json.Unmarshal(h, &history); err != nil {
			return nil, fmt.Errorf("history: %w", err)
		}
	}
	entry, _ := json.Marshal(map[string]any{"created_by": createdBy, "comment": "SFrame added to ELF files", "empty_layer": true})
	history = append(history, entry)
	set(cfg, "history", history)
	return json.Marshal(cfg)
}

// converted is a converted image's core: its new manifest and config,
// and its layers (new ones from their temporary files, the others from
// the source image).
type converted struct {
	orig     *checkedImage
	manifest []byte
	config   []byte
	mt       types.MediaType
	layers   map[v1.Hash]partial.CompressedLayer
}

func (c *converted) RawConfigFile() ([]byte, error)      { return c.config, nil }
func (c *converted) MediaType() (types.MediaType, error) { return c.mt, nil }
func (c *converted) RawManifest() ([]byte, error)        { return c.manifest, nil }
func (c *converted) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := c.layers[h]; ok {
		return l, nil
	}
	return c.orig.LayerByDigest(h)
}

// Run converts the image or index src names and writes the result to
// dst. Nothing is written when a layer fails (unless KeepGoing) or the
// context is cancelled. Errors name the reference once.
func Run(ctx context.Context, src, dst Ref, a Access, o Options) (*Stats, error) {
	st := &Stats{}
	c := &converter{o: o, stats: st, limits: layer.NewLimits(o.Jobs, 0)}
	defer c.Close()
	s, err := open(ctx, src, a)
	if err != nil {
		return st, fmt.Errorf("%s: %w", src, err)
	}
	var out output
	if s.idx != nil {
		out.idx, err = c.index(ctx, s.idx)
	} else {
		st.Images = 1
		out.img, _, err = c.image(ctx, s.img, "")
	}
	if err != nil {
		return st, fmt.Errorf("%s: %w", src, err)
	}
	if err := write(ctx, dst, a, out, src); err != nil {
		// A source blob found wrong only as it is copied (an index
		// below the one converted, a layer kept) is the source's fault.
		var be *BlobError
		if errors.As(err, &be) {
			return st, fmt.Errorf("%s: %w", src, be)
		}
		return st, fmt.Errorf("%s: %w", dst, err)
	}
	return st, nil
}
