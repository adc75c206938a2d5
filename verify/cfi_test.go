package verify

import (
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// loaded is a file's CFI, indexed (File, for Input.Stream) and every
// FDE executed at once (Tables, for Input.Tables).
type loaded struct {
	File   *cfi.File
	Tables []*cfi.Table
}

// loadCFI opens f's CFI and executes every FDE.
func loadCFI(f *elfread.File) (*loaded, error) {
	cf, err := cfi.Open(f.ELF)
	if err != nil {
		return nil, err
	}
	tables, _ := alltables.Execute(cf)
	return &loaded{File: cf, Tables: tables}, nil
}
