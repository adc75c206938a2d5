// Package elfwrite retrofits a .sframe section and its PT_GNU_SFRAME
// program header into a linked ELF64 file (ET_EXEC or ET_DYN) without
// moving or changing any existing code or data bytes.
//
// By default the output is laid out as a linker would have written it, so
// that strip, objcopy, eu-strip and patchelf keep it (see layout.go): the
// program header table stays at e_phoff in the first PT_LOAD and grows
// there by two entries (a new read-only PT_LOAD above every existing
// segment, and PT_GNU_SFRAME); the sections it grows into (.interp, notes,
// dynamic tables named by .dynamic) move into that segment, before .sframe;
// non-loaded sections follow, and the section headers are sorted by
// offset. Files for which no such layout exists get a *LayoutError.
//
// Options.AppendSegment selects the old layout instead: the input byte for
// byte, followed by the new segment that holds the (possibly relocated)
// program header table and .sframe, a new .shstrtab and a new section
// header table. When the table moves, the segment is preferably placed so
// that its vaddr-offset difference equals that of the first PT_LOAD
// (loaders that compute AT_PHDR as "first segment's base + e_phoff": Linux
// before 5.18, qemu-user 7.x), at the cost of up to Options.MaxPad bytes of
// padding. GNU strip/objcopy before 2.44, eu-strip and patchelf break such
// files; it is only for inputs the default layout refuses.
//
// Converting a converted file with Replace leaves the previous .sframe
// bytes in place (unreferenced) and adds another segment.
//
// Use NewPlan to learn where .sframe will land (SFrame start offsets are
// PC-relative, so the encoder needs Plan.Addr), encode, then Plan.Write or
// Plan.Bytes. Insert wraps that loop and re-plans if the encoded size
// differs from the estimate.
package elfwrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ELF constants used here.
const (
	ptLoad       = 1
	ptPhdr       = 6
	ptGNUSFrame  = 0x6474e554 // PT_GNU_PROPERTY is 0x6474e553
	shtNobits    = 8
	shtGNUSFrame = 0x6ffffff4
	shfAlloc     = 0x2
	pfR          = 0x4

	etExec = 2
	etDyn  = 3

	emS390    = 22
	emX86_64  = 62
	emAArch64 = 183

	pnXNum      = 0xffff
	shnLoReserv = 0xff00
	shnXIndex   = 0xffff

	ehdrSize = 64
	phdrSize = 56
	shdrSize = 64

	// defaultMaxPad is the padding accepted to keep the new segment's
	// vaddr-offset difference equal to the first PT_LOAD's.
	defaultMaxPad = 4 << 20
	// minSegAlign is the smallest alignment used for the new PT_LOAD.
	minSegAlign = 0x1000
)

// SectionName is the name of the section that is added.
const SectionName = ".sframe"

// FormatError reports a malformed or inconsistent input.
type FormatError struct {
	Off int64  // byte offset in the input the problem relates to
	Msg string // what is wrong
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("malformed ELF at offset %#x: %s", e.Off, e.Msg)
}

// UnsupportedError reports a well-formed input that this package does not
// handle (ELF32, relocatable objects, core files, other machines).
type UnsupportedError struct {
	What string
}

func (e *UnsupportedError) Error() string { return "unsupported input: " + e.What }

// ErrHasSFrame is matched (errors.Is) by *HasSFrameError.
var ErrHasSFrame = errors.New("input already has SFrame data")

// HasSFrameError reports that the input already has a .sframe section or a
// PT_GNU_SFRAME segment and Options.Replace was not set.
type HasSFrameError struct {
	Section bool // a section named .sframe or of type SHT_GNU_SFRAME exists
	Segment bool // a PT_GNU_SFRAME program header exists
}

func (e *HasSFrameError) Error() string {
	var what string
	switch {
	case e.Section && e.Segment:
		what = "a .sframe section and a PT_GNU_SFRAME segment"
	case e.Section:
		what = "a .sframe section"
	default:
		what = "a PT_GNU_SFRAME segment"
	}
	return "input already has " + what + " (set Replace to overwrite)"
}

