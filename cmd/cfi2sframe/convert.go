package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/elfwrite"
)

type convertFlags struct {
	output      string
	inPlace     bool
	version     uint8
	pcrel       bool
	sigFrames   bool
	force       bool
	quiet       bool
	diagnostics string
}

func addConvertFlags(cmd *cobra.Command, fl *convertFlags) {
	f := cmd.Flags()
	f.StringVarP(&fl.output, "output", "o", "", "write the converted file to `FILE`")
	f.BoolVar(&fl.inPlace, "in-place", false, "replace the input file (atomically) instead of writing -o")
	f.Uint8Var(&fl.version, "sframe-version", 3, "SFrame version to write: 3 or 2")
	f.BoolVar(&fl.pcrel, "pcrel", false, "version 2: set SFRAME_F_FDE_FUNC_START_PCREL (start addresses relative to the field)")
	f.BoolVar(&fl.force, "force", false, "replace SFrame data the input already has")
	f.BoolVar(&fl.sigFrames, "signal-frames", false, "version 3: give signal trampolines whose CFI cannot be described a signal FDE without FREs, so unwinders continue through the kernel's signal frame (verify reports these against the CFI)")
	f.BoolVarP(&fl.quiet, "quiet", "q", false, "print nothing but errors")
	f.StringVar(&fl.diagnostics, "diagnostics", "", "print every skipped function: `text` (stderr) or json (stdout)")
}

// runConvert is the root command: cfi2sframe IN -o OUT.
func runConvert(cmd *cobra.Command, args []string, fl *convertFlags) error {
	if len(args) != 1 {
		return fmt.Errorf("expected one input file (see cfi2sframe --help), got %d", len(args))
	}
	in := args[0]
	switch {
	case fl.inPlace && fl.output != "":
		return errors.New("--in-place and -o exclude each other")
	case fl.inPlace:
		fl.output = in
	case fl.output == "":
		return errors.New("no output: give -o FILE or --in-place")
	}
	switch fl.diagnostics {
	case "", "text", "json":
	default:
		return fmt.Errorf("--diagnostics %q: want text or json", fl.diagnostics)
	}
	st, err := os.Stat(in)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", in)
	}
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	res, err := convert.Convert(in, data, convert.Options{Version: fl.version, PCRel: fl.pcrel, Force: fl.force, SignalFrames: fl.sigFrames})
	if err != nil {
		return err
	}
	err = elfwrite.WriteFileAtomic(fl.output, st.Mode(), func(w io.Writer) error {
		_, err := w.Write(res.Output)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %v", fl.output, err)
	}
	stderr := cmd.ErrOrStderr()
	switch fl.diagnostics {
	case "text":
		for _, e := range res.CFIErrors {
			fmt.Fprintf(stderr, "%s: %v\n", in, e)
		}
		for _, d := range res.Translate.Diags {
			fmt.Fprintf(stderr, "%s: %s\n", in, d)
		}
	case "json":
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		errs := make([]string, len(res.CFIErrors))
		for i, e := range res.CFIErrors {
			errs[i] = e.Error()
		}
		if err := enc.Encode(struct {
			File        string   `json:"file"`
			CFIErrors   []string `json:"cfi_errors"`
			Diagnostics any      `json:"diagnostics"`
		}{in, errs, res.Translate.Diags}); err != nil {
			return err
		}
	}
	if !fl.quiet {
		where := fmt.Sprintf(" at %#x", res.Addr)
		switch {
		case res.Members > 0:
			where = fmt.Sprintf(" in %d archive members", res.Members)
		case res.Addr == 0:
			where = " (relocatable object)"
		}
		fmt.Fprintf(stderr, "%s: %s; .sframe v%d, %d bytes%s\n", fl.output, res.Translate.Summary(), fl.version, len(res.SFrame), where)
		if n := len(res.CFIErrors); n > 0 {
			fmt.Fprintf(stderr, "%s: %d malformed CFI records skipped (--diagnostics text lists them)\n", in, n)
		}
	}
	return nil
}
