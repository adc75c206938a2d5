// Command cfi2sframe converts DWARF call-frame information in ELF files
// into SFrame stack-trace sections, and dumps, verifies and reports on them.
package main

import (
	"errors"
	"fmt"
	"github.com/cfi2sframe/cfi2sframe/internal/hugepage"
	"os"
	"runtime/debug"
)

func main() {
	tuneGC()
	hugepage.Enable() // a batch program: see the package's doc
	os.Exit(run())
}

// tuneGC sets the collector for a short-lived batch program, unless GOGC
// or GOMEMLIMIT say otherwise: collect when the heap has grown 8 times
// over its live size (not 2), within a soft limit of 200 MiB. Every
// command's live heap is small beside the file it maps (the CFI index,
// one function's rows, the output section), so the default collected
// several times per file to no purpose; converting libLLVM-15 then spent
// a quarter of its wall time on collections and the preemption signals
// they send. At 4 times it still collected once, early, while the CFI was
// indexed (with write barriers on: 1.7 ms of its 90, median of 15
// alternated runs); at 8 it does not. The limit keeps the peak where it
// was on big inputs (the 2.1 M-FDE benchmark file: 254 MB either way; a
// tree of /usr/bin and /usr/lib, -j 2: 214-220 MB either way).
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(800)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(200 << 20)
	}
}

// run executes the command line and returns the exit status.
func run() int {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "cfi2sframe:", withHint(err))
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}
