package elfread

import (
	"debug/elf"
	"sort"
)

// Symbolizer returns a function naming the function symbol that covers an
// address (from .symtab, or .dynsym when there is no .symtab), else the
// executable section holding it in parentheses, else "".
func (f *File) Symbolizer() func(addr uint64) string {
	type sym struct {
		lo, hi uint64
		name   string
	}
	var syms []sym
	add := func(list []elf.Symbol) {
		for _, s := range list {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Name == "" {
				continue
			}
			syms = append(syms, sym{s.Value, s.Value + s.Size, s.Name})
		}
	}
	if l, err := f.ELF.Symbols(); err == nil {
		add(l)
	}
	if len(syms) == 0 {
		if l, err := f.ELF.DynamicSymbols(); err == nil {
			add(l)
		}
	}
	sort.SliceStable(syms, func(i, j int) bool { return syms[i].lo < syms[j].lo })
	secs := f.ELF.Sections
	return func(addr uint64) string {
		i := sort.Search(len(syms), func(i int) bool { return syms[i].lo > addr }) - 1
		if i >= 0 && (addr == syms[i].lo || addr < syms[i].hi) {
			return syms[i].name
		}
		// No symbol (PLT stubs, stripped files): name the section.
		for _, s := range secs {
			if s.Flags&elf.SHF_EXECINSTR != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
				return "(" + s.Name + ")"
			}
		}
		return ""
	}
}
