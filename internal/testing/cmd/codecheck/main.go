// Command codecheck measures the code analysis of --from-code against
// the CFI of files that have it: each file is analysed as if it had no
// CFI (internal/testing/codecheck) and every row judged at every
// instruction against the CFI row there. It prints, per file, the PCs
// judged, the wrong ones (which must be none), the share of the
// CFI-covered instructions described and the rest by reason; it exits 1
// when any row is wrong, 2 when a file cannot be checked.
//
//	go run ./internal/testing/cmd/codecheck /usr/lib/x86_64-linux-gnu/libc.so.6 ...
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/cfi2sframe/cfi2sframe/internal/codeentry"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/codecheck"
)

func main() {
	all := flag.Bool("all", false, "list every wrong PC, not the first 50")
	weakest := flag.Int("weakest", int(codeflow.FromPadding), "drop entries whose source is weaker than this (codeflow.Source: 0 symbol, 1 debug file, 2 gap, 3 call, 4 tail call, 5 pointer, 6 padding)")
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: codecheck [-all] ELF...")
		os.Exit(2)
	}
	opt := codecheck.Options{
		Build: func(f *elfread.File) (*codeflow.Code, error) {
			c, _, err := codeentry.Load(f, codeentry.Options{})
			if err == nil {
				c.Entries = slices.DeleteFunc(c.Entries, func(e codeflow.Entry) bool { return int(e.Source) > *weakest })
			}
			return c, err
		},
		Analyze: codeflow.Analyze,
	}
	rc := 0
	for _, name := range flag.Args() {
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "codecheck:", err)
			rc = 2
			continue
		}
		res, err := codecheck.Check(data, opt)
		if err != nil {
			fmt.Fprintf(os.Stderr, "codecheck: %s: %v\n", name, err)
			rc = 2
			continue
		}
		fmt.Printf("== %s\n%s\n", name, res)
		if *all {
			for _, w := range res.Wrong {
				fmt.Printf("WRONG %#x %s %s: ours %s, CFI %s\n", w.PC, w.Func, w.Field, w.Ours, w.CFI)
			}
		}
		if res.WrongPCs() > 0 && rc == 0 {
			rc = 1
		}
	}
	os.Exit(rc)
}
