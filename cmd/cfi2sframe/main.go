// Command cfi2sframe converts DWARF call-frame information in ELF files
// into SFrame stack-trace sections, and dumps, verifies and reports on them.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cfi2sframe:", err)
		os.Exit(1)
	}
}
