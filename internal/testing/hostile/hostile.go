// Package hostile writes the malformed and hostile inputs the tests feed
// to every command: small ELF files and archives whose headers claim more
// than they hold, decompression bombs, FDEs with millions of rows. They are
// generated, not committed, so each says in code what is wrong with it.
package hostile

import (
	"bytes"
	"compress/zlib"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

var le = binary.LittleEndian

// Section is one section of a generated ELF file. Size, when not zero,
// overrides sh_size (len(Data) otherwise).
type Section struct {
	Name    string
	Type    elf.SectionType
	Flags   elf.SectionFlag
	Addr    uint64
	Data    []byte
	Size    uint64
	Link    uint32
	Info    uint32
	Entsize uint64
}

// Prog is a program header, written as given.
type Prog struct {
	Type                      elf.ProgType
	Flags                     elf.ProgFlag
	Off, Vaddr, Filesz, Memsz uint64
	Align                     uint64
}

// ELF is a little-endian ELF64 file to generate.
type ELF struct {
	Type     elf.Type
	Machine  elf.Machine
	Progs    []Prog
	Sections []Section // section 0 (null) and .shstrtab are added
	// NoShstrtab writes e_shstrndx = 0 (no section names).
	NoShstrtab bool
	// DataOff, if set, is called with each section's file offset once the
	// layout is known (for program headers that point at sections).
	DataOff func(i int, off uint64)
}

// Bytes lays the file out: header, program headers, section contents
// (8-aligned), .shstrtab, section headers.
func (e *ELF) Bytes() []byte {
	const ehsize, phsize, shsize = 64, 56, 64
	secs := append([]Section{{}}, e.Sections...)
	var shstr []byte
	names := make([]uint32, len(secs)+1)
	shstr = append(shstr, 0)
	for i := range secs {
		if i == 0 {
			continue
		}
		names[i] = uint32(len(shstr))
		shstr = append(append(shstr, secs[i].Name...), 0)
	}
	shstrndx := 0
	if !e.NoShstrtab {
		names[len(secs)] = uint32(len(shstr))
		shstr = append(append(shstr, ".shstrtab"...), 0)
		shstrndx = len(secs)
		secs = append(secs, Section{Name: ".shstrtab", Type: elf.SHT_STRTAB, Data: shstr})
	}
	off := uint64(ehsize + phsize*len(e.Progs))
	offs := make([]uint64, len(secs))
	body := []byte{}
	for i := 1; i < len(secs); i++ {
		for (off+uint64(len(body)))%8 != 0 {
			body = append(body, 0)
		}
		offs[i] = off + uint64(len(body))
		if e.DataOff != nil && i <= len(e.Sections) {
			e.DataOff(i-1, offs[i])
		}
		if secs[i].Type != elf.SHT_NOBITS {
			body = append(body, secs[i].Data...)
		}
	}
	for (off+uint64(len(body)))%8 != 0 {
		body = append(body, 0)
	}
	shoff := off + uint64(len(body))
	b := make([]byte, 0, shoff+uint64(shsize*len(secs)))
	b = append(b, 0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), 1, 0)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint16(b, uint16(e.Type))
	b = le.AppendUint16(b, uint16(e.Machine))
	b = le.AppendUint32(b, 1)
	b = le.AppendUint64(b, 0) // entry
	phoff := uint64(0)
	if len(e.Progs) > 0 {
		phoff = ehsize
	}
	b = le.AppendUint64(b, phoff)
	b = le.AppendUint64(b, shoff)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, ehsize)
	b = le.AppendUint16(b, phsize)
	b = le.AppendUint16(b, uint16(len(e.Progs)))
	b = le.AppendUint16(b, shsize)
	b = le.AppendUint16(b, uint16(len(secs)))
	b = le.AppendUint16(b, uint16(shstrndx))
	for _, p := range e.Progs {
		b = le.AppendUint32(b, uint32(p.Type))
		b = le.AppendUint32(b, uint32(p.Flags))
		b = le.AppendUint64(b, p.Off)
		b = le.AppendUint64(b, p.Vaddr)
		b = le.AppendUint64(b, p.Vaddr)
		b = le.AppendUint64(b, p.Filesz)
		b = le.AppendUint64(b, p.Memsz)
		b = le.AppendUint64(b, p.Align)
	}
	b = append(b, body...)
	for i, s := range secs {
		b = le.AppendUint32(b, names[i])
		b = le.AppendUint32(b, uint32(s.Type))
		b = le.AppendUint64(b, uint64(s.Flags))
		b = le.AppendUint64(b, s.Addr)
		b = le.AppendUint64(b, offs[i])
		size := s.Size
		if size == 0 {
			size = uint64(len(s.Data))
		}
		b = le.AppendUint64(b, size)
		b = le.AppendUint32(b, s.Link)
		b = le.AppendUint32(b, s.Info)
		b = le.AppendUint64(b, 1)
		b = le.AppendUint64(b, s.Entsize)
	}
	return b
}

