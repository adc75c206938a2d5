package codeentry

import (
	"debug/elf"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// symFunc is a function symbol inside the text.
type symFunc struct {
	addr, size uint64
	name       string
	cold       bool
	src        codeflow.Source
}

// symbols is what a file's symbol tables say of its code.
type symbols struct {
	source codeflow.Source
	symtab bool // the file has a .symtab (it is not stripped)
	funcs  []symFunc
	cold   map[uint64]bool // the addresses of foo.cold parts
	data   []Span          // AArch64 $d ranges
	// defined maps a function name (without @version) to the addresses
	// the file defines it at, for the calls that do not return.
	defined map[string][]uint64
	// sorted extents of sized non-cold functions, for inside.
	extents []Span
}

// coldName matches GCC's names for the cold part of a split function:
// foo.cold, foo.cold.3 (GCC 8 numbered them).
var coldName = regexp.MustCompile(`\.cold(\.[0-9]+)?$`)

// readSymbols reads .symtab and .dynsym. A table that cannot be read is
// a problem noted, not an error: the other sources still give entries.
func readSymbols(f *elfread.File, img *image, notes *Notes, src codeflow.Source) *symbols {
	s := &symbols{source: src, cold: map[uint64]bool{}, defined: map[string][]uint64{}}
	var mapping []elf.Symbol
	for _, t := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		list, err := symbolTable(f, t)
		if err != nil {
			notes.Problems = append(notes.Problems, err.Error())
			continue
		}
		if t == elf.SHT_SYMTAB && len(list) > 0 {
			s.symtab = true
		}
		for _, sym := range list {
			if f.ELF.Machine == elf.EM_AARCH64 && isMapping(sym.Name) {
				mapping = append(mapping, sym)
				continue
			}
			s.addSym(sym, img)
		}
	}
	s.data = dataSpans(mapping, s.funcs, img)
	s.index()
	return s
}

// symbolTable reads the first section of type t, its size checked
// against the file's first; none is no symbols.
func symbolTable(f *elfread.File, t elf.SectionType) ([]elf.Symbol, error) {
	sec := f.ELF.SectionByType(t)
	if sec == nil {
		return nil, nil
	}
	if err := f.InFile(sec.Name, sec.Offset, sec.Size); err != nil {
		return nil, err
	}
	var list []elf.Symbol
	var err error
	if t == elf.SHT_SYMTAB {
		list, err = f.ELF.Symbols()
	} else {
		list, err = f.ELF.DynamicSymbols()
	}
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("%s: %w", sec.Name, err)
	}
	return list, nil
}

// isMapping says name is an AArch64 mapping symbol: $x, $d, $x.42.
func isMapping(name string) bool {
	return name == "$x" || name == "$d" || strings.HasPrefix(name, "$x.") || strings.HasPrefix(name, "$d.")
}

func (s *symbols) addSym(sym elf.Symbol, img *image) {
	typ := elf.ST_TYPE(sym.Info)
	if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC {
		return
	}
	name, _, _ := strings.Cut(sym.Name, "@")
	if sym.Section != elf.SHN_UNDEF && sym.Value != 0 {
		s.defined[name] = append(s.defined[name], sym.Value)
	}
	if sym.Section == elf.SHN_UNDEF || img.textAt(sym.Value) < 0 {
		return
	}
	s.funcs = append(s.funcs, symFunc{addr: sym.Value, size: sym.Size, name: name, cold: coldName.MatchString(name), src: s.source})
}

// index sorts the functions and builds the lookups.
func (s *symbols) index() {
	sort.Slice(s.funcs, func(i, j int) bool { return s.funcs[i].addr < s.funcs[j].addr })
	s.extents = s.extents[:0]
	for _, f := range s.funcs {
		if f.cold {
			s.cold[f.addr] = true
		}
		if f.size > 0 {
			s.extents = append(s.extents, Span{f.addr, f.addr + f.size})
		}
	}
	sort.Slice(s.extents, func(i, j int) bool { return s.extents[i].Lo < s.extents[j].Lo })
}

// merge adds o's functions, data and names (a debug file's).
func (s *symbols) merge(o *symbols) {
	s.funcs = append(s.funcs, o.funcs...)
	s.data = append(s.data, o.data...)
	sort.Slice(s.data, func(i, j int) bool { return s.data[i].Lo < s.data[j].Lo })
	for k, v := range o.defined {
		s.defined[k] = append(s.defined[k], v...)
	}
	s.index()
}

// add gives the collector every function start but the cold parts.
func (s *symbols) add(c *collector) {
	for _, f := range s.funcs {
		src := f.src
		if f.cold {
			c.notes.Found[src]++
			c.notes.Rejected[RejectCold]++
			continue
		}
		end := uint64(0)
		if f.size > 0 {
			end = f.addr + f.size
		}
		c.add(f.addr, end, src)
	}
}

// inside says addr is strictly inside a function whose symbol gives its
// extent (cold parts included: they have their own sized symbols).
func (s *symbols) inside(addr uint64) bool {
	i := sort.Search(len(s.extents), func(i int) bool { return s.extents[i].Lo >= addr }) - 1
	// Extents may overlap (aliases of different sizes): look back over a
	// few of those starting before addr, not all of them.
	for n := 0; i >= 0 && n < 16; i, n = i-1, n+1 {
		if addr < s.extents[i].Hi {
			return true
		}
	}
	return false
}

// dataSpans turns $d mapping symbols into the ranges of data they
// start: each runs to the next mapping symbol, the next function or the
// end of its text range, whichever is first.
func dataSpans(mapping []elf.Symbol, funcs []symFunc, img *image) []Span {
	var marks []uint64 // where code starts again
	var ds []uint64
	for _, m := range mapping {
		if img.textAt(m.Value) < 0 {
			continue
		}
		if strings.HasPrefix(m.Name, "$d") {
			ds = append(ds, m.Value)
		} else {
			marks = append(marks, m.Value)
		}
	}
	for _, f := range funcs {
		marks = append(marks, f.addr)
	}
	sort.Slice(marks, func(i, j int) bool { return marks[i] < marks[j] })
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	var out []Span
	for i, d := range ds {
		end := img.text[img.textAt(d)].end()
		if k := sort.Search(len(marks), func(k int) bool { return marks[k] > d }); k < len(marks) && marks[k] < end {
			end = marks[k]
		}
		if i+1 < len(ds) && ds[i+1] < end {
			end = ds[i+1]
		}
		if len(out) > 0 && out[len(out)-1].Hi >= d {
			if end > out[len(out)-1].Hi {
				out[len(out)-1].Hi = end
			}
			continue
		}
		out = append(out, Span{d, end})
	}
	return out
}
