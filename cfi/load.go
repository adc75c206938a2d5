package cfi

import (
	"sort"

	"github.com/cfi2sframe/cfi2sframe/elfread"
)

// Stream is the call-frame information of one file, parsed but not yet
// executed: the FDEs to use, each executed on demand into one table that
// is reused from call to call. Memory then grows with the FDE list and one
// function's rows, not with every row of the file (gimli's model: lazy
// entries, a reusable context).
type Stream struct {
	Sections int     // call-frame sections found
	Parsed   int     // FDEs parsed (all sections)
	FDEs     []*FDE  // FDEs to execute, .eh_frame first
	Errors   []error // malformed records and programs (execution errors are added by Execute)

	in Interpreter
	t  Table
}

// Scan finds and parses the call-frame information of an ELF file. .eh_frame
// comes first; a .debug_frame FDE is kept only for code no .eh_frame FDE
// covers (GCC emits both with -g and asynchronous unwind tables off, and
// then they describe the same code). Only when there is a .debug_frame
// are the .eh_frame FDEs executed here, to learn which of them really
// cover code; those that fail are dropped and reported then.
func Scan(f *elfread.File) (*Stream, error) {
	secs, err := Sections(f)
	if err != nil {
		return nil, err
	}
	s := &Stream{Sections: len(secs)}
	type span struct{ lo, hi uint64 }
	var eh []span
	covered := func(lo, hi uint64) bool {
		i := sort.Search(len(eh), func(i int) bool { return eh[i].hi > lo })
		return i < len(eh) && eh[i].lo < hi
	}
	hasDebug := false
	for _, sec := range secs {
		hasDebug = hasDebug || sec.Kind == DebugFrame
	}
	for _, sec := range secs {
		fdes, errs := Parse(sec)
		s.Errors = append(s.Errors, errs...)
		s.Parsed += len(fdes)
		for _, fde := range fdes {
			if sec.Kind == DebugFrame && covered(fde.Start, fde.End()) {
				continue
			}
			if sec.Kind == EHFrame && hasDebug {
				if _, err := s.Execute(fde); err != nil {
					continue
				}
			}
			s.FDEs = append(s.FDEs, fde)
		}
		if sec.Kind == EHFrame {
			eh = eh[:0]
			for _, f := range s.FDEs {
				eh = append(eh, span{f.Start, f.End()})
			}
			sort.Slice(eh, func(i, j int) bool { return eh[i].lo < eh[j].lo })
		}
	}
	return s, nil
}

// Execute runs fde into the stream's table and returns it; the table and
// its rows are valid until the next call. An error is also added to
// s.Errors. Not safe for concurrent use.
func (s *Stream) Execute(fde *FDE) (*Table, error) {
	if err := s.in.Execute(fde, &s.t); err != nil {
		s.Errors = append(s.Errors, err)
		return nil, err
	}
	return &s.t, nil
}

// Loaded is every executed FDE of one file.
type Loaded struct {
	Sections int      // call-frame sections found
	FDEs     int      // FDEs parsed
	Tables   []*Table // executed FDEs, .eh_frame first
	Errors   []error  // malformed records and programs, skipped
}

// Load scans the call-frame information of an ELF file (see Scan) and
// executes every FDE, keeping every table. Prefer Scan and
// Stream.Execute where one table at a time is enough.
func Load(f *elfread.File) (*Loaded, error) {
	s, err := Scan(f)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Sections: s.Sections, FDEs: s.Parsed}
	for _, fde := range s.FDEs {
		t, err := Execute(fde)
		if err != nil {
			s.Errors = append(s.Errors, err)
			continue
		}
		l.Tables = append(l.Tables, t)
	}
	l.Errors = s.Errors
	return l, nil
}
