package cfi

import (
	"unsafe"

	"cmp"
	"fmt"
	"github.com/cfi2sframe/cfi2sframe/internal/hugepage"
	"io"
	"maps"
	"slices"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Stream is the call-frame information of one file, parsed but not yet
// executed: the FDEs to use, each executed on demand into one table that
// is reused from call to call. Memory then grows with the FDE list and one
// function's rows, not with every row of the file (gimli's model: lazy
// entries, a reusable context).
type Stream struct {
	Sections int    // call-frame sections found
	Parsed   int    // FDEs parsed (all sections)
	FDEs     []*FDE // Scan: FDEs to execute, .eh_frame first
	// Entries (Index, instead of FDEs): the FDEs to execute, .eh_frame
	// first, as 24 bytes each; ExecuteEntry parses one again and runs it.
	Entries []Entry
	Errors  []error // malformed records and programs (execution errors are added by Execute)

	in      Interpreter
	t       Table
	parsers []*parser // by section, for ExecuteEntry
	fde     FDE       // the FDE ExecuteEntry ran last
}

// Entry is an FDE of a Stream made by Index: its range, and where its
// record is, to parse it again when it is executed.
type Entry struct {
	Start uint64 // first PC covered
	Size  uint64 // number of bytes covered
	ref   uint64 // record offset << refSecBits | index of the section in the stream
}

const refSecBits = 2

// End is the first PC after the FDE.
func (e Entry) End() uint64 { return e.Start + e.Size }

// Scan finds and parses the call-frame information of an ELF file. .eh_frame
// comes first; a .debug_frame FDE is kept only for code no .eh_frame FDE
// covers (GCC emits both with -g and asynchronous unwind tables off, and
// then they describe the same code). Only when there is a .debug_frame
// are the .eh_frame FDEs executed here, to learn which of them really
// cover code; those that fail are dropped and reported then.
func Scan(f *elfread.File) (*Stream, error) {
	s, err := Index(f)
	if err != nil {
		return nil, err
	}
	s.FDEs = make([]*FDE, 0, len(s.Entries))
	for _, e := range s.Entries {
		fde := new(FDE)
		if err := s.parse(e, fde); err != nil {
			return nil, err
		}
		s.FDEs = append(s.FDEs, fde)
	}
	s.Entries = nil
	return s, nil
}

// Index is Scan keeping the FDEs as Entries, not parsed FDE records: for
// a file with millions of FDEs, 24 bytes each instead of a record each.
func Index(f *elfread.File) (*Stream, error) {
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
	if len(secs) > 1<<refSecBits {
		return nil, fmt.Errorf("%d call-frame sections", len(secs))
	}
	// About one FDE per 40 bytes in real files: room for them, grown if
	// need be (zeroing room for the most FDEs a section could hold costs
	// more than it saves).
	n := 0
	for _, sec := range secs {
		n += len(sec.Data) / 32
	}
	s.Entries = make([]Entry, 0, n+1)
	hugepage.Advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s.Entries))), cap(s.Entries)*int(unsafe.Sizeof(Entry{}))))
	var fde FDE
	var execErrs []error
	for i, sec := range secs {
		p, err := newParser(sec)
		if err != nil {
			s.Errors = append(s.Errors, err)
			s.parsers = append(s.parsers, nil)
			continue
		}
		s.parsers = append(s.parsers, p)
		p.walk(&fde, func(fde *FDE) {
			s.Parsed++
			if sec.Kind == DebugFrame && covered(fde.Start, fde.End()) {
				return
			}
			if sec.Kind == EHFrame && hasDebug {
				if err := s.in.Execute(fde, &s.t); err != nil {
					execErrs = append(execErrs, err)
					return
				}
			}
			s.Entries = append(s.Entries, Entry{Start: fde.Start, Size: fde.Size, ref: uint64(fde.Offset)<<refSecBits | uint64(i)})
		})
		// The section's malformed records, then its programs that failed.
		s.Errors = append(s.Errors, p.errs...)
		s.Errors = append(s.Errors, execErrs...)
		p.errs, execErrs = nil, nil
		if sec.Kind == EHFrame && hasDebug {
			eh = eh[:0]
			for _, e := range s.Entries {
				eh = append(eh, span{e.Start, e.End()})
			}
			sort.Slice(eh, func(i, j int) bool { return eh[i].lo < eh[j].lo })
		}
	}
	return s, nil
}

// Clone returns a stream that executes the same entries independently of
// s, for another goroutine: it shares the sections and the parsed CIEs
// (read only) and has its own table, FDE and Errors (empty; the caller
// joins them to s's). Entries and the counts are shared as they are.
func (s *Stream) Clone() *Stream {
	c := &Stream{Sections: s.Sections, Parsed: s.Parsed, Entries: s.Entries}
	for _, p := range s.parsers {
		if p != nil {
			p = &parser{s: p.s, cies: maps.Clone(p.cies), bad: maps.Clone(p.bad)}
		}
		c.parsers = append(c.parsers, p)
	}
	return c
}

// parse parses e's record again into f.
func (s *Stream) parse(e Entry, f *FDE) error {
	i := int(e.ref & (1<<refSecBits - 1))
	if i >= len(s.parsers) || s.parsers[i] == nil {
		return &Error{Msg: "FDE entry of another stream"}
	}
	return s.parsers[i].fdeAt(int64(e.ref>>refSecBits), f)
}

