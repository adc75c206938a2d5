// Package relobj rewrites relocatable ELF64 objects (ET_REL): it reads
// which section and symbol each .eh_frame FDE describes (from
// .rela.eh_frame), and appends a new section with its RELA relocations the
// way an assembler would have emitted it, leaving every existing section's
// bytes, index and the symbol table untouched.
//
// ELF section groups: a function in a COMDAT group section (C++ inline
// functions, templates) gets its SFrame FDE in the object's one .sframe
// section, relocated against the group's section symbol, exactly as GNU as
// --gsframe does. The .sframe section itself is not a member of the group,
// so when the linker discards a duplicate group the FDE's relocation
// points into a discarded section; GNU ld (2.41+) drops such FDEs while
// merging .sframe, as it does for .eh_frame. Linkers without that handling
// would keep a stale FDE — the caveat "SFrame and ELF section groups" in
// MaskRay's remarks on SFrame.
package relobj

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
)

// Target is what an FDE's initial-location relocation points at.
type Target struct {
	Section int    // index of the section holding the function
	Sym     uint32 // symbol table index the relocation uses
	Addend  int64  // the function's address is Sym + Addend
	Offset  uint64 // the function's offset in Section (symbol value + addend)
}

// Reloc is one RELA entry to write.
type Reloc struct {
	Off    uint64 // offset in the new section
	Sym    uint32
	Type   uint32
	Addend int64
}

// Error is a problem with the input object, at file offset Off (-1: the
// object as a whole).
type Error struct {
	Msg string
	Off int64
}

func (e *Error) Error() string {
	if e.Off < 0 {
		return e.Msg
	}
	return fmt.Sprintf("%s at offset %#x", e.Msg, e.Off)
}

func errorf(format string, args ...any) error { return errorAt(-1, format, args...) }

func errorAt(off int64, format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Off: off}
}

// FDETargets reads the RELA section that relocates .eh_frame and returns,
// for each relocated field offset, its target.
func FDETargets(ef *elf.File) (map[int64]Target, error) {
	if ef.Class != elf.ELFCLASS64 {
		return nil, errorf("ELF32 objects are not supported")
	}
	ehIdx := -1
	for i, s := range ef.Sections {
		if s.Name == ".eh_frame" {
			ehIdx = i
		}
	}
	if ehIdx < 0 {
		return nil, errorf("no .eh_frame section")
	}
	syms, err := ef.Symbols()
	if err != nil {
		return nil, errorf("reading the symbol table: %v", err)
	}
	out := map[int64]Target{}
	for _, rs := range ef.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) != ehIdx {
			continue
		}
		data, err := rs.Data()
		if err != nil {
			return nil, errorAt(int64(rs.Offset), "reading %s: %v", rs.Name, err)
		}
		if len(data)%24 != 0 {
			return nil, errorAt(int64(rs.Offset), "%s: size %#x is not a multiple of 24", rs.Name, len(data))
		}
		bo := ef.ByteOrder
		for off := 0; off+24 <= len(data); off += 24 {
			r := data[off:]
			info := bo.Uint64(r[8:])
			symIdx := uint32(info >> 32)
			addend := int64(bo.Uint64(r[16:]))
			if symIdx == 0 || int(symIdx) > len(syms) {
				continue
			}
			s := syms[symIdx-1] // debug/elf drops the null symbol
			if s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE {
				continue
			}
			out[int64(bo.Uint64(r[0:]))] = Target{Section: int(s.Section), Sym: symIdx, Addend: addend, Offset: uint64(int64(s.Value) + addend)}
		}
	}
	return out, nil
}

// Section is a section to append.
type Section struct {
	Name   string
	Type   elf.SectionType
	Flags  elf.SectionFlag
	Align  uint64
	Data   []byte
	Relocs []Reloc // written as .rela<Name>, linked to the symbol table
}