// Is makes errors.Is(err, ErrHasSFrame) true.
func (e *HasSFrameError) Is(target error) bool { return target == ErrHasSFrame }

// ErrSizeMismatch is returned by Plan.Write and Plan.Bytes when the data
// passed is not the size the plan was made for.
var ErrSizeMismatch = errors.New("section data size differs from the planned size")

// Options tune NewPlan.
type Options struct {
	// Replace allows inputs that already have SFrame data. The old bytes
	// stay where they are (unreferenced); the existing .sframe section
	// header and PT_GNU_SFRAME program header are repointed to the new
	// data in the new segment, and whichever of the two is missing is added.
	Replace bool
	// AppendSegment selects the old, fragile layout: the program header
	// table moves into the new segment at the end of the file when it
	// cannot grow in place. Files in that layout run, but GNU strip and
	// objcopy before 2.44, eu-strip and patchelf break them. It is only
	// for inputs the linker-like layout refuses (a *LayoutError).
	AppendSegment bool
	// MaxPad (AppendSegment only) bounds the zero padding inserted to keep the new segment's
	// vaddr-offset difference equal to the first PT_LOAD's when the program
	// header table moves (see the package comment). 0 means 4 MiB; a
	// negative value always uses the compact placement.
	MaxPad int64
}

type phdr struct {
	typ, flags                              uint32
	off, vaddr, paddr, filesz, memsz, align uint64
}

type shdr struct {
	name, typ              uint32
	flags, addr, off, size uint64
	link, info             uint32
	addralign, entsize     uint64
}

// file is the parsed and validated input.
type file struct {
	in       []byte
	bo       binary.ByteOrder
	phoff    uint64
	shoff    uint64
	phs      []phdr
	shs      []shdr // nil when the input has no section headers
	shstrndx int    // -1 when there is no section name table

	// syms remembers rewritten symbol tables: Place plans the same input
	// for several sizes, and the symbols do not depend on the size.
	syms []symRewrite
}

func formatErr(off uint64, format string, args ...any) error {
	return &FormatError{Off: int64(off), Msg: fmt.Sprintf(format, args...)}
}

// within reports whether [off, off+size) lies inside n bytes, without
// overflowing.
func within(off, size, n uint64) bool {
	return off <= n && size <= n-off
}