// ParseEntry parses e's FDE record again into f, for a caller that keeps
// several executed tables at once (each table points at its FDE).
func (s *Stream) ParseEntry(e Entry, f *FDE) error { return s.parse(e, f) }

// ExecuteEntry parses e's FDE again and executes it as Execute does; the
// table and its FDE are valid until the next call.
func (s *Stream) ExecuteEntry(e Entry) (*Table, error) {
	if err := s.parse(e, &s.fde); err != nil {
		s.Errors = append(s.Errors, err)
		return nil, err
	}
	return s.Execute(&s.fde)
}

// SortEntries sorts entries by start address, keeping the order of
// entries with the same start: the order translate takes functions in.
// Real files list their FDEs as a few address-ordered sequences
// interleaved (a linker places each object's .text.unlikely, .text.startup
// and .text apart): libLLVM-15's 98,256 are 3 such sequences, the
// libraries of /usr/lib at most 11. Up to maxSequences of them are merged
// (mergeSequences), in a pass or two over the entries; more take a stable
// sort, whose merges move each entry about log2(n) times.
func SortEntries(entries []Entry) {
	if !slices.IsSortedFunc(entries, byStart) && !mergeSequences(entries) {
		slices.SortStableFunc(entries, byStart)
	}
}

// maxSequences is the most address-ordered sequences mergeSequences
// takes apart.
const maxSequences = 16

// mergeSequences sorts entries as SortEntries does when they are at most
// maxSequences address-ordered sequences interleaved: each entry goes to
// the first sequence whose last start is not above its own, the sequences
// are laid one after another (in their entries' order), and merged back,
// the smallest start first and, among equal starts, the entry that came
// first. false (entries untouched) when more sequences are needed.
func mergeSequences(entries []Entry) bool {
	seq := make([]uint8, len(entries))
	var tails [maxSequences]uint64
	var end [maxSequences]int // the sequences' sizes, then their ends in buf
	k := 0
	for i := range entries {
		st, j := entries[i].Start, 0
		for j < k && tails[j] > st {
			j++
		}
		if j == k {
			if k == maxSequences {
				return false
			}
			k++
		}
		tails[j], seq[i] = st, uint8(j)
		end[j]++
	}
	var head [maxSequences]int // each sequence's next entry in buf
	for j, at := 0, 0; j < k; j++ {
		head[j], at = at, at+end[j]
		end[j] = at
	}
	buf := make([]Entry, len(entries))
	hugepage.Advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)*int(unsafe.Sizeof(Entry{}))))
	orig := make([]int32, len(entries)) // buf[x] was entries[orig[x]]
	next := head
	for i := range entries {
		x := next[seq[i]]
		buf[x], orig[x] = entries[i], int32(i)
		next[seq[i]]++
	}
	for out := range entries {
		best := -1
		for j := range k {
			h := head[j]
			if h == end[j] {
				continue
			}
			if best < 0 {
				best = j
				continue
			}
			b := head[best]
			if buf[h].Start < buf[b].Start || buf[h].Start == buf[b].Start && orig[h] < orig[b] {
				best = j
			}
		}
		entries[out] = buf[head[best]]
		head[best]++
	}
	return true
}

func byStart(a, b Entry) int { return cmp.Compare(a.Start, b.Start) }

// A Cursor executes a list of a stream's entries one at a time, in the
// list's order, into the stream's one reused table (a translate.Source).
// It can also give each entry's FDE before executing it (NextFDE), for a
// caller that executes only some of them (Table).
type Cursor struct {
	s       *Stream
	entries []Entry
}

// Cursor returns a cursor over entries, which must be s's (or those of
// the stream s was cloned from).
func (s *Stream) Cursor(entries []Entry) *Cursor { return &Cursor{s: s, entries: entries} }

// Next executes the next entry that can be executed and returns its
// table, valid until the next call; io.EOF after the last. Entries that
// cannot be parsed again or executed are passed over, their errors added
// to the stream's Errors.
func (c *Cursor) Next() (*Table, error) {
	for {
		if _, err := c.NextFDE(); err != nil {
			return nil, err
		}
		if t := c.Table(); t != nil {
			return t, nil
		}
	}
}

// NextFDE parses the next entry again and returns its FDE, not executed,
// valid until the next call; io.EOF after the last. Entries that cannot
// be parsed again are passed over, their errors added to the stream's
// Errors.
func (c *Cursor) NextFDE() (*FDE, error) {
	for len(c.entries) > 0 {
		e := c.entries[0]
		c.entries = c.entries[1:]
		if err := c.s.parse(e, &c.s.fde); err != nil {
			c.s.Errors = append(c.s.Errors, err)
			continue
		}
		return &c.s.fde, nil
	}
	return nil, io.EOF
}

// Table executes the FDE NextFDE returned last and returns its table,
// valid until the next call, or nil when it cannot be executed (the
// error is added to the stream's Errors).
func (c *Cursor) Table() *Table {
	t, err := c.s.Execute(&c.s.fde)
	if err != nil {
		return nil
	}
	return t
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
