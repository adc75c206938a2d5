// Package cfiload executes every FDE of a cfi.File and keeps every table,
// for the callers that need them all at once: the conversion of a
// relocatable object, which places the tables by their relocations before
// translating them, and the tests that hold the one-FDE-at-a-time paths
// to it.
package cfiload

import "github.com/cfi2sframe/cfi2sframe/cfi"

// All executes each of f's entries, in f's order (.eh_frame first), into
// a table of its own. errs are f's errors followed by those of the FDEs
// that could not be executed, which are left out.
func All(f *cfi.File) (tables []*cfi.Table, errs []error) {
	errs = append(errs, f.Errors()...)
	ctx := f.Context(nil)
	for _, e := range f.Entries() {
		fde := new(cfi.FDE)
		if err := ctx.ParseEntry(e, fde); err != nil {
			errs = append(errs, err)
			continue
		}
		t := new(cfi.Table)
		if err := ctx.Execute(fde, t); err != nil {
			errs = append(errs, err)
			continue
		}
		tables = append(tables, t)
	}
	return tables, errs
}
