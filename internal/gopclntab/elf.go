package gopclntab

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// ErrNotFound is wrapped by the error of Open for a file without a Go
// function table.
var ErrNotFound = errors.New("no Go function table")

// Open finds the function table of an ELF file opened with debug/elf and
// the address its entries are relative to.
//
// The table is the section .gopclntab (Go's internal and external
// linking both keep it); Go 1.16 to 1.19 name it .data.rel.ro.gopclntab in
// a PIE they link themselves, and in a PIE linked externally (cgo) it is
// merged into .data.rel.ro with no section of its own. Then Open takes the
// symbols runtime.pclntab and runtime.epclntab when .symtab is there, else
// looks for a header that parses (magic, zero pad, quantum, pointer size
// of the file's class, a first function that reads) in the loaded
// non-executable sections, or in every PT_LOAD segment when there are no
// section headers (AArch64's GNU ld puts read-only data in the text
// segment).
//
// The text start, for Go 1.18 and later tables, is the header's (Go 1.18
// to 1.25 write runtime.text's address there), else the text field of the
// runtime's moduledata (what the runtime itself uses: the word whose
// value is the table's address starts it, in .go.module from Go 1.26,
// .noptrdata before), read from the dynamic relocations (RELA) when the
// linker left the word 0 in the file (lld does in a PIE), else the symbol
// runtime.text. A candidate is taken only if the first and the last
// function then start inside executable sections (segments). In a cgo
// binary runtime.text is not .text's address: the C start-up code comes
// first.
//
// Entries are then textStart plus their offset, which is the address in
// every ELF binary but one kind: an external link (cgo) for 32-bit ARM or
// ppc64 whose Go text exceeds the branch range is split into several .text
// sections, and the host linker may place them apart; the runtime maps
// those through moduledata's textsectmap, which is not read here.
func Open(f *elf.File) (*Table, error) { return open(elfread.FromELF(f, "")) }

// OpenBytes is Open for an ELF file held in memory: every section is
// checked to lie inside image, and the table is a slice of it, not a copy.
func OpenBytes(image []byte) (*Table, error) {
	f, err := elfread.NewFileBytes(image, "")
	if err != nil {
		return nil, err
	}
	return open(f)
}

// IsGo says whether f is a Go program by its sections: the function
// table's, or the build information's (every Go binary since 1.13). It
// costs no search, so callers ask it before Open, which may scan the
// file's sections for a table.
func IsGo(f *elf.File) bool {
	for _, name := range []string{".gopclntab", ".go.buildinfo", ".data.rel.ro.gopclntab"} {
		if f.Section(name) != nil {
			return true
		}
	}
	return false
}

// Symbolizer returns a function naming the function that covers an
// address: in a Go program, the Go function from the function table, as
// the runtime names it ("runtime.morestack", where the symbol table may
// say "runtime.morestack.abi0"; a stripped program has only the table),
// else what f's symbolizer (elfread.File.Symbolizer) says, read when an
// address outside the table first needs it. It is safe for concurrent
// use.
func Symbolizer(f *elfread.File) func(addr uint64) string {
	var t *Table
	if IsGo(f.ELF) {
		t, _ = OpenELF(f) // without a table, the symbols name everything
	}
	var sym func(uint64) string
	var once sync.Once
	return func(addr uint64) string {
		if t != nil {
			if fn, ok := t.FuncAt(addr); ok {
				return fn.Name
			}
		}
		once.Do(func() { sym = f.Symbolizer() })
		return sym(addr)
	}
}

// OpenELF is Open for a file elfread has opened: a file elfread reads from
// memory (elfread.NewFileBytes) gives the table as a slice of it.
func OpenELF(f *elfread.File) (*Table, error) { return open(f) }

func open(f *elfread.File) (*Table, error) {
	rs := regions(f)
	data, addr, err := findTable(f, rs)
	if err != nil {
		return nil, err
	}
	t, err := parseHeader(data)
	if err != nil {
		return nil, err
	}
	if t.version == Go116 {
		return t, nil
	}
	var tried []string
	try := func(what string, text uint64) bool {
		tried = append(tried, fmt.Sprintf("%s %#x", what, text))
		if text == 0 {
			return false
		}
		t.textStart = text
		return t.inExec(rs)
	}
	if try("header", t.hdrText) || try("moduledata", moduleText(f, rs, t, addr)) || try("runtime.text", symbol(f, "runtime.text")) {
		return t, nil
	}
	return nil, errorf("header", 8+2*uint64(t.ptrSize), "no text start puts the functions in executable code (tried %s)", strings.Join(tried, ", "))
}

