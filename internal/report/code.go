package report

import (
	"debug/elf"
	"slices"
)

// span is the half-open address range [lo, hi).
type span struct{ lo, hi uint64 }

// execSpans are the address ranges of a file's executable code: the
// sections with SHF_EXECINSTR and content, sorted and merged.
func execSpans(ef *elf.File) []span {
	var out []span
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			out = append(out, span{s.Addr, s.Addr + s.Size})
		}
	}
	return merge(out)
}

// merge sorts spans and joins those that overlap or touch.
func merge(ss []span) []span {
	slices.SortFunc(ss, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	out := ss[:0]
	for _, s := range ss {
		if s.hi <= s.lo {
			continue
		}
		if n := len(out); n > 0 && s.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// inside says whether addr lies in one of the sorted, merged spans.
func inside(ss []span, addr uint64) bool {
	i, _ := slices.BinarySearchFunc(ss, addr, func(s span, a uint64) int {
		switch {
		case s.hi <= a:
			return -1
		case s.lo > a:
			return 1
		}
		return 0
	})
	return i < len(ss) && ss[i].lo <= addr && addr < ss[i].hi
}

// overlap is the number of bytes two sorted, merged span lists share.
func overlap(a, b []span) uint64 {
	var n uint64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo < hi {
			n += hi - lo
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return n
}

// funcStarts are the starts of the functions a file's code holds, as
// every source knows them: the CFI's FDEs (cfi), Go's function table
// (more), and the symbol tables' functions; only starts in executable
// code count, each once.
func funcStarts(ef *elf.File, exec []span, cfi, more []uint64) []uint64 {
	starts := append(slices.Clone(cfi), more...)
	for _, syms := range [][]elf.Symbol{symbols(ef.Symbols), symbols(ef.DynamicSymbols)} {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
				starts = append(starts, s.Value)
			}
		}
	}
	starts = slices.DeleteFunc(starts, func(a uint64) bool { return !inside(exec, a) })
	slices.Sort(starts)
	return slices.Compact(starts)
}

func symbols(read func() ([]elf.Symbol, error)) []elf.Symbol {
	s, _ := read() // a file without the table has none
	return s
}

// coverCode fills r's coverage of the code: executable bytes, and those
// the SFrame functions (fdes) describe; functions, and those whose start
// an SFrame function covers.
func coverCode(r *File, exec, fdes []span, starts []uint64) {
	fdes = merge(fdes)
	for _, s := range exec {
		r.CodeBytes += s.hi - s.lo
	}
	r.SFrameCode = overlap(exec, fdes)
	r.CodeFuncs = len(starts)
	for _, a := range starts {
		if inside(fdes, a) {
			r.SFrameCodeFuncs++
		}
	}
}
