package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// packageKind is a package format converted as a whole (.deb, .rpm).
type packageKind struct {
	name    string // in errors: "a Debian package"
	convert func(ctx context.Context, in *mapped.File, bounds layer.Bounds, opts convert.Options) (tree.Package, error)
	summary func(p tree.Package, version uint8) string
}

// runPackage converts the package in to out, or in place, as k says:
// the ELF files of its payload and the sums and sizes that name them. A
// package with nothing to convert is copied to out unchanged, or left as
// it is. A warning the conversion gives (an RPM's signatures dropped)
// is said even with -q.
func runPackage(ctx context.Context, cmd *cobra.Command, in *mapped.File, meta *fsmeta.Meta, out string, fl *convertFlags, opts convert.Options, k packageKind) error {
	if fl.diagnostics != "" {
		return fmt.Errorf("%s: --diagnostics lists the functions of one ELF file, not of %s", in.Name, k.name)
	}
	var d elfwrite.Dest
	var err error
	if fl.inPlace {
		d, err = inPlaceDest(in, meta, fl.dates)
	} else {
		d, err = elfwrite.OpenDest(out, in.Mode)
	}
	if err != nil {
		return err
	}
	defer d.Dir.Close()
	res, err := k.convert(ctx, in, fl.bounds(), opts)
	if err != nil {
		return err
	}
	defer res.Close()
	stderr := cmd.ErrOrStderr()
	write := func(f *os.File) error { return res.Write(f) }
	if why := res.Unchanged(); why != "" {
		if !fl.inPlace {
			if err := elfwrite.WriteAtomic(ctx, d, write); err != nil {
				return err
			}
		}
		if !fl.quiet {
			fmt.Fprintf(stderr, "%s: %s\n", in.Name, why)
		}
		return nil
	}
	if fl.inPlace {
		err = writeInPlace(ctx, d, write)
	} else {
		err = elfwrite.WriteAtomic(ctx, d, write)
	}
	if err != nil {
		return err
	}
	if !fl.quiet {
		fmt.Fprintf(stderr, "%s: %s\n", out, k.summary(res, opts.Version))
	}
	if w, ok := res.(interface{ Warning() string }); ok && w.Warning() != "" {
		fmt.Fprintf(stderr, "%s: %s\n", out, w.Warning())
	}
	return nil
}

// outcomeCounts lists a package's ELF files by outcome ("3 converted").
func outcomeCounts(s *layer.Stats) []string {
	var parts []string
	for _, oc := range tree.Outcomes {
		if n := s.Counts[oc]; n > 0 && oc != tree.NotELF {
			parts = append(parts, fmt.Sprintf("%d %s", n, outcomeText[oc]))
		}
	}
	return parts
}