// cie is an x86-64 CIE: "zR" with absolute 8-byte FDE addresses, code
// alignment 1, data alignment -8, RA column 16; CFA rsp+8, rip at CFA-8.
func cie() []byte {
	body := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x00, 0x0c, 7, 8, 0x90, 1}
	for (len(body)+4)%8 != 0 {
		body = append(body, 0)
	}
	return append(le.AppendUint32(nil, uint32(len(body))), body...)
}

// EHFrame returns an .eh_frame (at offset 0 a CIE, then one FDE per
// program, each covering size bytes from start, then a terminator).
func EHFrame(start, size uint64, programs ...[]byte) []byte {
	b := cie()
	for _, prog := range programs {
		ciePtr := uint32(len(b) + 4)
		body := le.AppendUint32(nil, ciePtr)
		body = le.AppendUint64(body, start)
		body = le.AppendUint64(body, size)
		body = append(body, 0) // augmentation data length
		body = append(body, prog...)
		for (len(body)+4)%8 != 0 {
			body = append(body, 0)
		}
		b = append(le.AppendUint32(b, uint32(len(body))), body...)
	}
	return le.AppendUint32(b, 0)
}

// PLTExpr is the x86-64 lazy-PLT CFA expression as DW_CFA_def_cfa_expression:
// rsp+8 + (((rip & 15) >= 11) << 3).
var PLTExpr = []byte{0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}

// sframeSection encodes funcs as an AMD64 V3 section at addr.
func sframeSection(funcs []sframe.Function, addr uint64) []byte {
	b, err := sframe.Encode(funcs, sframe.Options{Version: sframe.Version3, ABI: sframe.ABIAMD64LE, Order: le,
		Addr: addr, PCRel: true, Sort: true, CFAFixedRA: -8})
	if err != nil {
		panic(err)
	}
	return b
}

// exec is an x86-64 executable with the given sections (addresses as
// given), each allocated one mapped by a PT_LOAD of its own, and a
// .sframe section also described by PT_GNU_SFRAME: a sound layout, so
// that what is hostile is only what each generator means to be.
func exec(secs ...Section) []byte {
	e := &ELF{Type: elf.ET_EXEC, Machine: elf.EM_X86_64, Sections: secs}
	for _, sec := range secs {
		if sec.Flags&elf.SHF_ALLOC == 0 || sec.Type == elf.SHT_NOBITS {
			continue
		}
		n := uint64(len(sec.Data))
		e.Progs = append(e.Progs, Prog{Type: elf.PT_LOAD, Flags: elf.PF_R, Vaddr: sec.Addr, Filesz: n, Memsz: n, Align: 8})
		if sec.Type == elf.SectionType(0x6ffffff4) {
			e.Progs = append(e.Progs, Prog{Type: elf.ProgType(0x6474e554), Flags: elf.PF_R, Vaddr: sec.Addr, Filesz: n, Memsz: n, Align: 8})
		}
	}
	// PT_LOADs sorted by address, as loaders expect.
	sort.SliceStable(e.Progs, func(a, b int) bool {
		return e.Progs[a].Type == elf.PT_LOAD && (e.Progs[b].Type != elf.PT_LOAD || e.Progs[a].Vaddr < e.Progs[b].Vaddr)
	})
	e.DataOff = func(i int, off uint64) {
		for k := range e.Progs {
			if e.Progs[k].Vaddr == secs[i].Addr && e.Progs[k].Filesz == uint64(len(secs[i].Data)) {
				e.Progs[k].Off = off
			}
		}
	}
	return e.Bytes()
}

