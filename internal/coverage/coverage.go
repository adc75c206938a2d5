// Package coverage measures what share of a file's code an SFrame
// section describes: the bytes of its executable sections, and its
// functions as every source knows them (the CFI, Go's function table,
// the symbol tables). The report and the tree summary both use it, so
// that both say the same.
package coverage

import (
	"debug/elf"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"slices"
)

// Span is the half-open address range [Lo, Hi).
type Span struct{ Lo, Hi uint64 }

// Exec is the address ranges of a file's executable code: the
// sections with SHF_EXECINSTR and content, sorted and merged.
func Exec(ef *elf.File) []Span {
	var out []Span
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			out = append(out, Span{s.Addr, s.Addr + s.Size})
		}
	}
	return Merge(out)
}

// Merge sorts spans and joins those that overlap or touch.
func Merge(ss []Span) []Span {
	slices.SortFunc(ss, func(a, b Span) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	out := ss[:0]
	for _, s := range ss {
		if s.Hi <= s.Lo {
			continue
		}
		if n := len(out); n > 0 && s.Lo <= out[n-1].Hi {
			out[n-1].Hi = max(out[n-1].Hi, s.Hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// Inside says whether addr lies in one of the sorted, merged spans.
func Inside(ss []Span, addr uint64) bool {
	i, _ := slices.BinarySearchFunc(ss, addr, func(s Span, a uint64) int {
		switch {
		case s.Hi <= a:
			return -1
		case s.Lo > a:
			return 1
		}
		return 0
	})
	return i < len(ss) && ss[i].Lo <= addr && addr < ss[i].Hi
}

// Overlap is the number of bytes two sorted, merged Span lists share.
func Overlap(a, b []Span) uint64 {
	var n uint64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].Lo, b[j].Lo), min(a[i].Hi, b[j].Hi)
		if lo < hi {
			n += hi - lo
		}
		if a[i].Hi < b[j].Hi {
			i++
		} else {
			j++
		}
	}
	return n
}

// FuncStarts are the starts of the functions a file's code holds, as
// every source knows them: the CFI's FDEs (cfi), Go's function table
// (more), and the symbol tables' functions; only starts in executable
// code count, each once.
func FuncStarts(ef *elf.File, exec []Span, cfi, more []uint64) []uint64 {
	starts := append(slices.Clone(cfi), more...)
	for _, syms := range [][]elf.Symbol{symbols(ef.Symbols), symbols(ef.DynamicSymbols)} {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				starts = append(starts, s.Value)
			}
		}
	}
	starts = slices.DeleteFunc(starts, func(a uint64) bool { return !Inside(exec, a) })
	slices.Sort(starts)
	return slices.Compact(starts)
}

func symbols(read func() ([]elf.Symbol, error)) []elf.Symbol {
	s, _ := read() // a file without the table has none
	return s
}

// Cover is what share of a file's code an SFrame section describes.
type Cover struct {
	CodeBytes, CoveredBytes uint64 // executable sections' bytes; those in an SFrame function
	Funcs, CoveredFuncs     int    // functions; those whose start an SFrame function covers
}

// Measure measures the cover of exec (Exec's spans) by the SFrame
// functions fdes (any order), counting the functions starts
// (FuncStarts).
func Measure(exec, fdes []Span, starts []uint64) Cover {
	var c Cover
	fdes = Merge(fdes)
	for _, s := range exec {
		c.CodeBytes += s.Hi - s.Lo
	}
	c.CoveredBytes = Overlap(exec, fdes)
	c.Funcs = len(starts)
	for _, a := range starts {
		if Inside(fdes, a) {
			c.CoveredFuncs++
		}
	}
	return c
}

// OfSection measures the bytes of ef's executable code that the SFrame
// section sec (at addr in ef) describes; functions are not counted.
func OfSection(ef *elf.File, sec []byte, addr uint64) (Cover, error) {
	t, err := sframe.Open(sec, addr)
	if err != nil {
		return Cover{}, err
	}
	fdes := make([]Span, 0, t.Header.NumFDEs)
	var d sframe.FDE
	for i := range int(t.Header.NumFDEs) {
		if err := t.FDE(i, &d); err != nil {
			return Cover{}, err
		}
		fdes = append(fdes, Span{d.Start, d.Start + uint64(d.Size)})
	}
	c := Measure(Exec(ef), fdes, nil)
	return c, nil
}
