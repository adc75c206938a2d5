package gocfi_test

import (
	"debug/elf"
	"encoding/binary"
)

// elfImage wraps a .debug_frame image into the smallest ELF file cfi
// opens: an ELF header, the section and a section-name table.
func elfImage(frame []byte, m elf.Machine, order binary.ByteOrder, ptr int) []byte {
	ao := order.(binary.AppendByteOrder)
	names := []byte("\x00.debug_frame\x00.shstrtab\x00")
	ehsize, shsize := 64, 64
	class, data := elf.ELFCLASS64, elf.ELFDATA2LSB
	if ptr == 4 {
		ehsize, shsize, class = 52, 40, elf.ELFCLASS32
	}
	if order == binary.BigEndian {
		data = elf.ELFDATA2MSB
	}
	frameOff := ehsize
	namesOff := frameOff + len(frame)
	shoff := (namesOff + len(names) + 7) &^ 7
	b := []byte{0x7f, 'E', 'L', 'F', byte(class), byte(data), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	word := func(v uint64) {
		if ptr == 4 {
			b = ao.AppendUint32(b, uint32(v))
		} else {
			b = ao.AppendUint64(b, v)
		}
	}
	b = ao.AppendUint16(b, uint16(elf.ET_EXEC))
	b = ao.AppendUint16(b, uint16(m))
	b = ao.AppendUint32(b, 1)
	word(0)             // entry
	word(0)             // phoff
	word(uint64(shoff)) // shoff
	b = ao.AppendUint32(b, 0)
	b = ao.AppendUint16(b, uint16(ehsize))
	b = ao.AppendUint16(b, 0) // phentsize
	b = ao.AppendUint16(b, 0) // phnum
	b = ao.AppendUint16(b, uint16(shsize))
	b = ao.AppendUint16(b, 3) // shnum
	b = ao.AppendUint16(b, 2) // shstrndx
	b = append(b, frame...)
	b = append(b, names...)
	b = append(b, make([]byte, shoff-len(b))...)
	sh := func(name uint32, typ elf.SectionType, off, size int) {
		b = ao.AppendUint32(b, name)
		b = ao.AppendUint32(b, uint32(typ))
		word(0) // flags
		word(0) // addr
		word(uint64(off))
		word(uint64(size))
		b = ao.AppendUint32(b, 0) // link
		b = ao.AppendUint32(b, 0) // info
		word(1)                   // addralign
		word(0)                   // entsize
	}
	sh(0, elf.SHT_NULL, 0, 0)
	sh(1, elf.SHT_PROGBITS, frameOff, len(frame))
	sh(14, elf.SHT_STRTAB, namesOff, len(names))
	return b
}
