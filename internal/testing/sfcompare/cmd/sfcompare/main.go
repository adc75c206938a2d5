// Command sfcompare compares our .sframe with GNU's for pairs of files:
//
//	sfcompare GNU-FILE OURS-FILE [GNU-FILE OURS-FILE...]
//
// It prints the counts per pair and in total, and exits 1 when any PC
// differs or a GNU function is missing (GNU ld's known .plt.got error is
// counted, not failed).
package main

import (
	"fmt"
	"os"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/sfcompare"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 || len(args)%2 != 0 {
		fmt.Fprintln(os.Stderr, "usage: sfcompare GNU-FILE OURS-FILE...")
		os.Exit(2)
	}
	total := &sfcompare.Counts{}
	for i := 0; i < len(args); i += 2 {
		c, err := sfcompare.Files(args[i], args[i+1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "sfcompare:", err)
			os.Exit(2)
		}
		fmt.Printf("%s: %s\n", args[i+1], c)
		for _, e := range c.Examples {
			fmt.Printf("  %s\n", e)
		}
		total.Add(c)
	}
	fmt.Printf("total: %s\n", total)
	if total.Differ > 0 || total.Missing > 0 {
		os.Exit(1)
	}
}
