package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/deb"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// debKind converts a Debian package: the ELF files of its data.tar, and
// md5sums (internal/deb).
var debKind = packageKind{
	name: "a Debian package",
	convert: func(ctx context.Context, in *mapped.File, b layer.Bounds, opts convert.Options) (tree.Package, error) {
		res, err := deb.Convert(ctx, in.File(), in.Size, deb.Options{Convert: opts, Name: in.Name, Bounds: b})
		if err != nil {
			return nil, err
		}
		return res, nil
	},
	summary: debSummary,
}

// debSummary says what a package's conversion did: its data member's
// ELF files by outcome, the SFrame added, the md5sums lines updated.
func debSummary(p tree.Package, version uint8) string {
	res := p.(*deb.Result)
	return fmt.Sprintf("%s: ELF files: %s; .sframe v%d, %d bytes; %d md5sums lines updated",
		res.Member, strings.Join(outcomeCounts(res.Stats), ", "), version, res.SFrameBytes(), res.Sums)
}
