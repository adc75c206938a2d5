package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/deb"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// runDeb converts the Debian package in to out, or in place: the ELF
// files of its data.tar, and md5sums (internal/deb). A package with
// nothing to convert is copied to out unchanged, or left as it is.
func runDeb(ctx context.Context, cmd *cobra.Command, in *mapped.File, meta *fsmeta.Meta, out string, fl *convertFlags, opts convert.Options) error {
	if fl.diagnostics != "" {
		return fmt.Errorf("%s: --diagnostics lists the functions of one ELF file, not of a Debian package", in.Name)
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
	res, err := deb.Convert(ctx, in.File(), in.Size, deb.Options{Convert: opts, Name: in.Name, Bounds: fl.bounds()})
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
		fmt.Fprintf(stderr, "%s: %s\n", out, debSummary(res, opts.Version))
	}
	return nil
}

// debSummary says what a package's conversion did: its data member's
// ELF files by outcome, the SFrame added, the md5sums lines updated.
func debSummary(res *deb.Result, version uint8) string {
	var parts []string
	for _, oc := range tree.Outcomes {
		if n := res.Stats.Counts[oc]; n > 0 && oc != tree.NotELF {
			parts = append(parts, fmt.Sprintf("%d %s", n, outcomeText[oc]))
		}
	}
	s := fmt.Sprintf("%s: ELF files: %s; .sframe v%d, %d bytes; %d md5sums lines updated",
		res.Member, strings.Join(parts, ", "), version, res.SFrameBytes(), res.Sums)
	return s
}