func parse(in []byte) (*file, error) {
	n := uint64(len(in))
	if n < 4 || !bytes.Equal(in[:4], []byte("\x7fELF")) {
		return nil, formatErr(0, "not an ELF file (bad magic)")
	}
	if n < 16 {
		return nil, formatErr(0, "truncated ELF identification (%d bytes)", n)
	}
	switch in[4] {
	case 1:
		return nil, &UnsupportedError{What: "ELF32 (ELFCLASS32)"}
	case 2:
	default:
		return nil, formatErr(4, "invalid ELF class %d", in[4])
	}
	f := &file{in: in, shstrndx: -1}
	switch in[5] {
	case 1:
		f.bo = binary.LittleEndian
	case 2:
		f.bo = binary.BigEndian
	default:
		return nil, formatErr(5, "invalid ELF data encoding %d", in[5])
	}
	if in[6] != 1 {
		return nil, formatErr(6, "invalid ELF identification version %d", in[6])
	}
	if n < ehdrSize {
		return nil, formatErr(0, "truncated ELF header: %d bytes, need %d", n, ehdrSize)
	}
	bo := f.bo
	switch t := bo.Uint16(in[16:]); t {
	case etExec, etDyn:
	case 1:
		return nil, &UnsupportedError{What: "relocatable object (ET_REL); link it first"}
	case 4:
		return nil, &UnsupportedError{What: "core file (ET_CORE)"}
	default:
		return nil, &UnsupportedError{What: fmt.Sprintf("ELF type %#x", t)}
	}
	switch m := bo.Uint16(in[18:]); m {
	case emX86_64, emAArch64, emS390:
	default:
		return nil, &UnsupportedError{What: fmt.Sprintf("machine %d (want x86-64, AArch64 or s390x)", m)}
	}
	if v := bo.Uint32(in[20:]); v != 1 {
		return nil, formatErr(20, "invalid ELF version %d", v)
	}
	f.phoff = bo.Uint64(in[32:])
	f.shoff = bo.Uint64(in[40:])
	if es := bo.Uint16(in[52:]); es < ehdrSize {
		return nil, formatErr(52, "e_ehsize %d is smaller than %d", es, ehdrSize)
	}
	phentsize := bo.Uint16(in[54:])
	phnum := uint64(bo.Uint16(in[56:]))
	shentsize := bo.Uint16(in[58:])
	shnum := uint64(bo.Uint16(in[60:]))
	shstrndx := uint64(bo.Uint16(in[62:]))

	// Section headers first: extended numbering keeps counts in section 0.
	if f.shoff != 0 && f.shoff < ehdrSize {
		return nil, formatErr(40, "section header table at %#x overlaps the ELF header", f.shoff)
	}
	if f.phoff < ehdrSize {
		return nil, formatErr(32, "program header table at %#x overlaps the ELF header", f.phoff)
	}
	if f.shoff != 0 {
		if shentsize != shdrSize {
			return nil, formatErr(58, "e_shentsize is %d, want %d", shentsize, shdrSize)
		}
		if !within(f.shoff, shdrSize, n) {
			return nil, formatErr(40, "section header table at %#x is past the end of the file (%#x bytes)", f.shoff, n)
		}
		s0 := f.readShdr(f.shoff)
		if shnum == 0 {
			shnum = s0.size
		}
		if phnum == pnXNum {
			phnum = uint64(s0.info)
		}
		if shstrndx == shnXIndex {
			shstrndx = uint64(s0.link)
		}
		if shnum == 0 {
			return nil, formatErr(40, "section header table at %#x has no entries", f.shoff)
		}
		if shnum > (n-f.shoff)/shdrSize {
			return nil, formatErr(f.shoff, "section header table (%d entries) runs past the end of the file (%#x bytes)", shnum, n)
		}
		f.shs = make([]shdr, shnum)
		for i := range f.shs {
			off := f.shoff + uint64(i)*shdrSize
			s := f.readShdr(off)
			if i > 0 && s.typ != shtNobits && !within(s.off, s.size, n) {
				return nil, formatErr(off, "section %d data [%#x, +%#x) is past the end of the file (%#x bytes)", i, s.off, s.size, n)
			}
			f.shs[i] = s
		}
		if shstrndx != 0 {
			if shstrndx >= shnum {
				return nil, formatErr(62, "e_shstrndx %d is out of range (%d sections)", shstrndx, shnum)
			}
			if f.shs[shstrndx].typ == shtNobits {
				return nil, formatErr(62, "section name table %d has no file data", shstrndx)
			}
			f.shstrndx = int(shstrndx)
		}
	} else if shnum != 0 {
		return nil, formatErr(60, "e_shnum is %d but e_shoff is 0", shnum)
	}

	if err := f.parsePhdrs(phentsize, phnum); err != nil {
		return nil, err
	}
	return f, nil
}

