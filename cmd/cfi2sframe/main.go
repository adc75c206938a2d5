// Command cfi2sframe converts DWARF call-frame information in ELF files
// into SFrame stack-trace sections, and dumps, verifies and reports on them.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() { os.Exit(run()) }

// run executes the command line and returns the exit status.
func run() int {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cfi2sframe:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}