const textAddr = 0x401000

func text(n int) Section {
	return Section{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: textAddr, Data: make([]byte, n)}
}

// PCMaskFunc is a ~1 KB executable whose .sframe holds one PCMASK
// function of 0xffffffff bytes (16-byte blocks, as a PLT) and whose
// .eh_frame describes the same range with the PLT expression: they agree,
// and verify must find that out without visiting 4 Gi PCs.
func PCMaskFunc() []byte {
	sp := arch.AMD64.SP()
	const size = 0xffffffff
	fn := sframe.Function{Start: textAddr, Size: size, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{
		{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed}},
		{Start: 11, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 16}, RA: sframe.Loc{Kind: sframe.LocFixed}},
	}}
	const sfAddr = 0x500000
	return exec(text(16),
		Section{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x600000, Data: EHFrame(textAddr, size, PLTExpr)},
		Section{Name: ".sframe", Type: elf.SectionType(0x6ffffff4), Flags: elf.SHF_ALLOC, Addr: sfAddr, Data: sframeSection([]sframe.Function{fn}, sfAddr)})
}

// Compression is a compressed-section format (ELFCOMPRESS_*).
type Compression int

const (
	Zlib Compression = 1
	Zstd Compression = 2
)

// Compressed returns the contents of a SHF_COMPRESSED section: an
// Elf64_Chdr claiming claim bytes, then actual zero bytes compressed.
func Compressed(c Compression, claim uint64, actual int) []byte {
	b := le.AppendUint32(nil, uint32(c))
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, claim)
	b = le.AppendUint64(b, 1)
	switch c {
	case Zlib:
		var buf bytes.Buffer
		w, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
		zero := make([]byte, 1<<16)
		for n := actual; n > 0; n -= len(zero) {
			w.Write(zero[:min(n, len(zero))])
		}
		w.Close()
		return append(b, buf.Bytes()...)
	case Zstd:
		return append(b, zstdZeros(actual)...)
	}
	panic(fmt.Sprint("unknown compression ", c))
}

// zstdZeros is a zstd frame of n zero bytes made of RLE blocks (4 bytes
// per 128 KiB): Go has no zstd encoder, and a bomb needs none.
func zstdZeros(n int) []byte {
	const block = 128 << 10
	b := le.AppendUint32(nil, 0xfd2fb528)
	b = append(b, 0x00, 7<<3) // no content size, no checksum; window 128 KiB
	if n == 0 {
		// One empty last raw block.
		return append(b, 1, 0, 0)
	}
	for n > 0 {
		k := min(n, block)
		n -= k
		h := uint32(k)<<3 | 1<<1 // RLE
		if n == 0 {
			h |= 1 // last block
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16), 0)
	}
	return b
}

// Bomb is an executable with a valid (empty) .sframe, a small .eh_frame
// and a SHF_COMPRESSED section name (.debug_frame, or a non-alloc
// .eh_frame) whose header claims claim bytes and which inflates to actual
// bytes.
func Bomb(name string, c Compression, claim uint64, actual int) []byte {
	secs := []Section{text(16),
		{Name: ".sframe", Type: elf.SectionType(0x6ffffff4), Flags: elf.SHF_ALLOC, Addr: 0x500000, Data: sframeSection(nil, 0x500000)},
		{Name: name, Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: Compressed(c, claim, actual)},
	}
	return exec(secs...)
}

// ManyRows is an executable with an empty .sframe whose one FDE (covering
// 1 GiB) has n rows that only move the CFA: DW_CFA_def_cfa_offset 16 or 8,
// then DW_CFA_advance_loc 1; three bytes a row, no register rule set.
func ManyRows(n int) []byte {
	prog := make([]byte, 0, 3*n)
	for i := 0; i < n; i++ {
		prog = append(prog, 0x0e, byte(8+8*(i%2)), 0x41)
	}
	return exec(text(16),
		Section{Name: ".sframe", Type: elf.SectionType(0x6ffffff4), Flags: elf.SHF_ALLOC, Addr: 0x500000, Data: sframeSection(nil, 0x500000)},
		Section{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x600000, Data: EHFrame(textAddr, 1<<30, prog)})
}

