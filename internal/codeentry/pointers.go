package codeentry

import (
	"debug/elf"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// shtRELR is SHT_RELR, which debug/elf does not name.
const shtRELR elf.SectionType = 19

// reloc is one RELA entry of a linked file.
type reloc struct {
	off    uint64
	typ    uint32
	sym    uint32
	addend int64
}

// relocs are a linked file's dynamic relocations and the dynamic
// symbols they name.
type relocs struct {
	list []reloc
	syms []elf.Symbol // .dynsym without its null entry: sym i is syms[i-1]
	relr []uint64     // the addresses SHT_RELR relocates
}

// readRelocs reads every SHT_RELA and SHT_RELR section, each checked
// against the file's size before it is read. One that cannot be read is
// noted: its pointers are missed, no more.
func readRelocs(f *elfread.File, notes *Notes) *relocs {
	rs := &relocs{}
	if list, err := symbolTable(f, elf.SHT_DYNSYM); err == nil {
		rs.syms = list
	}
	order := f.ELF.ByteOrder
	for i, s := range f.ELF.Sections {
		if s.Type != elf.SHT_RELA && s.Type != shtRELR {
			continue
		}
		if err := f.InFile(s.Name, s.Offset, s.Size); err != nil {
			notes.Problems = append(notes.Problems, err.Error())
			continue
		}
		sec, err := f.SectionAt(i)
		if err != nil {
			notes.Problems = append(notes.Problems, fmt.Sprintf("section %s: %v", s.Name, err))
			continue
		}
		b := sec.Data
		if s.Type == shtRELR {
			rs.relr = append(rs.relr, decodeRELR(b, order)...)
			continue
		}
		for ; len(b) >= 24; b = b[24:] {
			info := order.Uint64(b[8:])
			rs.list = append(rs.list, reloc{off: order.Uint64(b), typ: uint32(info), sym: uint32(info >> 32), addend: int64(order.Uint64(b[16:]))})
		}
	}
	return rs
}

// decodeRELR expands SHT_RELR: an even word is an address to relocate
// (and the base for the bitmaps after it); an odd word is a bitmap of
// the 63 words after the base, which then moves on by 63 words.
func decodeRELR(b []byte, order interface{ Uint64([]byte) uint64 }) []uint64 {
	var out []uint64
	var base uint64
	for ; len(b) >= 8; b = b[8:] {
		w := order.Uint64(b)
		if w&1 == 0 {
			out = append(out, w)
			base = w + 8
			continue
		}
		for i := uint64(0); i < 63; i++ {
			if w>>(i+1)&1 != 0 {
				out = append(out, base+8*i)
			}
		}
		base += 63 * 8
	}
	return out
}

// symbol is the dynamic symbol i, if there is one.
func (rs *relocs) symbol(i uint32) (elf.Symbol, bool) {
	if i == 0 || int(i) > len(rs.syms) {
		return elf.Symbol{}, false
	}
	return rs.syms[i-1], true
}

// pointerEntries gives what the file holds pointers to: relative and
// absolute relocations, RELR, the init and fini arrays and the entry
// point. A pointer into code is a function's address but for two cases
// documented as risks: a computed goto's label (&&label, GCC's extension
// interpreters use) and hand-written tables of code addresses; with
// symbols, collector.finish leaves out those strictly inside a function.
func pointerEntries(f *elfread.File, img *image, rs *relocs, c *collector) {
	x86 := f.ELF.Machine == elf.EM_X86_64
	for _, r := range rs.list {
		switch {
		case x86 && (r.typ == uint32(elf.R_X86_64_RELATIVE) || r.typ == uint32(elf.R_X86_64_IRELATIVE)),
			!x86 && (r.typ == uint32(elf.R_AARCH64_RELATIVE) || r.typ == uint32(elf.R_AARCH64_IRELATIVE)):
			c.pointer(uint64(r.addend))
		case x86 && r.typ == uint32(elf.R_X86_64_64), !x86 && r.typ == uint32(elf.R_AARCH64_ABS64):
			if s, ok := rs.symbol(r.sym); ok && s.Section != elf.SHN_UNDEF {
				c.pointer(s.Value + uint64(r.addend))
			}
		}
	}
	for _, a := range rs.relr {
		if v, ok := img.word(a, f.ELF.ByteOrder); ok {
			c.pointer(v)
		}
	}
	for _, s := range f.ELF.Sections {
		if s.Type != elf.SHT_INIT_ARRAY && s.Type != elf.SHT_FINI_ARRAY && s.Type != elf.SHT_PREINIT_ARRAY {
			continue
		}
		// A PIE's arrays hold zeros or addends its relocations repeat;
		// an executable's hold the addresses.
		for a := s.Addr; a+8 <= s.Addr+s.Size; a += 8 {
			if v, ok := img.word(a, f.ELF.ByteOrder); ok && v != 0 {
				c.pointer(v)
			}
		}
	}
	if f.ELF.Entry != 0 {
		c.pointer(f.ELF.Entry)
	}
}

// pointer adds v as a pointer's entry if it points into the text; data
// pointers are the most of them and are not counted.
func (c *collector) pointer(v uint64) {
	if c.img.textAt(v) >= 0 {
		c.add(v, 0, codeflow.FromPointer)
	}
}
