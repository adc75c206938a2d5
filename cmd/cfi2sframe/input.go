package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
)

// checkOutput refuses an output that is the input itself, reached by any
// path (./sub/../in, a symlink, a hard link), unless inPlace.
// It also refuses, before any work is done, an output WriteFileAtomic
// would refuse at the end (a device, FIFO, directory or socket).
func checkOutput(in os.FileInfo, out string, inPlace bool) error {
	if _, err := elfwrite.ResolveOutput(out); err != nil {
		return fmt.Errorf("%s: %w", out, err)
	}
	st, err := os.Stat(out)
	if err != nil || inPlace {
		return nil // not there yet (or a dangling link): WriteFileAtomic decides
	}
	if os.SameFile(in, st) {
		return fmt.Errorf("%s: -o names the input file itself; use --in-place to replace it", out)
	}
	return nil
}

// openMapped maps the regular file name (internal/mapped); an error
// names the file once.
func openMapped(name string) (*mapped.File, error) {
	in, err := mapped.Open(name)
	if err != nil {
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", name, err)
		}
		return nil, err
	}
	return in, nil
}