// HugeSegment is an executable without section headers whose program
// header of type t claims 2 GiB of file data (the file is ~200 bytes).
// For PT_GNU_EH_FRAME the header is real and points into a PT_LOAD that
// claims 2 GiB too.
func HugeSegment(t elf.ProgType) []byte {
	const big = 2 << 30
	hdr := []byte{1, 0x03, 0x03, 0x3b} // version 1, eh_frame_ptr udata4, ...
	hdr = le.AppendUint32(hdr, 0x400100)
	e := &ELF{Type: elf.ET_EXEC, Machine: elf.EM_X86_64}
	e.Progs = []Prog{
		{Type: elf.PT_LOAD, Flags: elf.PF_R, Off: 0, Vaddr: 0x400000, Filesz: 0x1000, Memsz: 0x1000, Align: 0x1000},
		{Type: t, Flags: elf.PF_R, Off: 64 + 56*3, Vaddr: 0x400000 + 64 + 56*3, Filesz: big, Memsz: big, Align: 4},
		{Type: elf.PT_NOTE, Off: 0, Filesz: 0},
	}
	if t == elf.PT_LOAD {
		e.Progs[1].Type = elf.PT_GNU_EH_FRAME
		e.Progs[1].Filesz, e.Progs[1].Memsz = uint64(len(hdr)), uint64(len(hdr))
		e.Progs[0].Filesz, e.Progs[0].Memsz = big, big
	}
	b := e.Bytes()
	// Drop the section headers: the reader must go by the segments.
	b = b[:64+56*3]
	le.PutUint64(b[40:], 0) // e_shoff
	le.PutUint16(b[60:], 0) // e_shnum
	le.PutUint16(b[62:], 0) // e_shstrndx
	return append(b, hdr...)
}

// ArMember formats one GNU ar member: its 60-byte header (name of at most
// 16 characters, as given: "name/" for a short name, "/N" for a long one)
// and data, padded to an even length.
func ArMember(name string, data []byte) []byte {
	h := fmt.Sprintf("%-16s%-12d%-6d%-6d%-8o%-10d`\n", name, 0, 0, 0, 0o644, len(data))
	b := append([]byte(h), data...)
	if len(b)%2 == 1 {
		b = append(b, '\n')
	}
	return b
}

// Archive is a GNU ar archive with one member whose symbol table ("/",
// or "/SYM64/" when wide) claims one more entry than it holds.
func Archive(wide bool) []byte {
	w, name := 4, "/"
	if wide {
		w, name = 8, "/SYM64/"
	}
	put := func(b []byte, v uint64) []byte {
		if wide {
			return binary.BigEndian.AppendUint64(b, v)
		}
		return binary.BigEndian.AppendUint32(b, uint32(v))
	}
	symtabSize := 2 * w
	sym := put(nil, 2) // claims 2, holds 1
	sym = put(sym, uint64(8+60+symtabSize))
	b := []byte("!<arch>\n")
	b = append(b, ArMember(name, sym)...)
	return append(b, ArMember("a.o/", []byte("not an object"))...)
}

// EHFrameOnly is an executable whose .eh_frame holds data (empty when
// data is nil), for the empty and garbage cases.
func EHFrameOnly(data []byte) []byte {
	return exec(text(16), Section{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x600000, Data: data})
}

// NoShstrtab is a relocatable object with .eh_frame but e_shstrndx = 0,
// so no section has a name.
func NoShstrtab() []byte {
	return (&ELF{Type: elf.ET_REL, Machine: elf.EM_X86_64, NoShstrtab: true, Sections: []Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Data: make([]byte, 16)},
		{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Data: EHFrame(0, 16, nil)},
	}}).Bytes()
}

// SFrameBreak is a way in which an executable's PT_GNU_SFRAME is unusable
// to the kernel, which reads SFrame data through it only.
type SFrameBreak int