// region is an allocated part of the file with contents: a section, or a
// PT_LOAD segment when there are no section headers.
type region struct {
	name        string
	addr, size  uint64
	exec, write bool
	sec         int // section index, -1 for a segment
	prog        *elf.Prog
}

func regions(f *elfread.File) []region {
	var rs []region
	for i, s := range f.ELF.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size == 0 {
			continue
		}
		rs = append(rs, region{name: s.Name, addr: s.Addr, size: s.Size, exec: s.Flags&elf.SHF_EXECINSTR != 0, write: s.Flags&elf.SHF_WRITE != 0, sec: i})
	}
	if len(rs) > 0 {
		return rs
	}
	for i, p := range f.ELF.Progs {
		if p.Type != elf.PT_LOAD || p.Filesz == 0 {
			continue
		}
		rs = append(rs, region{name: fmt.Sprintf("PT_LOAD %d", i), addr: p.Vaddr, size: p.Filesz, exec: p.Flags&elf.PF_X != 0, write: p.Flags&elf.PF_W != 0, sec: -1, prog: p})
	}
	return rs
}

func (r region) read(f *elfread.File) ([]byte, error) {
	if r.sec >= 0 {
		s, err := f.SectionAt(r.sec)
		if err != nil {
			return nil, err
		}
		return s.Data, nil
	}
	if err := f.InFile(r.name, r.prog.Off, r.prog.Filesz); err != nil {
		return nil, err
	}
	b := make([]byte, r.prog.Filesz)
	if _, err := r.prog.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("reading %s: %v", r.name, err)
	}
	return b, nil
}

// findTable returns the table's bytes (up to the end of what holds it)
// and its address.
func findTable(f *elfread.File, rs []region) ([]byte, uint64, error) {
	for _, name := range []string{".gopclntab", ".data.rel.ro.gopclntab"} {
		s, err := f.Section(name)
		if err == nil {
			return s.Data, s.Addr, nil
		}
		if !errors.Is(err, elfread.ErrNotFound) {
			return nil, 0, err
		}
	}
	if a := symbol(f, "runtime.pclntab"); a != 0 {
		for _, r := range rs {
			if a < r.addr || a-r.addr >= r.size {
				continue
			}
			b, err := r.read(f)
			if err != nil {
				return nil, 0, err
			}
			if a-r.addr >= uint64(len(b)) {
				break
			}
			b = b[a-r.addr:]
			if e := symbol(f, "runtime.epclntab"); e > a && e-a <= uint64(len(b)) {
				b = b[:e-a]
			}
			return b, a, nil
		}
	}
	ptr := byte(8)
	if f.ELF.Class == elf.ELFCLASS32 {
		ptr = 4
	}
	for _, r := range rs {
		if r.exec && r.sec >= 0 {
			continue // code; but a segment may hold read-only data and text both
		}
		b, err := r.read(f)
		if err != nil {
			return nil, 0, err
		}
		if off, ok := scan(b, ptr); ok {
			return b[off:], r.addr + uint64(off), nil
		}
	}
	return nil, 0, fmt.Errorf("gopclntab: %w: no .gopclntab section, no runtime.pclntab symbol, no header in the loaded data", ErrNotFound)
}

// scan looks for a header in b at 4-byte aligned offsets whose first
// function reads.
func scan(b []byte, ptr byte) (int, bool) {
	for off := 0; off+8 <= len(b); off += 4 {
		if b[off+4] != 0 || b[off+5] != 0 || b[off+7] != ptr {
			continue
		}
		m := b[off : off+4]
		if !bytes.Equal(m, []byte{0xf1, 0xff, 0xff, 0xff}) && !bytes.Equal(m, []byte{0xff, 0xff, 0xff, 0xf1}) &&
			!bytes.Equal(m, []byte{0xf0, 0xff, 0xff, 0xff}) && !bytes.Equal(m, []byte{0xff, 0xff, 0xff, 0xf0}) &&
			!bytes.Equal(m, []byte{0xfa, 0xff, 0xff, 0xff}) && !bytes.Equal(m, []byte{0xff, 0xff, 0xff, 0xfa}) {
			continue
		}
		t, err := parseHeader(b[off:])
		if err != nil || t.nfunc == 0 {
			continue
		}
		t.textStart = 1 // any: only the record's shape is checked here
		if _, err := t.Func(0); err == nil {
			return off, true
		}
	}
	return 0, false
}

