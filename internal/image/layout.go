package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// writeLayout writes s to the OCI layout r names. A new layout (or an
// empty directory) is written in a temporary directory beside it, named
// as elfwrite.IsTemp says, and renamed into place when whole, so that a
// failure or an interrupt leaves nothing at r. Into an existing layout,
// the blobs go first and index.json last (go-containerregistry's order);
// on failure the blobs this run added are removed, and the layout is as
// it was.
func writeLayout(ctx context.Context, r Ref, s output) (err error) {
	var opts []layout.Option
	matcher := func(v1.Descriptor) bool { return false }
	if r.Tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refName: r.Tag}))
		matcher = match.Annotation(refName, r.Tag)
	}
	put := func(p layout.Path) error {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if s.idx != nil {
			return p.ReplaceIndex(s.idx, matcher, opts...)
		}
		return p.ReplaceImage(s.img, matcher, opts...)
	}
	if _, serr := os.Stat(filepath.Join(r.Name, "index.json")); serr == nil {
		p, err := layout.FromPath(r.Name)
		if err != nil {
			return err
		}
		before, err := blobNames(r.Name)
		if err != nil {
			return err
		}
		if err := put(p); err != nil {
			removeNewBlobs(r.Name, before)
			return err
		}
		return nil
	} else if !errors.Is(serr, fs.ErrNotExist) {
		return serr
	}
	if ents, err := os.ReadDir(r.Name); err == nil && len(ents) > 0 {
		return fmt.Errorf("exists and is not an OCI image layout (it has no index.json)")
	}
	parent, base := filepath.Split(filepath.Clean(r.Name))
	if parent == "" {
		parent = "."
	}
	tmp, err := os.MkdirTemp(parent, "."+base+elfwrite.TempMarker+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return err
	}
	if err := put(p); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	// Over an empty directory, or where there is nothing.
	return os.Rename(tmp, r.Name)
}

// blobNames lists the blobs of the layout dir, by algorithm/hex.
func blobNames(dir string) (map[string]bool, error) {
	names := map[string]bool{}
	algs, err := os.ReadDir(filepath.Join(dir, "blobs"))
	if errors.Is(err, fs.ErrNotExist) {
		return names, nil
	}
	if err != nil {
		return nil, err
	}
	for _, a := range algs {
		ents, err := os.ReadDir(filepath.Join(dir, "blobs", a.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			names[a.Name()+"/"+e.Name()] = true
		}
	}
	return names, nil
}

// removeNewBlobs removes the blobs of dir that are not in before.
func removeNewBlobs(dir string, before map[string]bool) {
	after, err := blobNames(dir)
	if err != nil {
		return
	}
	for n := range after {
		if !before[n] {
			os.Remove(filepath.Join(dir, "blobs", n))
		}
	}
}