// Append returns a copy of the ET_REL object in with s (and its RELA
// section) appended after every existing section. The new data, a grown
// copy of the section-name string table and a new section header table go
// at the end of the file; the old bytes stay where they are, unreferenced
// only where the header table and .shstrtab used to be.
func Append(in []byte, s Section) ([]byte, error) {
	ef, err := elf.NewFile(bytes.NewReader(in))
	if err != nil {
		return nil, errorf("%v", err)
	}
	if ef.Type != elf.ET_REL || ef.Class != elf.ELFCLASS64 {
		return nil, errorf("not an ELF64 relocatable object")
	}
	bo := ef.ByteOrder
	shoff := bo.Uint64(in[0x28:])
	shentsize := int(bo.Uint16(in[0x3a:]))
	shnum := int(bo.Uint16(in[0x3c:]))
	shstrndx := int(bo.Uint16(in[0x3e:]))
	if shentsize != 64 || shnum == 0 || shstrndx == 0 || shstrndx >= shnum || shnum+2 >= 0xff00 {
		return nil, errorAt(int64(shoff), "unsupported section header table (entry size %d, %d sections, names in section %d)", shentsize, shnum, shstrndx)
	}
	if shoff > uint64(len(in)) || uint64(len(in))-shoff < uint64(shnum*64) {
		return nil, errorAt(int64(shoff), "section header table of %d entries runs past the end of the file (%#x bytes)", shnum, len(in))
	}
	symtab := -1
	for i, sec := range ef.Sections {
		if sec.Type == elf.SHT_SYMTAB {
			symtab = i
		}
		if sec.Name == s.Name || (len(s.Relocs) > 0 && sec.Name == ".rela"+s.Name) {
			return nil, errorAt(int64(sec.Offset), "the object already has a %s section", sec.Name)
		}
	}
	if symtab < 0 && len(s.Relocs) > 0 {
		return nil, errorf("no symbol table for the relocations")
	}
	oldStr, err := ef.Sections[shstrndx].Data()
	if err != nil {
		return nil, errorAt(int64(ef.Sections[shstrndx].Offset), "reading the section-name table: %v", err)
	}

	out := append([]byte(nil), in...)
	pad := func(a int) {
		for len(out)%a != 0 {
			out = append(out, 0)
		}
	}
	align := int(s.Align)
	if align < 1 {
		align = 1
	}
	pad(align)
	dataOff := len(out)
	out = append(out, s.Data...)

	var relaOff, relaLen int
	if len(s.Relocs) > 0 {
		pad(8)
		relaOff = len(out)
		for _, r := range s.Relocs {
			var e [24]byte
			bo.PutUint64(e[0:], r.Off)
			bo.PutUint64(e[8:], uint64(r.Sym)<<32|uint64(r.Type))
			bo.PutUint64(e[16:], uint64(r.Addend))
			out = append(out, e[:]...)
		}
		relaLen = len(out) - relaOff
	}

	// The names: the old table plus the new names.
	strs := append([]byte(nil), oldStr...)
	nameOff := uint32(len(strs))
	strs = append(append(strs, s.Name...), 0)
	relaNameOff := uint32(len(strs))
	strs = append(append(strs, ".rela"+s.Name...), 0)
	strOff := len(out)
	out = append(out, strs...)

	pad(8)
	newShoff := len(out)
	out = append(out, in[shoff:shoff+uint64(shnum*64)]...)
	// Repoint .shstrtab at the grown copy.
	sh := out[newShoff+shstrndx*64:]
	bo.PutUint64(sh[0x18:], uint64(strOff))
	bo.PutUint64(sh[0x20:], uint64(len(strs)))

	hdr := func(name uint32, typ elf.SectionType, flags elf.SectionFlag, off, size int, link, info uint32, align, entsize uint64) {
		var h [64]byte
		bo.PutUint32(h[0:], name)
		bo.PutUint32(h[4:], uint32(typ))
		bo.PutUint64(h[8:], uint64(flags))
		bo.PutUint64(h[0x18:], uint64(off))
		bo.PutUint64(h[0x20:], uint64(size))
		bo.PutUint32(h[0x28:], link)
		bo.PutUint32(h[0x2c:], info)
		bo.PutUint64(h[0x30:], align)
		bo.PutUint64(h[0x38:], entsize)
		out = append(out, h[:]...)
	}
	newIdx := shnum
	hdr(nameOff, s.Type, s.Flags, dataOff, len(s.Data), 0, 0, uint64(align), 0)
	n := shnum + 1
	if len(s.Relocs) > 0 {
		hdr(relaNameOff, elf.SHT_RELA, elf.SHF_INFO_LINK, relaOff, relaLen, uint32(symtab), uint32(newIdx), 8, 24)
		n++
	}
	bo.PutUint64(out[0x28:], uint64(newShoff))
	bo.PutUint16(out[0x3c:], uint16(n))
	return out, nil
}

// RelocType returns the PC-relative relocation type for an SFrame start
// field of size bytes (8: V3, 4: V2).
func RelocType(m elf.Machine, size int) (uint32, error) {
	switch {
	case m == elf.EM_X86_64 && size == 8:
		return uint32(elf.R_X86_64_PC64), nil
	case m == elf.EM_X86_64 && size == 4:
		return uint32(elf.R_X86_64_PC32), nil
	case m == elf.EM_AARCH64 && size == 8:
		return uint32(elf.R_AARCH64_PREL64), nil
	case m == elf.EM_AARCH64 && size == 4:
		return uint32(elf.R_AARCH64_PREL32), nil
	case m == elf.EM_S390 && size == 8:
		return uint32(elf.R_390_PC64), nil
	case m == elf.EM_S390 && size == 4:
		return uint32(elf.R_390_PC32), nil
	}
	return 0, errors.New("no PC-relative relocation for this machine and size")
}