// symbol returns the value of a .symtab symbol, 0 when there is none.
func symbol(f *elfread.File, name string) uint64 {
	syms, err := f.ELF.Symbols()
	if err != nil {
		return 0
	}
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	return 0
}

// inExec says whether the first function's entry and the last one's end
// lie in executable regions.
func (t *Table) inExec(rs []region) bool {
	in := func(a uint64) bool {
		for _, r := range rs {
			if r.exec && a >= r.addr && a-r.addr < r.size {
				return true
			}
		}
		return false
	}
	first, last := t.entry(0), t.entry(t.nfunc)
	return t.nfunc > 0 && last > first && in(first) && in(last-1)
}

// Words of the runtime's moduledata, the same from Go 1.16 to 1.26:
// pcHeader, then six slices (funcnametab ... ftab), findfunctab, minpc,
// maxpc, text.
const (
	mdFuncnametab = 1
	mdText        = 22
)

// moduleText returns the text field of the moduledata that points at the
// table (at addr), 0 when none is found.
func moduleText(f *elfread.File, rs []region, t *Table, addr uint64) uint64 {
	p := uint64(t.ptrSize)
	var order []region
	for _, pref := range []string{".go.module", ".noptrdata", ""} {
		for _, r := range rs {
			if r.write && !r.exec && (r.name == pref || pref == "" && r.name != ".go.module" && r.name != ".noptrdata") {
				order = append(order, r)
			}
		}
	}
	for _, r := range order {
		b, err := r.read(f)
		if err != nil {
			continue
		}
		for off := uint64(0); off+(mdText+1)*p <= uint64(len(b)); off += p {
			if readWord(t, b, off) != addr || readWord(t, b, off+mdFuncnametab*p) != addr+t.funcnames {
				continue
			}
			if text := readWord(t, b, off+mdText*p); text != 0 {
				return text
			}
			if text := relaValue(f, t, r.addr+off+mdText*p); text != 0 {
				return text
			}
		}
	}
	// A PIE whose linker left the moduledata's words 0: find its pcHeader
	// word through the relocation that fills it.
	if md := relaTarget(f, t, addr); md != 0 {
		return relaValue(f, t, md+mdText*p)
	}
	return 0
}

func readWord(t *Table, b []byte, off uint64) uint64 {
	if t.ptrSize == 4 {
		return uint64(t.order.Uint32(b[off:]))
	}
	return t.order.Uint64(b[off:])
}

// relas calls fn with each RELA relocation of the loaded relocation
// sections that names no symbol (R_*_RELATIVE) until fn returns false.
func relas(f *elfread.File, t *Table, fn func(off, addend uint64) bool) {
	for i, s := range f.ELF.Sections {
		if s.Type != elf.SHT_RELA || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		sec, err := f.SectionAt(i)
		if err != nil {
			continue
		}
		b := sec.Data
		if t.ptrSize == 8 {
			for ; len(b) >= 24; b = b[24:] {
				if t.order.Uint64(b[8:])>>32 == 0 && !fn(t.order.Uint64(b), t.order.Uint64(b[16:])) {
					return
				}
			}
			continue
		}
		for ; len(b) >= 12; b = b[12:] {
			if t.order.Uint32(b[4:])>>8 == 0 && !fn(uint64(t.order.Uint32(b)), uint64(t.order.Uint32(b[8:]))) {
				return
			}
		}
	}
}

// relaValue returns the addend of the relative relocation at address at.
func relaValue(f *elfread.File, t *Table, at uint64) uint64 {
	var v uint64
	relas(f, t, func(off, addend uint64) bool {
		if off == at {
			v = addend
			return false
		}
		return true
	})
	return v
}

// relaTarget returns where a relative relocation with addend addr
// applies, whose next word's relocation has addend addr+funcnametab's
// offset: moduledata's pcHeader field.
func relaTarget(f *elfread.File, t *Table, addr uint64) uint64 {
	var cands []uint64
	relas(f, t, func(off, addend uint64) bool {
		if addend == addr {
			cands = append(cands, off)
		}
		return true
	})
	for _, c := range cands {
		if relaValue(f, t, c+uint64(t.ptrSize)) == addr+t.funcnames {
			return c
		}
	}
	return 0
}
