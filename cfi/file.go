package cfi

import (
	"cmp"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"unsafe"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/hugepage"
)

// File is the call-frame information of one ELF file, indexed but not yet
// executed: its sections and the FDEs to use (Entries), each parsed again
// and executed when a Context reaches it. Memory then grows with the FDE
// list and one function's rows, not with every row of the file (gimli's
// model: lazy entries, a reusable context). A File is not changed after
// Open: Contexts made from it may run on several goroutines at once.
type File struct {
	sections []*Section
	parsed   int
	entries  []Entry
	errs     []error
	parsers  []*parser // by section, for ParseEntry
	shared   []shared  // Shared
	left     []Left    // Left
}

// shared is an FDE left out for one of another section that overlaps it,
// where one of the two is a Go program's table's.
type shared struct {
	left Entry
	used int // the index of the section whose FDE was kept
}

// Entry is an FDE of a File: its range, and where its record is, to
// parse it again when it is executed (24 bytes, for files with millions
// of FDEs).
type Entry struct {
	Start uint64 // first PC covered
	Size  uint64 // number of bytes covered
	ref   uint64 // record offset << refSecBits | index of the section in the file
}

const refSecBits = 2

// Open finds and indexes the call-frame information of an ELF file
// opened with debug/elf: .eh_frame (by name or type, or through
// PT_GNU_EH_FRAME when section headers are gone) and .debug_frame, and
// for a Go program the CFI its function table (.gopclntab) gives: an
// FDE per Go function, with the CFA of its pcsp table and the return
// address where Go's ABI puts it, as Go's linker writes .debug_frame
// (Section.Name ".gopclntab"). In a
// relocatable object the sections are relocated with every section at
// address 0, so an FDE's Start is then the offset in its target section,
// which the relocation at StartField names.
//
// .eh_frame comes first; a .debug_frame FDE is kept only for code no
// .eh_frame FDE covers (GCC emits both with -g and asynchronous unwind
// tables off, and then they describe the same code). A Go program's
// table comes between them: its FDE for a Go function is kept where no
// .eh_frame FDE covers the code, and wins over .debug_frame's, which Go's
// linker writes from the same table without its outermost marks
// (Shared lists the functions the table and another section both
// describe). Only when there is a .debug_frame or a Go program's table
// are the .eh_frame FDEs executed here, to learn which of them really
// cover code; those that fail are dropped and reported then.
// Malformed records are reported by Errors; the error returned is for a
// file whose sections cannot be read.
func Open(f *elf.File) (*File, error) { return open(elfread.FromELF(f, ""), Options{}) }

// OpenBytes is Open for an ELF file held in memory (a mapping, say):
// every section is checked to lie inside image before it is read, and
// the sections of a linked file are slices of image, not copies.
func OpenBytes(image []byte) (*File, error) { return OpenBytesWith(image, Options{}) }

// OpenBytesWith is OpenBytes with options: with FromCode, the code no
// FDE covers is described from its instructions too, as a last section
// (.text) whose FDEs Entries lists with the others, and what the
// analysis cannot prove is listed by Left.
func OpenBytesWith(image []byte, o Options) (*File, error) {
	f, err := elfread.NewFileBytes(image, "")
	if err != nil {
		return nil, err
	}
	return open(f, o)
}

// SectionOf returns the section whose FDE e is.
func (f *File) SectionOf(e Entry) *Section { return f.sections[e.ref&(1<<refSecBits-1)] }

// Sections returns the call-frame sections found, .eh_frame first.
func (f *File) Sections() []*Section { return f.sections }

// Parsed is the number of FDEs parsed, in every section, before any was
// left out.
func (f *File) Parsed() int { return f.parsed }

// Entries returns the FDEs to use, .eh_frame first, each in file order
// (SortEntries gives the order translate takes them in). The slice is
// the File's: sort a copy, or sort it before any Context uses it.
func (f *File) Entries() []Entry { return f.entries }

