// Package elfread finds sections (.sframe, .eh_frame, .debug_frame, ...) in
// ELF files and returns their bytes and addresses. For relocatable objects
// it applies the section's RELA relocations the way objdump does when it
// dumps a .o (every section at address 0).
package elfread

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// SHT_GNU_SFRAME and PT_GNU_SFRAME are the SFrame section and segment types.
const (
	SHTGNUSFrame = 0x6ffffff4
	PTGNUSFrame  = 0x6474e554 // readelf: GNU_SFRAME; 0x6474e553 is PT_GNU_PROPERTY
)

// Limits on what one input may make the reader allocate. A compressed
// (SHF_COMPRESSED, zlib or zstd) section may inflate to at most
// MaxInflateRatio times the size of the whole file, and never to more than
// MaxInflate bytes; the size its header claims is checked before inflating
// and the data is read through a limited reader, so a decompression bomb
// costs at most that. Uncompressed sections and segments must lie inside
// the file. Programs may change both (cfi2sframe has --max-inflate and
// --max-inflate-ratio).
var (
	MaxInflateRatio int64 = 32
	MaxInflate      int64 = 1 << 30
)

// File is an opened ELF file.
type File struct {
	ELF *elf.File
	// Name is the name the file was opened or made with, for the
	// caller's messages; elfread's errors do not name the file.
	Name string
	// Size is the file's size in bytes, or -1 when the reader gave no way
	// to learn it (then only MaxInflate bounds compressed sections).
	Size   int64
	closer io.Closer
	mem    []byte // the whole file, when read from memory (NewFileBytes)
}

// Section is a section's contents (relocated for ET_REL inputs).
type Section struct {
	Name string
	Addr uint64
	// Offset is where the contents lie in the file (for a compressed
	// section, its compressed bytes; for a segment, the segment's).
	Offset uint64
	// Segment says that the contents are a PT_GNU_SFRAME segment's, read
	// through the PT_LOAD that maps it (LoaderSFrame).
	Segment bool
	// Fallback, when a linked file has a PT_GNU_SFRAME a loader cannot
	// read SFrame data through, is a note saying why and what was read
	// instead, which a loader would not find (LoaderSFrame); "" otherwise.
	Fallback string
	Data     []byte
	Order    binary.ByteOrder
	Machine  elf.Machine
	Class    elf.Class
}

// Where names the section for an error: the PT_GNU_SFRAME segment or the
// section, and its file offset.
func (s *Section) Where() string {
	if s.Segment {
		return fmt.Sprintf("PT_GNU_SFRAME at file offset %#x", s.Offset)
	}
	return fmt.Sprintf("section %s at file offset %#x", s.Name, s.Offset)
}

// ErrNotFound is wrapped by errors for a missing section.
var ErrNotFound = errors.New("section not found")

// ErrNoLoaderSFrame is wrapped by LoaderSFrame's error for a linked file
// whose PT_GNU_SFRAME a loader cannot read SFrame data through and which
// has no .sframe section to read instead.
var ErrNoLoaderSFrame = errors.New("no SFrame data a loader can read")

// ErrInflateLimit is wrapped by the error for a compressed section that
// claims to inflate to more than MaxInflate or MaxInflateRatio allow.
var ErrInflateLimit = errors.New("compressed section larger than allowed")

// Error is a problem with an ELF file's contents: what is wrong and,
// when it lies in one part of the file, where (the section, segment or
// table, and its offset in the file, which readelf prints in hex). It
// does not name the file: the caller that names it adds the name once,
// as os.PathError does. Err, when set, is what it wraps (ErrNotFound,
// ErrInflateLimit, an error of debug/elf or of reading).
type Error struct {
	Where  string // "section .debug_frame", "program header table (9 entries of 56 bytes)"; "" for none
	Offset uint64 // Where's offset in the file
	Msg    string
	Err    error
}

