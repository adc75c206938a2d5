// Package alltables executes every FDE of a cfi.File and keeps every
// table (CFI rows, not yet translated: internal/allfuncs goes on to SFrame
// functions), for the callers that need them all at once: the conversion
// of a relocatable object (convert), which places the tables by their
// relocations before translating them, and the tests that hold the
// one-FDE-at-a-time paths to it. It is not folded into convert, its one
// importer outside tests, because translate's own tests (package
// translate) import it, and convert imports translate.
package alltables

import (
	"cmp"
	"io"
	"slices"

	"github.com/cfi2sframe/cfi2sframe/cfi"
)

// Execute executes each of f's entries, in f's order (.eh_frame first), into
// a table of its own. errs are f's errors followed by those of the FDEs
// that could not be executed, which are left out.
func Execute(f *cfi.File) (tables []*cfi.Table, errs []error) {
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

// Sorted is a translate.Source over tables already executed, in any
// order: it gives them by start address, keeping the order of tables
// with the same start. Nil tables and tables without an FDE are left out.
func Sorted(ts []*cfi.Table) *Source {
	s := &Source{ts: make([]*cfi.Table, 0, len(ts))}
	for _, t := range ts {
		if t != nil && t.FDE != nil {
			s.ts = append(s.ts, t)
		}
	}
	slices.SortStableFunc(s.ts, func(a, b *cfi.Table) int { return cmp.Compare(a.FDE.Start, b.FDE.Start) })
	return s
}

// Source gives the tables Sorted was given, one at a time.
type Source struct {
	ts  []*cfi.Table
	cur *cfi.Table
}

// Next returns the next table's FDE, or io.EOF after the last.
func (s *Source) Next() (*cfi.FDE, error) {
	if len(s.ts) == 0 {
		return nil, io.EOF
	}
	s.cur, s.ts = s.ts[0], s.ts[1:]
	return s.cur.FDE, nil
}

// Table returns the table of the FDE Next returned last.
func (s *Source) Table() *cfi.Table { return s.cur }
