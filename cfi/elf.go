package cfi

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// shtX86_64Unwind is SHT_X86_64_UNWIND, the type some linkers give .eh_frame.
const shtX86_64Unwind = elf.SectionType(0x70000001)

// sections returns the call-frame sections of an ELF file: .eh_frame (by
// name or type, or through PT_GNU_EH_FRAME when section headers are gone)
// then a Go program's function table as CFI (goSection; what it leaves
// out goes to goNotes), then .debug_frame, in that order of precedence. A
// file with none gives an empty list.
// In relocatable objects elfread applies the relocations (see Open).
func sections(f *elfread.File, goNotes *[]error) ([]*Section, error) {
	ef := f.ELF
	ptr := 8
	if ef.Class == elf.ELFCLASS32 {
		ptr = 4
	}
	var textRel, dataRel uint64
	if s := ef.Section(".text"); s != nil {
		textRel = s.Addr
	}
	if s := ef.Section(".got"); s != nil {
		dataRel = s.Addr
	}
	mk := func(k kind, s *elfread.Section) *Section {
		return &Section{kind: k, data: s.Data, addr: s.Addr, order: ef.ByteOrder, ptrSize: ptr, textRel: textRel, dataRel: dataRel}
	}
	var out []*Section
	eh, err := f.Section(".eh_frame")
	if errors.Is(err, elfread.ErrNotFound) {
		eh, err = f.SectionByType(shtX86_64Unwind)
	}
	switch {
	case err == nil:
		out = append(out, mk(kindEH, eh))
	case !errors.Is(err, elfread.ErrNotFound):
		return nil, err
	default:
		s, err := fromHdr(f, ptr)
		if err != nil {
			return nil, err
		}
		if s != nil {
			s.textRel, s.dataRel = textRel, dataRel
			out = append(out, s)
		}
	}
	if gs, notes := goSection(f, ptr); gs != nil || notes != nil {
		if gs != nil {
			out = append(out, gs)
		}
		if goNotes != nil {
			*goNotes = notes
		}
	}
	df, err := f.Section(".debug_frame")
	switch {
	case err == nil:
		out = append(out, mk(kindDebug, df))
	case !errors.Is(err, elfread.ErrNotFound):
		return nil, err
	}
	if len(out) == 0 && unnamed(ef) {
		return nil, errors.New("the section headers have no names (e_shstrndx is 0), so .eh_frame and .debug_frame cannot be found")
	}
	return out, nil
}

// fromHdr finds .eh_frame through PT_GNU_EH_FRAME: the header's
// eh_frame_ptr gives its address; its size is unknown, so the section runs
// to the end of the loaded segment holding it and the walk stops at the
// zero terminator.
func fromHdr(f *elfread.File, ptr int) (*Section, error) {
	hdr, err := f.Segment(elf.PT_GNU_EH_FRAME)
	if errors.Is(err, elfread.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(hdr.Data) < 4 || hdr.Data[0] != 1 {
		return nil, fmt.Errorf("PT_GNU_EH_FRAME at file offset %#x: unsupported .eh_frame_hdr (%d bytes, version %d)", hdr.Offset, len(hdr.Data), first(hdr.Data))
	}
	hs := &Section{kind: kindEH, data: hdr.Data, addr: hdr.Addr, order: hdr.Order, ptrSize: ptr, dataRel: hdr.Addr}
	r := newReader(hdr.Data, 4, hdr.Order)
	addr, err := readEncoded(r, hdr.Data[1], ptrCtx{sec: hs, ptrSize: ptr})
	if err != nil {
		return nil, fmt.Errorf("PT_GNU_EH_FRAME at file offset %#x: .eh_frame_hdr: eh_frame_ptr: %v", hdr.Offset, err)
	}
	for _, p := range f.ELF.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr >= p.Vaddr+p.Filesz {
			continue
		}
		n := p.Vaddr + p.Filesz - addr
		if err := f.InFile(fmt.Sprintf(".eh_frame at %#x (PT_LOAD)", addr), p.Off+(addr-p.Vaddr), n); err != nil {
			return nil, err
		}
		data := make([]byte, n)
		if _, err := p.ReadAt(data, int64(addr-p.Vaddr)); err != nil {
			return nil, fmt.Errorf("reading .eh_frame at %#x: %v", addr, err)
		}
		return &Section{kind: kindEH, data: data, addr: addr, order: hdr.Order, ptrSize: ptr, untilTerminator: true}, nil
	}
	return nil, fmt.Errorf("PT_GNU_EH_FRAME at file offset %#x: .eh_frame_hdr points to %#x, outside every loaded segment", hdr.Offset, addr)
}

// unnamed reports section headers without names: e_shstrndx 0 (or
// pointing at an empty table) with sections other than the null one.
func unnamed(ef *elf.File) bool {
	if len(ef.Sections) < 2 {
		return false
	}
	for _, s := range ef.Sections[1:] {
		if s.Name != "" {
			return false
		}
	}
	return true
}

func first(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}
