package cfi

import (
	"sort"

	"github.com/cfi2sframe/cfi2sframe/elfread"
)

// Loaded is every executed FDE of one file.
type Loaded struct {
	Sections int      // call-frame sections found
	FDEs     int      // FDEs parsed
	Tables   []*Table // executed FDEs, .eh_frame first
	Errors   []error  // malformed records and programs, skipped
}

// Load finds, parses and executes the call-frame information of an ELF
// file. .eh_frame comes first; a .debug_frame FDE is kept only for code no
// .eh_frame FDE covers (GCC emits both with -g and asynchronous unwind
// tables off, and then they describe the same code).
func Load(f *elfread.File) (*Loaded, error) {
	secs, err := Sections(f)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Sections: len(secs)}
	type span struct{ lo, hi uint64 }
	var eh []span
	covered := func(lo, hi uint64) bool {
		i := sort.Search(len(eh), func(i int) bool { return eh[i].hi > lo })
		return i < len(eh) && eh[i].lo < hi
	}
	for _, s := range secs {
		fdes, errs := Parse(s)
		l.Errors = append(l.Errors, errs...)
		l.FDEs += len(fdes)
		for _, fde := range fdes {
			if s.Kind == DebugFrame && covered(fde.Start, fde.End()) {
				continue
			}
			t, err := Execute(fde)
			if err != nil {
				l.Errors = append(l.Errors, err)
				continue
			}
			l.Tables = append(l.Tables, t)
		}
		if s.Kind == EHFrame {
			eh = eh[:0]
			for _, t := range l.Tables {
				eh = append(eh, span{t.FDE.Start, t.FDE.End()})
			}
			sort.Slice(eh, func(i, j int) bool { return eh[i].lo < eh[j].lo })
		}
	}
	return l, nil
}
