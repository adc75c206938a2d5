package cfi

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/codeentry"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/gocfi"
	"github.com/cfi2sframe/cfi2sframe/internal/leb128"
)

// Options are what OpenBytesWith does beyond reading the file's CFI.
type Options struct {
	// FromCode: for the code that neither CFI nor a Go program's table
	// describes, derive the rules from its instructions
	// (internal/codeflow), as a section named ".text" after the others;
	// what cannot be proven is left out (File.Left).
	FromCode bool
	// DebugDirs are where a separate debug file is looked up by build-id
	// for the symbols of a stripped file (gdb's debug-file-directory);
	// nil means /usr/lib/debug.
	DebugDirs []string
}

// Left is code the analysis of FromCode left out: [Start, End), the
// instruction where it stopped, the reason's code and its detail.
type Left struct {
	Start, End, PC uint64
	Reason, Detail string
}

// Left lists the code FromCode left out, by address.
func (f *File) Left() []Left { return f.left }

// The note every FDE made from code carries (FDE.Note).
const codeNote = "from-code"

// codeSection is the image of a .debug_frame section made of the rows
// internal/codeflow derives from the instructions of the code no entry
// in described covers (sorted by start), with its notes; the code left
// out; and an error for a file whose code cannot be read.
func codeSection(f *elfread.File, described []Entry, ptr int, o Options) (*Section, []Left, error) {
	ef := f.ELF
	spans := make([]codeentry.Span, 0, len(described))
	for _, e := range described {
		if e.Size == 0 {
			continue
		}
		if n := len(spans); n > 0 && e.Start <= spans[n-1].Hi {
			spans[n-1].Hi = max(spans[n-1].Hi, e.Start+e.Size)
			continue
		}
		spans = append(spans, codeentry.Span{Lo: e.Start, Hi: e.Start + e.Size})
	}
	w, err := newCodeWriter(ef.Machine, ef.ByteOrder, ptr)
	if err != nil {
		return nil, nil, nil // a machine the analysis does not know: nothing from code
	}
	code, _, err := codeentry.Load(f, codeentry.Options{DebugDirs: o.DebugDirs, Described: spans})
	if err != nil {
		return nil, nil, err
	}
	var left []Left
	codeflow.Analyze(code, w.fde, func(s codeflow.Skip) {
		left = append(left, Left{Start: s.Start, End: s.End, PC: s.At, Reason: string(s.Reason), Detail: s.Detail})
	})
	sort.Slice(left, func(i, j int) bool { return left[i].Start < left[j].Start })
	sec := &Section{kind: kindCode, data: w.out, order: ef.ByteOrder, ptrSize: ptr, codeEntries: w.entries}
	return sec, left, nil
}

// byteOrder is binary.LittleEndian or BigEndian: appends and puts.
type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// codeWriter writes a .debug_frame image: two CIEs (return addresses
// signed with the A key, then the B key), then an FDE per codeflow.Func,
// its rules unfactored (code and data alignment 1).
type codeWriter struct {
	out     []byte
	order   byteOrder
	ptr     int
	sp, fp  uint64 // DWARF numbers
	ra      uint64
	lr      bool              // the return address is in a register at entry (AArch64)
	cieB    uint32            // the B-key CIE's offset
	entries map[uint64]uint64 // FDE start → the entry its walk began at
}

func newCodeWriter(m elf.Machine, order binary.ByteOrder, ptr int) (*codeWriter, error) {
	w := &codeWriter{ptr: ptr, order: binary.LittleEndian, entries: map[uint64]uint64{}}
	if order == binary.BigEndian {
		w.order = binary.BigEndian
	}
	switch m {
	case elf.EM_X86_64:
		w.sp, w.fp, w.ra = 7, 6, 16
	case elf.EM_AARCH64:
		w.sp, w.fp, w.ra, w.lr = 31, 29, 30, true
	default:
		return nil, fmt.Errorf("no code analysis for %v", m)
	}
	w.cie("")
	w.cieB = uint32(len(w.out))
	w.cie("zB")
	return w, nil
}

func (w *codeWriter) cie(aug string) {
	at := len(w.out)
	w.out = w.order.AppendUint32(w.out, 0)
	w.out = w.order.AppendUint32(w.out, 0xffffffff)
	w.out = append(w.out, 3)
	w.out = append(append(w.out, aug...), 0)
	w.out = append(w.out, 1, 1) // code alignment 1, data alignment 1
	w.out = leb128.AppendUleb(w.out, w.ra)
	if aug != "" {
		w.out = append(w.out, 0) // no augmentation data
	}
	w.finish(at)
}

// finish pads the record begun at at to the pointer size and sets its
// length.
func (w *codeWriter) finish(at int) {
	for (len(w.out)-at)%w.ptr != 0 {
		w.out = append(w.out, opNop)
	}
	w.order.PutUint32(w.out[at:], uint32(len(w.out)-at-4))
}

// fde writes fn's FDE: at each row, the rules that changed.
func (w *codeWriter) fde(fn codeflow.Func) {
	if len(fn.Rows) == 0 || fn.End <= fn.Start {
		return
	}
	at := len(w.out)
	bkey := false
	for _, r := range fn.Rows {
		bkey = bkey || r.BKey
	}
	w.out = w.order.AppendUint32(w.out, 0)
	if bkey {
		w.out = w.order.AppendUint32(w.out, w.cieB)
	} else {
		w.out = w.order.AppendUint32(w.out, 0)
	}
	w.addr(fn.Start)
	w.addr(fn.End - fn.Start)
	if bkey {
		w.out = append(w.out, 0) // the 'z' augmentation's length
	}
	loc := fn.Start
	var prev codeflow.Row
	for i, r := range fn.Rows {
		if r.PC > loc {
			w.advance(r.PC - loc)
			loc = r.PC
		}
		w.row(r, prev, i == 0)
		prev = r
	}
	w.finish(at)
	w.entries[fn.Start] = fn.Entry
}

// row writes the rules of r that differ from prev's (all of them when
// first).
func (w *codeWriter) row(r, prev codeflow.Row, first bool) {
	if first || r.Base != prev.Base || r.CFAOff != prev.CFAOff {
		reg := w.sp
		if r.Base == codeflow.BaseFP {
			reg = w.fp
		}
		w.out = append(w.out, opDefCFASF)
		w.out = leb128.AppendUleb(w.out, reg)
		w.out = leb128.AppendSleb(w.out, r.CFAOff)
	}
	if first || r.FP != prev.FP {
		w.saved(w.fp, r.FP, first)
	}
	if first || r.RA != prev.RA {
		w.saved(w.ra, r.RA, first && w.lr)
	}
	if r.RASigned != (!first && prev.RASigned) {
		w.out = append(w.out, opGNUWindowSave)
	}
}

// saved writes where the caller's value of reg is (nothing for a value
// in its register at the start, the default).
func (w *codeWriter) saved(reg uint64, s codeflow.Saved, first bool) {
	switch {
	case s.Where == codeflow.OnStack:
		w.out = append(w.out, opOffsetExtendedSF)
		w.out = leb128.AppendUleb(w.out, reg)
		w.out = leb128.AppendSleb(w.out, s.Off)
	case !first:
		w.out = append(w.out, opSameValue)
		w.out = leb128.AppendUleb(w.out, reg)
	}
}

func (w *codeWriter) addr(v uint64) {
	if w.ptr == 4 {
		w.out = w.order.AppendUint32(w.out, uint32(v))
		return
	}
	w.out = w.order.AppendUint64(w.out, v)
}

func (w *codeWriter) advance(d uint64) { w.out = gocfi.AppendAdvance(w.out, w.order, d) }