func (e *Error) Error() string {
	if e.Where == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s at file offset %#x: %s", e.Where, e.Offset, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// errorf is an *Error about the file as a whole (or a place its message
// says), wrapping err (which may be nil).
func errorf(err error, format string, args ...any) *Error {
	return &Error{Msg: fmt.Sprintf(format, args...), Err: err}
}

// errorAt is an *Error about where, at file offset off.
func errorAt(where string, off uint64, err error, format string, args ...any) *Error {
	return &Error{Where: where, Offset: off, Msg: fmt.Sprintf(format, args...), Err: err}
}

// Open opens the named ELF file, which must be a regular file (a symbolic
// link is followed to one): it is opened without blocking and checked with
// fstat, so a FIFO without a writer or a device is refused rather than
// waited on or read without end. Its errors name the file, as os.Open's
// do (an *fs.PathError whose Op is "open").
func Open(name string) (*File, error) {
	fh, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	f, err := openFile(fh, name)
	if err != nil {
		fh.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f.closer = fh
	return f, nil
}

// openFile is Open on the file opened, without naming it in errors.
func openFile(fh *os.File, name string) (*File, error) {
	st, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(nil, "%s, not a regular file", KindOf(st.Mode()))
	}
	return NewFile(fh, name)
}

// NewFile reads an ELF file from r. name is kept as File.Name, for the
// caller's messages: errors do not name the file (*Error).
func NewFile(r io.ReaderAt, name string) (*File, error) {
	var ident [4]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil || string(ident[:]) != elf.ELFMAG {
		return nil, errorf(nil, "not an ELF file")
	}
	size := int64(-1)
	switch r := r.(type) {
	case interface{ Size() int64 }:
		size = r.Size()
	case *os.File:
		if st, err := r.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
	}
	f := &File{Name: name, Size: size}
	if err := f.checkTables(r); err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(r)
	if err != nil {
		return nil, errorf(err, "malformed ELF file: %v", err)
	}
	f.ELF = ef
	return f, nil
}

// FromELF is a File for an ELF file already opened with debug/elf; name
// is kept as File.Name. Its size is not known (Size is -1), so
// only MaxInflate bounds compressed sections and sections are not checked
// against the file's end before they are read. Close does not close f.
func FromELF(f *elf.File, name string) *File {
	return &File{ELF: f, Name: name, Size: -1}
}

// NewFileBytes is NewFile on a file held in memory (a mapping, say). The
// Data of an uncompressed section of a linked file is then a slice of b,
// not a copy: read-only, valid as long as b is.
func NewFileBytes(b []byte, name string) (*File, error) {
	f, err := NewFile(bytes.NewReader(b), name)
	if err != nil {
		return nil, err
	}
	f.mem = b
	return f, nil
}

// checkTables checks that the ELF header, the program header table, the
// section header table and the section-name table lie inside the file, so
// that a truncated file is reported by which table is cut, not as "EOF".
func (f *File) checkTables(r io.ReaderAt) error {
	if f.Size < 0 {
		return nil
	}
	var h [64]byte
	n, _ := r.ReadAt(h[:], 0)
	if n < 16 {
		return errorf(nil, "truncated ELF header (%d bytes)", n)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if h[elf.EI_DATA] == byte(elf.ELFDATA2MSB) {
		bo = binary.BigEndian
	}
	var phoff, shoff uint64
	var phentsize, phnum, shentsize, shnum, shstrndx uint16
	switch elf.Class(h[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		if n < 64 {
			return errorf(nil, "truncated ELF header (%d of 64 bytes)", n)
		}
		phoff, shoff = bo.Uint64(h[32:]), bo.Uint64(h[40:])
		phentsize, phnum, shentsize, shnum, shstrndx = bo.Uint16(h[54:]), bo.Uint16(h[56:]), bo.Uint16(h[58:]), bo.Uint16(h[60:]), bo.Uint16(h[62:])
	case elf.ELFCLASS32:
		if n < 52 {
			return errorf(nil, "truncated ELF header (%d of 52 bytes)", n)
		}
		phoff, shoff = uint64(bo.Uint32(h[28:])), uint64(bo.Uint32(h[32:]))
		phentsize, phnum, shentsize, shnum, shstrndx = bo.Uint16(h[42:]), bo.Uint16(h[44:]), bo.Uint16(h[46:]), bo.Uint16(h[48:]), bo.Uint16(h[50:])
	default:
		return nil // elf.NewFile says what is wrong
	}
	if phnum > 0 {
		if err := f.InFile(fmt.Sprintf("program header table (%d entries of %d bytes)", phnum, phentsize), phoff, uint64(phnum)*uint64(phentsize)); err != nil {
			return err
		}
	}
	if shnum > 0 && shoff != 0 {
		if err := f.InFile(fmt.Sprintf("section header table (%d entries of %d bytes)", shnum, shentsize), shoff, uint64(shnum)*uint64(shentsize)); err != nil {
			return err
		}
		is64 := elf.Class(h[elf.EI_CLASS]) == elf.ELFCLASS64
		if shstrndx != 0 && shstrndx < shnum && ((is64 && shentsize >= 64) || (!is64 && shentsize >= 40)) {
			// sh_offset and sh_size of the section-name table.
			e := make([]byte, shentsize)
			if _, err := r.ReadAt(e, int64(shoff)+int64(shstrndx)*int64(shentsize)); err == nil {
				var off, size uint64
				if is64 {
					off, size = bo.Uint64(e[24:]), bo.Uint64(e[32:])
				} else {
					off, size = uint64(bo.Uint32(e[16:])), uint64(bo.Uint32(e[20:]))
				}
				if elf.SectionType(bo.Uint32(e[4:])) != elf.SHT_NOBITS {
					if err := f.InFile(fmt.Sprintf("section-name table (section %d)", shstrndx), off, size); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// InFile checks that n bytes at file offset off lie inside the file; what
// names them in the error. Callers check before allocating n bytes.
func (f *File) InFile(what string, off, n uint64) error {
	if f.Size < 0 {
		if n > 1<<31 {
			return errorAt(what, off, nil, "%d bytes is too large", n)
		}
		return nil
	}
	if off > uint64(f.Size) || n > uint64(f.Size)-off {
		return errorAt(what, off, nil, "%d bytes run past the end of the file (%d bytes)", n, f.Size)
	}
	return nil
}

// inflateLimit is the most bytes a compressed section of this file may
// inflate to.
func (f *File) inflateLimit() int64 {
	if f.Size >= 0 && f.Size <= MaxInflate/max(MaxInflateRatio, 1) {
		return f.Size * max(MaxInflateRatio, 1)
	}
	return MaxInflate
}

// Close closes the underlying file if Open opened it.
func (f *File) Close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// Section returns the named section's bytes and address.
func (f *File) Section(name string) (*Section, error) {
	s := f.ELF.Section(name)
	if s == nil {
		return nil, errorf(ErrNotFound, "no %s section: %v", name, ErrNotFound)
	}
	return f.load(s)
}

// SectionAt returns the contents of section i of the section header
// table (for a caller that walks the sections, whose names may repeat).
func (f *File) SectionAt(i int) (*Section, error) {
	if i < 0 || i >= len(f.ELF.Sections) {
		return nil, errorf(ErrNotFound, "no section %d (%d sections): %v", i, len(f.ELF.Sections), ErrNotFound)
	}
	return f.load(f.ELF.Sections[i])
}

// SectionByType returns the first section of type t.
func (f *File) SectionByType(t elf.SectionType) (*Section, error) {
	for _, s := range f.ELF.Sections {
		if s.Type == t {
			return f.load(s)
		}
	}
	return nil, errorf(ErrNotFound, "no section of type %#x: %v", uint32(t), ErrNotFound)
}

// Segment returns the contents of the first program header of type t.
func (f *File) Segment(t elf.ProgType) (*Section, error) {
	for _, p := range f.ELF.Progs {
		if p.Type != t {
			continue
		}
		if err := f.InFile(fmt.Sprintf("segment of type %#x", uint32(t)), p.Off, p.Filesz); err != nil {
			return nil, err
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			return nil, errorf(err, "reading segment of type %#x: %v", uint32(t), err)
		}
		return &Section{Addr: p.Vaddr, Offset: p.Off, Data: data, Order: f.ELF.ByteOrder, Machine: f.ELF.Machine, Class: f.ELF.Class}, nil
	}
	return nil, errorf(ErrNotFound, "no segment of type %#x: %v", uint32(t), ErrNotFound)
}

// SFrame returns the .sframe section: by type SHT_GNU_SFRAME, by name, or
// from the PT_GNU_SFRAME segment when section headers are absent.
func (f *File) SFrame() (*Section, error) {
	if s, err := f.SectionByType(SHTGNUSFrame); err == nil || !errors.Is(err, ErrNotFound) {
		return s, err
	}
	if s, err := f.Section(".sframe"); err == nil || !errors.Is(err, ErrNotFound) {
		return s, err
	}
	if s, err := f.Segment(PTGNUSFrame); err == nil || !errors.Is(err, ErrNotFound) {
		if s != nil {
			s.Name = ".sframe"
		}
		return s, err
	}
	return nil, errorf(ErrNotFound, "no .sframe section: %v", ErrNotFound)
}

// LoaderSFrame returns the SFrame data a loader reads: in a linked file,
// the bytes of the PT_GNU_SFRAME segment, read where the PT_LOAD covering
// its address maps them from (Segment is then true); otherwise (a
// relocatable object, a file without PT_GNU_SFRAME) what SFrame returns.
// When a linked file's PT_GNU_SFRAME cannot be read so (LoaderSegment
// says why) it is what SFrame returns too, with Fallback saying so; when
// that would be nothing (no .sframe section, and the segment's own bytes
// at its file offset not in the file), an error wrapping
// ErrNoLoaderSFrame. The segment's bytes are a slice of the file's when
// it is held in memory (NewFileBytes), else a copy.
func (f *File) LoaderSFrame() (*Section, error) {
	if f.ELF.Type == elf.ET_REL {
		return f.SFrame()
	}
	var p *elf.Prog
	for _, q := range f.ELF.Progs {
		if q.Type == elf.ProgType(PTGNUSFrame) {
			p = q
			break
		}
	}
	if p == nil {
		return f.SFrame()
	}
	s, problem, err := f.mapped(p)
	if s != nil || err != nil {
		return s, err
	}
	sec := f.sframeHeader()
	if sec == nil && f.InFile("", p.Off, p.Filesz) != nil {
		return nil, errorf(ErrNoLoaderSFrame, "%s, and there is no .sframe section to read instead", problem)
	}
	if s, err = f.SFrame(); err != nil {
		return nil, err
	}
	if sec == nil {
		s.Fallback = fmt.Sprintf("%s; read the bytes at its file offset %#x instead (there is no .sframe section), which the kernel would not find", problem, p.Off)
	} else {
		s.Fallback = fmt.Sprintf("%s; read section %s instead, which the kernel would not find", problem, sec.Name)
	}
	return s, nil
}

// sframeHeader is the section header SFrame finds .sframe by, or nil.
func (f *File) sframeHeader() *elf.Section {
	for _, s := range f.ELF.Sections {
		if s.Type == SHTGNUSFrame {
			return s
		}
	}
	return f.ELF.Section(".sframe")
}

// LoaderSegment finds where a loader reads PT_GNU_SFRAME segment p of ef,
// a file of size bytes (-1 when unknown), from: the PT_LOAD whose
// file-backed part covers p's address range, and the file offset it maps
// p from. When there is none, problem says why, for a message: p holds no
// bytes, lies past the end of the file, or lies outside every PT_LOAD's
// file-backed part.
func LoaderSegment(ef *elf.File, p *elf.Prog, size int64) (load *elf.Prog, off uint64, problem string) {
	past := func(off uint64) bool {
		return size >= 0 && (off > uint64(size) || p.Filesz > uint64(size)-off)
	}
	if p.Filesz == 0 {
		return nil, 0, fmt.Sprintf("PT_GNU_SFRAME (offset %#x, size 0) holds no bytes", p.Off)
	}
	for _, l := range ef.Progs {
		if l.Type != elf.PT_LOAD || p.Vaddr < l.Vaddr || p.Vaddr-l.Vaddr > l.Filesz || p.Filesz > l.Filesz-(p.Vaddr-l.Vaddr) {
			continue
		}
		off := l.Off + (p.Vaddr - l.Vaddr)
		switch {
		case !past(off):
			return l, off, ""
		case off == p.Off:
			return nil, 0, fmt.Sprintf("PT_GNU_SFRAME (offset %#x, size %#x) lies past the end of the file (%#x bytes)", p.Off, p.Filesz, size)
		}
		return nil, 0, fmt.Sprintf("PT_GNU_SFRAME (offset %#x, size %#x) is mapped by a PT_LOAD from file offset %#x, past the end of the file (%#x bytes)", p.Off, p.Filesz, off, size)
	}
	if past(p.Off) {
		return nil, 0, fmt.Sprintf("PT_GNU_SFRAME (offset %#x, size %#x) lies past the end of the file (%#x bytes)", p.Off, p.Filesz, size)
	}
	return nil, 0, fmt.Sprintf("PT_GNU_SFRAME (offset %#x, size %#x) at address %#x lies outside every PT_LOAD's file-backed part", p.Off, p.Filesz, p.Vaddr)
}

// mapped reads segment p's bytes where a loader reads them from, or
// returns nil and why it cannot (LoaderSegment).
func (f *File) mapped(p *elf.Prog) (*Section, string, error) {
	l, off, problem := LoaderSegment(f.ELF, p, f.Size)
	if l == nil {
		return nil, problem, nil
	}
	s := &Section{Name: ".sframe", Addr: p.Vaddr, Offset: off, Segment: true, Order: f.ELF.ByteOrder, Machine: f.ELF.Machine, Class: f.ELF.Class}
	if f.mem != nil {
		s.Data = f.mem[off : off+p.Filesz : off+p.Filesz]
		return s, "", nil
	}
	if err := f.InFile("PT_GNU_SFRAME", off, p.Filesz); err != nil {
		return nil, "", err
	}
	s.Data = make([]byte, p.Filesz)
	if _, err := l.ReadAt(s.Data, int64(p.Vaddr-l.Vaddr)); err != nil {
		return nil, "", errorAt("PT_GNU_SFRAME", off, err, "reading: %v", err)
	}
	return s, "", nil
}

func (f *File) load(s *elf.Section) (*Section, error) {
	if s.Type == elf.SHT_NOBITS {
		return nil, errorf(nil, "section %s has no contents", s.Name)
	}
	data, err := f.sectionData(s)
	if err != nil {
		return nil, err
	}
	out := &Section{Name: s.Name, Addr: s.Addr, Offset: s.Offset, Data: data, Order: f.ELF.ByteOrder, Machine: f.ELF.Machine, Class: f.ELF.Class}
	if f.ELF.Type == elf.ET_REL {
		if err := f.relocate(s, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sectionData reads a section's contents within the limits above.
func (f *File) sectionData(s *elf.Section) ([]byte, error) {
	what := "section " + s.Name
	if err := f.InFile(what, s.Offset, s.FileSize); err != nil {
		return nil, err
	}
	if s.Flags&elf.SHF_COMPRESSED == 0 {
		if f.mem != nil && f.ELF.Type != elf.ET_REL && s.Offset+s.FileSize <= uint64(len(f.mem)) {
			// Relocatable objects' sections are relocated in place.
			return f.mem[s.Offset : s.Offset+s.FileSize : s.Offset+s.FileSize], nil
		}
		data, err := s.Data()
		if err != nil {
			return nil, errorAt(what, s.Offset, err, "%v", err)
		}
		return data, nil
	}
	limit := f.inflateLimit()
	if s.Size > uint64(limit) {
		return nil, errorAt(what, s.Offset, ErrInflateLimit, "compressed contents claim %d bytes, more than the %d allowed (%d times the file's size, at most %d)",
			s.Size, limit, MaxInflateRatio, MaxInflate)
	}
	rc := s.Open()
	data, err := io.ReadAll(io.LimitReader(rc, int64(s.Size)+1))
	if err != nil {
		return nil, errorAt(what, s.Offset, err, "inflating: %v", err)
	}
	if uint64(len(data)) != s.Size {
		return nil, errorAt(what, s.Offset, nil, "inflates to %s bytes, its header claims %d", moreThan(len(data), s.Size), s.Size)
	}
	return data, nil
}

func moreThan(n int, claim uint64) string {
	if uint64(n) > claim {
		return fmt.Sprintf("more than %d", claim)
	}
	return fmt.Sprint(n)
}

// relocate applies the RELA sections that target s, with every section at
// address 0 (so a symbol's value is its offset in its section).
func (f *File) relocate(s *elf.Section, out *Section) error {
	idx := -1
	for i, t := range f.ELF.Sections {
		if t == s {
			idx = i
		}
	}
	for _, rs := range f.ELF.Sections {
		if rs.Type != elf.SHT_RELA || int(rs.Info) != idx {
			continue
		}
		rdata, err := f.sectionData(rs)
		if err != nil {
			return err
		}
		syms, err := f.ELF.Symbols()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return errorf(err, "reading symbols for %s: %v", rs.Name, err)
		}
		entsize := 24
		if f.ELF.Class == elf.ELFCLASS32 {
			entsize = 12
		}
		bo := f.ELF.ByteOrder
		for off := 0; off+entsize <= len(rdata); off += entsize {
			var roff, info uint64
			var addend int64
			var symIdx, typ uint32
			if entsize == 24 {
				roff = bo.Uint64(rdata[off:])
				info = bo.Uint64(rdata[off+8:])
				addend = int64(bo.Uint64(rdata[off+16:]))
				symIdx, typ = uint32(info>>32), uint32(info)
			} else {
				roff = uint64(bo.Uint32(rdata[off:]))
				info = uint64(bo.Uint32(rdata[off+4:]))
				addend = int64(int32(bo.Uint32(rdata[off+8:])))
				symIdx, typ = uint32(info>>8), uint32(info&0xff)
			}
			var sym uint64
			if symIdx > 0 {
				if int(symIdx) > len(syms) {
					return errorf(nil, "%s entry at offset %#x: symbol index %d out of range", rs.Name, off, symIdx)
				}
				sym = syms[symIdx-1].Value
			}
			size, pcrel, ok := relocKind(f.ELF.Machine, typ)
			if !ok {
				return errorf(nil, "%s entry at offset %#x: unsupported relocation type %d for %v", rs.Name, off, typ, f.ELF.Machine)
			}
			if size == 0 {
				continue
			}
			if roff > uint64(len(out.Data)) || uint64(size) > uint64(len(out.Data))-roff {
				return errorf(nil, "%s entry at offset %#x: relocation at %#x outside %s (%d bytes)", rs.Name, off, roff, s.Name, len(out.Data))
			}
			v := sym + uint64(addend)
			if pcrel {
				v -= roff
			}
			switch size {
			case 4:
				bo.PutUint32(out.Data[roff:], uint32(v))
			case 8:
				bo.PutUint64(out.Data[roff:], v)
			}
		}
	}
	return nil
}

// relocKind returns the width and PC-relativity of a relocation type.
func relocKind(m elf.Machine, typ uint32) (size int, pcrel, ok bool) {
	switch m {
	case elf.EM_X86_64:
		switch elf.R_X86_64(typ) {
		case elf.R_X86_64_NONE:
			return 0, false, true
		case elf.R_X86_64_64:
			return 8, false, true
		case elf.R_X86_64_32, elf.R_X86_64_32S:
			return 4, false, true
		case elf.R_X86_64_PC32:
			return 4, true, true
		case elf.R_X86_64_PC64:
			return 8, true, true
		}
	case elf.EM_AARCH64:
		switch elf.R_AARCH64(typ) {
		case elf.R_AARCH64_NONE:
			return 0, false, true
		case elf.R_AARCH64_ABS64:
			return 8, false, true
		case elf.R_AARCH64_ABS32:
			return 4, false, true
		case elf.R_AARCH64_PREL64:
			return 8, true, true
		case elf.R_AARCH64_PREL32:
			return 4, true, true
		}
	case elf.EM_S390:
		switch elf.R_390(typ) {
		case elf.R_390_NONE:
			return 0, false, true
		case elf.R_390_64:
			return 8, false, true
		case elf.R_390_32:
			return 4, false, true
		case elf.R_390_PC64:
			return 8, true, true
		case elf.R_390_PC32:
			return 4, true, true
		}
	}
	return 0, false, false
}
