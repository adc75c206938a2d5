package pclntest

import (
	"debug/elf"
	"encoding/binary"
)

// A Section is one section of a hand-made ELF file.
type Section struct {
	Name  string
	Type  elf.SectionType
	Flags elf.SectionFlag
	Addr  uint64
	Data  []byte
}

// ELF lays out an executable for machine m with the given sections (and a
// section name table), no program headers: the smallest file debug/elf,
// gopclntab and cfi open, to hold a table Write made or the .debug_frame
// made from one. ptr is the pointer size (4 for ELFCLASS32).
func ELF(order binary.ByteOrder, ptr int, m elf.Machine, secs []Section) []byte {
	ao := order.(binary.AppendByteOrder)
	ehsize, shsize, class, data := 64, 64, elf.ELFCLASS64, elf.ELFDATA2LSB
	if ptr == 4 {
		ehsize, shsize, class = 52, 40, elf.ELFCLASS32
	}
	if order == binary.BigEndian {
		data = elf.ELFDATA2MSB
	}
	names := []byte{0}
	secs = append([]Section{{}}, secs...)
	nameOff := make([]int, len(secs)+1)
	for i, s := range secs[1:] {
		nameOff[i+1] = len(names)
		names = append(append(names, s.Name...), 0)
	}
	nameOff[len(secs)] = len(names)
	names = append(names, ".shstrtab\x00"...)
	secs = append(secs, Section{Name: ".shstrtab", Type: elf.SHT_STRTAB, Data: names})
	b := []byte{0x7f, 'E', 'L', 'F', byte(class), byte(data), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	word := func(v uint64) {
		if ptr == 4 {
			b = ao.AppendUint32(b, uint32(v))
		} else {
			b = ao.AppendUint64(b, v)
		}
	}
	offs := make([]int, len(secs))
	off := ehsize
	for i, s := range secs {
		offs[i] = off
		off += (len(s.Data) + 7) &^ 7
	}
	b = ao.AppendUint16(b, uint16(elf.ET_EXEC))
	b = ao.AppendUint16(b, uint16(m))
	b = ao.AppendUint32(b, 1)
	word(0)           // entry
	word(0)           // phoff
	word(uint64(off)) // shoff
	b = ao.AppendUint32(b, 0)
	b = ao.AppendUint16(b, uint16(ehsize))
	b = ao.AppendUint16(b, 0) // phentsize
	b = ao.AppendUint16(b, 0) // phnum
	b = ao.AppendUint16(b, uint16(shsize))
	b = ao.AppendUint16(b, uint16(len(secs)))
	b = ao.AppendUint16(b, uint16(len(secs)-1)) // shstrndx
	for _, s := range secs {
		b = append(b, s.Data...)
		b = append(b, make([]byte, (8-len(s.Data)%8)%8)...)
	}
	for i, s := range secs {
		b = ao.AppendUint32(b, uint32(nameOff[i]))
		b = ao.AppendUint32(b, uint32(s.Type))
		word(uint64(s.Flags))
		word(s.Addr)
		word(uint64(offs[i]))
		word(uint64(len(s.Data)))
		b = ao.AppendUint32(b, 0) // link
		b = ao.AppendUint32(b, 0) // info
		word(8)                   // addralign
		if s.Type == elf.SHT_RELA {
			word(uint64(3 * ptr))
		} else {
			word(0)
		}
	}
	return b
}
