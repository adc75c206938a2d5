package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/rpm"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// rpmKind converts an RPM package: the ELF files of its payload, and
// the header's digests and sizes (internal/rpm). Signatures the
// conversion invalidates are dropped, with a line saying how to sign
// again.
var rpmKind = packageKind{
	name: "an RPM package",
	convert: func(ctx context.Context, in *mapped.File, b layer.Bounds, opts convert.Options) (tree.Package, error) {
		res, err := rpm.Convert(ctx, in.File(), in.Size, rpm.Options{Convert: opts, Name: in.Name, Bounds: b})
		if err != nil {
			return nil, err
		}
		return res, nil
	},
	summary: rpmSummary,
}

// rpmSummary says what a package's conversion did: its payload's ELF
// files by outcome, the SFrame added, the file digests updated.
func rpmSummary(p tree.Package, version uint8) string {
	res := p.(*rpm.Result)
	return fmt.Sprintf("payload (%s): ELF files: %s; .sframe v%d, %d bytes; %d file digests updated",
		res.Codec, strings.Join(outcomeCounts(res.Stats), ", "), version, res.SFrameBytes(), res.Digests)
}