// parsePhdrs reads and checks the program header table of phnum entries.
func (f *file) parsePhdrs(phentsize uint16, phnum uint64) error {
	n := uint64(len(f.in))
	if phnum == 0 {
		return formatErr(56, "no program headers; is this a linked executable or shared library?")
	}
	if phentsize != phdrSize {
		return formatErr(54, "e_phentsize is %d, want %d", phentsize, phdrSize)
	}
	if f.phoff > n || phnum > (n-f.phoff)/phdrSize {
		return formatErr(32, "program header table at %#x (%d entries) runs past the end of the file (%#x bytes)", f.phoff, phnum, n)
	}
	f.phs = make([]phdr, phnum)
	loads := 0
	for i := range f.phs {
		off := f.phoff + uint64(i)*phdrSize
		p := f.readPhdr(off)
		if p.filesz > 0 && !within(p.off, p.filesz, n) {
			return formatErr(off, "segment %d file data [%#x, +%#x) is past the end of the file (%#x bytes)", i, p.off, p.filesz, n)
		}
		if p.typ == ptLoad {
			loads++
			if p.filesz > p.memsz {
				return formatErr(off, "PT_LOAD %d has p_filesz %#x > p_memsz %#x", i, p.filesz, p.memsz)
			}
			if p.vaddr+p.memsz < p.vaddr {
				return formatErr(off, "PT_LOAD %d wraps around the address space", i)
			}
			if p.align&(p.align-1) != 0 {
				return formatErr(off, "PT_LOAD %d alignment %#x is not a power of two", i, p.align)
			}
			if p.align > 1 && p.off%p.align != p.vaddr%p.align {
				return formatErr(off, "PT_LOAD %d has p_offset %#x not congruent to p_vaddr %#x modulo %#x", i, p.off, p.vaddr, p.align)
			}
		}
		f.phs[i] = p
	}
	if loads == 0 {
		return formatErr(32, "no PT_LOAD segment")
	}
	return nil
}

func (f *file) readPhdr(off uint64) phdr {
	b, bo := f.in[off:off+phdrSize], f.bo
	return phdr{
		typ: bo.Uint32(b[0:]), flags: bo.Uint32(b[4:]),
		off: bo.Uint64(b[8:]), vaddr: bo.Uint64(b[16:]), paddr: bo.Uint64(b[24:]),
		filesz: bo.Uint64(b[32:]), memsz: bo.Uint64(b[40:]), align: bo.Uint64(b[48:]),
	}
}

func (f *file) readShdr(off uint64) shdr {
	b, bo := f.in[off:off+shdrSize], f.bo
	return shdr{
		name: bo.Uint32(b[0:]), typ: bo.Uint32(b[4:]),
		flags: bo.Uint64(b[8:]), addr: bo.Uint64(b[16:]), off: bo.Uint64(b[24:]), size: bo.Uint64(b[32:]),
		link: bo.Uint32(b[40:]), info: bo.Uint32(b[44:]),
		addralign: bo.Uint64(b[48:]), entsize: bo.Uint64(b[56:]),
	}
}

func putPhdr(bo binary.ByteOrder, b []byte, p phdr) {
	bo.PutUint32(b[0:], p.typ)
	bo.PutUint32(b[4:], p.flags)
	bo.PutUint64(b[8:], p.off)
	bo.PutUint64(b[16:], p.vaddr)
	bo.PutUint64(b[24:], p.paddr)
	bo.PutUint64(b[32:], p.filesz)
	bo.PutUint64(b[40:], p.memsz)
	bo.PutUint64(b[48:], p.align)
}

func putShdr(bo binary.ByteOrder, b []byte, s shdr) {
	bo.PutUint32(b[0:], s.name)
	bo.PutUint32(b[4:], s.typ)
	bo.PutUint64(b[8:], s.flags)
	bo.PutUint64(b[16:], s.addr)
	bo.PutUint64(b[24:], s.off)
	bo.PutUint64(b[32:], s.size)
	bo.PutUint32(b[40:], s.link)
	bo.PutUint32(b[44:], s.info)
	bo.PutUint64(b[48:], s.addralign)
	bo.PutUint64(b[56:], s.entsize)
}

// sectionName returns the name of section s, or "" if it cannot be read.
func (f *file) sectionName(s shdr) string {
	if f.shstrndx < 0 {
		return ""
	}
	st := f.shs[f.shstrndx]
	if uint64(s.name) >= st.size {
		return ""
	}
	b := f.in[st.off+uint64(s.name) : st.off+st.size]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func alignUp(x, a uint64) (uint64, bool) {
	if a <= 1 {
		return x, true
	}
	r := (x + a - 1) &^ (a - 1)
	return r, r >= x
}