const (
	// SFrameSound breaks nothing: PT_GNU_SFRAME and .sframe describe the
	// same bytes inside a PT_LOAD.
	SFrameSound SFrameBreak = iota
	// SFramePastEnd moves PT_GNU_SFRAME and the PT_LOAD that maps it to a
	// file offset past the end of the file (as in a file cut short).
	SFramePastEnd
	// SFrameHuge gives PT_GNU_SFRAME a p_filesz of 2 GiB, which runs past
	// its PT_LOAD and the end of the file.
	SFrameHuge
	// SFrameEmpty gives PT_GNU_SFRAME a p_filesz and p_memsz of 0.
	SFrameEmpty
	// SFrameShort gives PT_GNU_SFRAME a p_filesz 8 bytes shorter than the
	// .sframe section's sh_size (p_memsz too).
	SFrameShort
	// SFrameUnmapped moves PT_GNU_SFRAME's p_vaddr to an address no
	// PT_LOAD maps; its p_offset still points at the section's bytes.
	SFrameUnmapped
	// SFrameNoSection is SFramePastEnd without section headers: there is
	// no .sframe section to read instead.
	SFrameNoSection
	// SFrameUnmappedNoSection is SFrameUnmapped without section headers:
	// only the segment's own bytes, at its p_offset, hold the SFrame data.
	SFrameUnmappedNoSection
)

// SFrameLayout is an executable with one 16-byte function that .eh_frame
// and .sframe describe alike (CFA rsp+8 throughout), whose PT_GNU_SFRAME
// is broken as how says. Every other header is sound.
func SFrameLayout(how SFrameBreak) []byte {
	sp := arch.AMD64.SP()
	fn := sframe.Function{Start: textAddr, Size: 16, Rows: []sframe.Row{
		{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed}},
	}}
	const sfAddr = 0x500000
	sf := sframeSection([]sframe.Function{fn}, sfAddr)
	b := exec(text(16),
		Section{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x600000, Data: EHFrame(textAddr, 16, nil)},
		Section{Name: ".sframe", Type: elf.SectionType(0x6ffffff4), Flags: elf.SHF_ALLOC, Addr: sfAddr, Data: sf})
	n := uint64(len(sf))
	past := uint64(len(b)) + 0x1000
	switch how {
	case SFramePastEnd, SFrameNoSection:
		setProg(b, func(p *Prog) {
			if p.Vaddr == sfAddr {
				p.Off = past
			}
		})
	case SFrameHuge:
		setSFrameProg(b, func(p *Prog) { p.Filesz, p.Memsz = 2<<30, 2<<30 })
	case SFrameEmpty:
		setSFrameProg(b, func(p *Prog) { p.Filesz, p.Memsz = 0, 0 })
	case SFrameShort:
		setSFrameProg(b, func(p *Prog) { p.Filesz, p.Memsz = n-8, n-8 })
	case SFrameUnmapped, SFrameUnmappedNoSection:
		setSFrameProg(b, func(p *Prog) { p.Vaddr = 0x900000 })
	}
	if how == SFrameNoSection || how == SFrameUnmappedNoSection {
		le.PutUint64(b[40:], 0) // e_shoff
		le.PutUint16(b[60:], 0) // e_shnum
		le.PutUint16(b[62:], 0) // e_shstrndx
	}
	return b
}

// setProg rewrites, in a file Bytes laid out, each program header as
// edit leaves it.
func setProg(b []byte, edit func(*Prog)) {
	phoff, phnum := le.Uint64(b[32:]), int(le.Uint16(b[56:]))
	for i := 0; i < phnum; i++ {
		h := b[phoff+uint64(i)*56:]
		p := Prog{Type: elf.ProgType(le.Uint32(h)), Flags: elf.ProgFlag(le.Uint32(h[4:])), Off: le.Uint64(h[8:]), Vaddr: le.Uint64(h[16:]),
			Filesz: le.Uint64(h[32:]), Memsz: le.Uint64(h[40:]), Align: le.Uint64(h[48:])}
		edit(&p)
		le.PutUint32(h, uint32(p.Type))
		le.PutUint32(h[4:], uint32(p.Flags))
		le.PutUint64(h[8:], p.Off)
		le.PutUint64(h[16:], p.Vaddr)
		le.PutUint64(h[24:], p.Vaddr)
		le.PutUint64(h[32:], p.Filesz)
		le.PutUint64(h[40:], p.Memsz)
		le.PutUint64(h[48:], p.Align)
	}
}

// setSFrameProg is setProg on the PT_GNU_SFRAME program headers only.
func setSFrameProg(b []byte, edit func(*Prog)) {
	setProg(b, func(p *Prog) {
		if p.Type == elf.ProgType(0x6474e554) {
			edit(p)
		}
	})
}
