package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/verify"
)

func newVerifyCmd() *cobra.Command {
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "verify [--json] FILE...",
		Short: "Check that a file's .sframe agrees with its CFI at every PC",
		Long: `verify compares, for every PC of every function the .sframe section
describes, the SFrame rule (CFA, return address, frame pointer, mangled RA,
outermost frame) with what the file's .eh_frame/.debug_frame says there.
Findings are printed as "file: func+off [range): what: sframe says X, CFI
says Y". Functions the CFI describes and .sframe does not are listed too,
as are .sframe ranges no CFI covers (PLTs described from their
instructions); only disagreements make the exit status non-zero.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			bad := 0
			var all []fileResult
			for _, name := range args {
				res, err := verifyFile(name)
				if err != nil {
					return err
				}
				if !res.Agree {
					bad++
				}
				if asJSON {
					all = append(all, fileResult{name, res})
					continue
				}
				out := cmd.OutOrStdout()
				counts := map[verify.Kind]int{}
				for _, f := range res.Findings {
					counts[f.Kind]++
					if quiet && f.Kind != verify.Disagree {
						continue
					}
					fmt.Fprintf(out, "%s: %s\n", name, f)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d functions, %d bytes checked: %d disagreements, %d ranges without CFI, %d CFI functions not in .sframe\n",
					name, res.Functions, res.Checked, counts[verify.Disagree], counts[verify.NoCFI], counts[verify.Missing])
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(all); err != nil {
					return err
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d files disagree with their CFI", bad, len(args))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only disagreements")
	return cmd
}

type fileResult struct {
	File string `json:"file"`
	*verify.Result
}

func verifyFile(name string) (*verify.Result, error) {
	in, err := convert.OpenInput(name)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	f, err := elfread.NewFile(bytesReaderAt(in.Data), name)
	if err != nil {
		return nil, err
	}
	es, err := f.SFrame()
	if err != nil {
		return nil, err
	}
	sec, err := sframe.Decode(es.Data, es.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %v", name, es.Name, err)
	}
	// The CFI is executed one FDE at a time as verify reaches its code.
	st, err := cfi.Scan(f)
	if err != nil {
		return nil, err // cfi and elfread errors name the file
	}
	return verify.Check(verify.Input{Machine: f.ELF.Machine, SFrame: sec, FDEs: st.FDEs, Symbol: f.Symbolizer()}), nil
}
