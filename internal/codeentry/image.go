package codeentry

import (
	"debug/elf"
	"fmt"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// region is loaded bytes at an address.
type region struct {
	addr uint64
	data []byte
	name string // the section's, "" for a segment
}

func (r region) end() uint64 { return r.addr + uint64(len(r.data)) }

// image is the file as loaded: what runs, what is read-only, everything
// with bytes in the file (pointers are read from .data.rel.ro, .got and
// the init arrays), and the PLT ranges, whose stubs are not functions.
type image struct {
	text, ro, all []region
	plt           []Span
}

// loadImage reads the allocated sections, or the PT_LOAD segments when
// the file has no section headers.
func loadImage(f *elfread.File, notes *Notes) (*image, error) {
	img := &image{}
	for i, s := range f.ELF.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Size == 0 {
			continue
		}
		sec, err := f.SectionAt(i)
		if err != nil {
			notes.Problems = append(notes.Problems, fmt.Sprintf("section %s: %v", s.Name, err))
			continue
		}
		r := region{addr: s.Addr, data: sec.Data, name: s.Name}
		img.all = append(img.all, r)
		if s.Flags&elf.SHF_WRITE == 0 {
			img.ro = append(img.ro, r)
		}
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type == elf.SHT_PROGBITS {
			img.text = append(img.text, r)
			if strings.HasPrefix(s.Name, ".plt") || s.Name == ".iplt" {
				img.plt = append(img.plt, Span{r.addr, r.end()})
			}
		}
	}
	if len(f.ELF.Sections) == 0 {
		if err := img.loadSegments(f); err != nil {
			return nil, err
		}
	}
	for _, l := range []*[]region{&img.text, &img.ro, &img.all} {
		sort.Slice(*l, func(i, j int) bool { return (*l)[i].addr < (*l)[j].addr })
	}
	sort.Slice(img.plt, func(i, j int) bool { return img.plt[i].Lo < img.plt[j].Lo })
	return img, nil
}

// loadSegments reads the PT_LOAD segments' file-backed bytes.
func (img *image) loadSegments(f *elfread.File) error {
	for i, p := range f.ELF.Progs {
		if p.Type != elf.PT_LOAD || p.Filesz == 0 {
			continue
		}
		if err := f.InFile(fmt.Sprintf("PT_LOAD segment %d", i), p.Off, p.Filesz); err != nil {
			return &Error{Msg: "reading segments", Err: err}
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			return &Error{Msg: fmt.Sprintf("reading PT_LOAD segment %d", i), Err: err}
		}
		r := region{addr: p.Vaddr, data: data}
		img.all = append(img.all, r)
		if p.Flags&elf.PF_W == 0 {
			img.ro = append(img.ro, r)
		}
		if p.Flags&elf.PF_X != 0 {
			img.text = append(img.text, r)
		}
	}
	return nil
}

// find is the region of sorted l holding [addr, addr+n), or -1.
func find(l []region, addr uint64, n int) int {
	i := sort.Search(len(l), func(i int) bool { return l[i].end() > addr })
	if i < len(l) && addr >= l[i].addr && uint64(n) <= l[i].end()-addr {
		return i
	}
	return -1
}

// read gives n bytes at addr from a read-only region, nil when none
// holds them all.
func (img *image) read(addr uint64, n int) []byte {
	if n < 0 {
		return nil
	}
	i := find(img.ro, addr, n)
	if i < 0 {
		return nil
	}
	off := addr - img.ro[i].addr
	return img.ro[i].data[off : off+uint64(n) : off+uint64(n)]
}

// word is the 8-byte value at addr in any loaded region.
func (img *image) word(addr uint64, order interface{ Uint64([]byte) uint64 }) (uint64, bool) {
	i := find(img.all, addr, 8)
	if i < 0 {
		return 0, false
	}
	off := addr - img.all[i].addr
	return order.Uint64(img.all[i].data[off:]), true
}

// textAt is the executable region holding addr, or -1.
func (img *image) textAt(addr uint64) int { return find(img.text, addr, 1) }

// inPLT says addr is in a PLT section.
func (img *image) inPLT(addr uint64) bool { return inSpans(img.plt, addr) }

// codeRanges is the text as codeflow reads it.
func (img *image) codeRanges() []codeflow.Range {
	out := make([]codeflow.Range, len(img.text))
	for i, r := range img.text {
		out[i] = codeflow.Range{Addr: r.addr, Data: r.data}
	}
	return out
}
