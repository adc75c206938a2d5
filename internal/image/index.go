package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// supported are the architectures SFrame and this tool cover.
var supported = map[string]bool{"amd64": true, "arm64": true, "s390x": true}

// index converts each image of a multi-platform index whose platform is
// supported; others pass through, with a note in Stats.Passed.
// Attestation manifests about a converted image are dropped, since
// they would attest to an image that is no longer there.
func (c *converter) index(ctx context.Context, idx *checkedIndex) (v1.ImageIndex, error) {
	im, raw := idx.im, idx.raw
	var err error
	var m map[string]json.RawMessage
	var rawDescs struct {
		Manifests []map[string]json.RawMessage `json:"manifests"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	if err := json.Unmarshal(raw, &rawDescs); err != nil || len(rawDescs.Manifests) != len(im.Manifests) {
		return nil, fmt.Errorf("index: manifests do not parse (%v)", err)
	}
	out := &convertedIndex{orig: idx, images: map[v1.Hash]v1.Image{}}
	replaced := map[string]bool{} // old digests of converted images
	var keep []map[string]json.RawMessage
	for i, d := range im.Manifests {
		plat := platformString(d.Platform)
		if !d.MediaType.IsImage() || (d.Platform != nil && !supported[d.Platform.Architecture]) {
			if d.Annotations["vnd.docker.reference.type"] == "" {
				c.note(fmt.Sprintf("%s (%s): passed through unchanged (not a platform SFrame covers)", plat, d.MediaType))
			}
			keep = append(keep, rawDescs.Manifests[i])
			continue
		}
		img, err := idx.checkedImage(d.Digest, plat)
		if err != nil {
			return nil, err
		}
		conv, changed, err := c.image(ctx, img, plat)
		if err != nil {
			return nil, err
		}
		c.stats.mu.Lock()
		c.stats.Images++
		c.stats.mu.Unlock()
		desc := rawDescs.Manifests[i]
		if changed {
			h, err := conv.Digest()
			if err != nil {
				return nil, err
			}
			size, err := conv.Size()
			if err != nil {
				return nil, err
			}
			mt, err := conv.MediaType()
			if err != nil {
				return nil, err
			}
			set(desc, "digest", h.String())
			set(desc, "size", size)
			set(desc, "mediaType", mt)
			out.images[h] = conv
			replaced[d.Digest.String()] = true
		}
		keep = append(keep, desc)
	}
	// Drop attestations of images that were replaced.
	var final []map[string]json.RawMessage
	for _, desc := range keep {
		var ann map[string]string
		if a, ok := desc["annotations"]; ok {
			_ = json.Unmarshal(a, &ann)
		}
		if ann["vnd.docker.reference.type"] != "" && replaced[ann["vnd.docker.reference.digest"]] {
			c.note(fmt.Sprintf("attestation of %s dropped (it attests to the unconverted image)", ann["vnd.docker.reference.digest"]))
			continue
		}
		final = append(final, desc)
	}
	if len(out.images) == 0 {
		return idx, nil
	}
	set(m, "manifests", final)
	ann := map[string]string{}
	if a, ok := m["annotations"]; ok {
		if err := json.Unmarshal(a, &ann); err != nil {
			return nil, fmt.Errorf("index annotations: %w", err)
		}
	}
	ann[Annotation] = c.o.CreatedBy
	set(m, "annotations", ann)
	if out.raw, err = json.Marshal(m); err != nil {
		return nil, err
	}
	if out.mt, err = idx.MediaType(); err != nil {
		return nil, err
	}
	return out, nil
}

func (c *converter) note(s string) {
	c.stats.mu.Lock()
	defer c.stats.mu.Unlock()
	c.stats.Passed = append(c.stats.Passed, s)
}

func platformString(p *v1.Platform) string {
	if p == nil {
		return "image"
	}
	return p.String()
}

// convertedIndex is an index whose converted images are new: its
// manifest says so, and Image gives the new ones.
type convertedIndex struct {
	orig   v1.ImageIndex
	raw    []byte
	mt     types.MediaType
	images map[v1.Hash]v1.Image
}

func (x *convertedIndex) MediaType() (types.MediaType, error) { return x.mt, nil }
func (x *convertedIndex) RawManifest() ([]byte, error)        { return x.raw, nil }
func (x *convertedIndex) Size() (int64, error)                { return int64(len(x.raw)), nil }
func (x *convertedIndex) Digest() (v1.Hash, error) {
	h, _, err := v1.SHA256(bytes.NewReader(x.raw))
	return h, err
}
func (x *convertedIndex) IndexManifest() (*v1.IndexManifest, error) {
	return v1.ParseIndexManifest(bytes.NewReader(x.raw))
}
func (x *convertedIndex) Image(h v1.Hash) (v1.Image, error) {
	if img, ok := x.images[h]; ok {
		return img, nil
	}
	return x.orig.Image(h)
}
func (x *convertedIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return x.orig.ImageIndex(h)
}
func (x *convertedIndex) Manifest() (*v1.Manifest, error) {
	return nil, fmt.Errorf("an index has no image manifest")
}