// Errors returns the malformed records found by Open, and the .eh_frame
// programs it executed that failed. A Context keeps the errors of the
// FDEs it parses and executes (Context.Errors).
func (f *File) Errors() []error { return f.errs }

// Shared calls fn for each function that a Go program's function table
// (.gopclntab) and .eh_frame or .debug_frame both describe, their FDEs
// overlapping, in the order Open met them: left is the FDE Open left out,
// used and unused are the names of the section whose FDE it kept
// (.eh_frame over .gopclntab, .gopclntab over .debug_frame) and of left's.
// An empty FDE or one at address 0 is not reported.
func (f *File) Shared(fn func(left Entry, used, unused string)) {
	for _, sh := range f.shared {
		fn(sh.left, f.sections[sh.used].Name(), f.SectionOf(sh.left).Name())
	}
}

// ignored says whether an FDE describes no code: empty, or at address 0
// (a function the linker discarded).
func ignored(f *FDE) bool { return f.Size == 0 || f.Start == 0 }

// open is Open for a file opened with elfread.
func open(ef *elfread.File, o Options) (*File, error) {
	var goNotes []error
	secs, err := sections(ef, &goNotes)
	if err != nil {
		return nil, err
	}
	s := &File{sections: secs, errs: goNotes}
	type span struct {
		lo, hi uint64
		sec    int // the index of the FDE's section
	}
	var eh []span
	// covering is the section of an FDE kept so far that overlaps
	// [lo, hi), or -1.
	covering := func(lo, hi uint64) int {
		i := sort.Search(len(eh), func(i int) bool { return eh[i].hi > lo })
		if i < len(eh) && eh[i].lo < hi {
			return eh[i].sec
		}
		return -1
	}
	hasDebug := false
	for _, sec := range secs {
		hasDebug = hasDebug || sec.kind != kindEH
	}
	if len(secs)+1 > 1<<refSecBits {
		return nil, fmt.Errorf("%d call-frame sections", len(secs))
	}
	// About one FDE per 40 bytes in real files: room for them, grown if
	// need be (zeroing room for the most FDEs a section could hold costs
	// more than it saves).
	n := 0
	for _, sec := range secs {
		n += len(sec.data) / 32
	}
	s.entries = make([]Entry, 0, n+1)
	hugepage.Advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s.entries))), cap(s.entries)*int(unsafe.Sizeof(Entry{}))))
	var fde FDE
	var in interpreter
	var t Table
	var execErrs []error
	// addCode appends the section made from code, once the sections
	// before it are indexed; the loop below takes it too.
	addCode := func() error {
		cs, err := s.fromCode(ef, o)
		if cs != nil {
			secs = append(secs, cs)
			s.sections = secs
		}
		return err
	}
	if o.FromCode && len(secs) == 0 {
		if err := addCode(); err != nil {
			return nil, err
		}
	}
	for i := 0; i < len(secs); i++ {
		sec := secs[i]
		p, err := newParser(sec)
		if err != nil {
			s.errs = append(s.errs, err)
			s.parsers = append(s.parsers, nil)
			continue
		}
		s.parsers = append(s.parsers, p)
		p.walk(&fde, func(fde *FDE) {
			s.parsed++
			if sec.kind != kindEH {
				if by := covering(fde.Start, fde.End()); by >= 0 {
					if (sec.kind == kindGo || secs[by].kind == kindGo) && !ignored(fde) {
						s.shared = append(s.shared, shared{Entry{Start: fde.Start, Size: fde.Size, ref: uint64(fde.Offset)<<refSecBits | uint64(i)}, by})
					}
					return
				}
			}
			if sec.kind == kindEH && hasDebug {
				if err := in.execute(fde, &t); err != nil {
					execErrs = append(execErrs, err)
					return
				}
			}
			s.entries = append(s.entries, Entry{Start: fde.Start, Size: fde.Size, ref: uint64(fde.Offset)<<refSecBits | uint64(i)})
		})
		// The section's malformed records, then its programs that failed.
		s.errs = append(s.errs, p.errs...)
		s.errs = append(s.errs, execErrs...)
		p.errs, execErrs = nil, nil
		// The FDEs so far win over the sections after: .eh_frame over a
		// Go program's table, both over .debug_frame.
		if hasDebug && i+1 < len(secs) {
			eh = eh[:0]
			for _, e := range s.entries {
				eh = append(eh, span{e.Start, e.Start + e.Size, int(e.ref & (1<<refSecBits - 1))})
			}
			sort.Slice(eh, func(i, j int) bool { return eh[i].lo < eh[j].lo })
		}
		if o.FromCode && i == len(secs)-1 && sec.kind != kindCode {
			if err := addCode(); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// fromCode is the section of the rules codeSection derives for the code
// the entries so far leave undescribed, or nil for a machine it does not
// know; what it leaves out is kept for Left.
func (s *File) fromCode(ef *elfread.File, o Options) (*Section, error) {
	described := slices.Clone(s.entries)
	slices.SortFunc(described, byStart)
	ptr := 8
	if ef.ELF.Class == elf.ELFCLASS32 {
		ptr = 4
	}
	cs, left, err := codeSection(ef, described, ptr, o)
	s.left = left
	return cs, err
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

// A Context parses and executes a File's FDEs, reusing its memory from
// one FDE to the next (gimli's UnwindContext): the one table it executes
// into, the FDE it parsed last, the interpreter's state. It walks the
// entries it was made with, in their order (Next, then Table), and can
// parse and execute any other entry of its File (ParseEntry, Execute).
// Each goroutine needs its own; a zero Context executes FDEs (Execute)
// but has no File.
type Context struct {
	in      interpreter
	t       Table
	fde     FDE
	parsers []*parser // the File's, each with its own cache of CIEs
	entries []Entry   // what Next has not reached yet
	errs    []error
}

// Context returns a context over entries, which must be f's: it shares
// f's sections and parsed CIEs (read only) and keeps its own errors.
func (f *File) Context(entries []Entry) *Context {
	c := &Context{entries: entries}
	for _, p := range f.parsers {
		if p != nil {
			p = &parser{s: p.s, cies: maps.Clone(p.cies), bad: maps.Clone(p.bad), le: p.le}
		}
		c.parsers = append(c.parsers, p)
	}
	return c
}

// Next parses the next entry again and returns its FDE, not executed,
// valid until the next call; io.EOF after the last. Entries that cannot
// be parsed again are passed over, their errors kept (Errors).
func (c *Context) Next() (*FDE, error) {
	for len(c.entries) > 0 {
		e := c.entries[0]
		c.entries = c.entries[1:]
		if err := c.ParseEntry(e, &c.fde); err != nil {
			c.errs = append(c.errs, err)
			continue
		}
		return &c.fde, nil
	}
	return nil, io.EOF
}

// Table executes the FDE Next returned last and returns its table, valid
// until the next call, or nil when it cannot be executed (the error is
// kept: Errors).
func (c *Context) Table() *Table {
	if err := c.in.execute(&c.fde, &c.t); err != nil {
		c.errs = append(c.errs, err)
		return nil
	}
	return &c.t
}

// Errors returns the errors of the entries Next and Table passed over,
// in their order.
func (c *Context) Errors() []error { return c.errs }

// ParseEntry parses e's FDE record again into f, for a caller that keeps
// several executed tables at once (each table points at its FDE).
func (c *Context) ParseEntry(e Entry, f *FDE) error {
	i := int(e.ref & (1<<refSecBits - 1))
	if i >= len(c.parsers) || c.parsers[i] == nil {
		return &Error{Section: kindEH.String(), Msg: "FDE entry of another file"}
	}
	return c.parsers[i].fdeAt(int64(e.ref>>refSecBits), f)
}

// Execute runs f's CIE initial instructions and its program into t. t's
// memory (Rows and the rules they point to) is reused: rows of a previous
// call on the same t are overwritten, so keep them only until the next
// call with that t.
func (c *Context) Execute(f *FDE, t *Table) error { return c.in.execute(f, t) }
