package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/rpm"
	"github.com/cfi2sframe/cfi2sframe/internal/tree"
)

// runRPM converts the RPM package in to out, or in place: the ELF files
// of its payload, and the header's digests and sizes (internal/rpm). A
// package with nothing to convert is copied to out unchanged, or left as
// it is. Signatures the conversion invalidates are dropped, with a line
// saying how to sign again.
func runRPM(ctx context.Context, cmd *cobra.Command, in *mapped.File, meta *fsmeta.Meta, out string, fl *convertFlags, opts convert.Options) error {
	if fl.diagnostics != "" {
		return fmt.Errorf("%s: --diagnostics lists the functions of one ELF file, not of an RPM package", in.Name)
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
	res, err := rpm.Convert(ctx, in.File(), in.Size, rpm.Options{Convert: opts, Name: in.Name, Bounds: fl.bounds()})
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
		fmt.Fprintf(stderr, "%s: %s\n", out, rpmSummary(res, opts.Version))
	}
	// Said even with -q: the package must be signed again.
	if w := res.Warning(); w != "" {
		fmt.Fprintf(stderr, "%s: %s\n", out, w)
	}
	return nil
}

// rpmSummary says what a package's conversion did: its payload's ELF
// files by outcome, the SFrame added, the file digests updated.
func rpmSummary(res *rpm.Result, version uint8) string {
	var parts []string
	for _, oc := range tree.Outcomes {
		if n := res.Stats.Counts[oc]; n > 0 && oc != tree.NotELF {
			parts = append(parts, fmt.Sprintf("%d %s", n, outcomeText[oc]))
		}
	}
	return fmt.Sprintf("payload (%s): ELF files: %s; .sframe v%d, %d bytes; %d file digests updated",
		res.Codec, strings.Join(parts, ", "), version, res.SFrameBytes(), res.Digests)
}
