package verify

import (
	"bytes"
	"debug/elf"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// PT_GNU_SFRAME and SHT_GNU_SFRAME, as debug/elf types.
const (
	ptGNUSFrame  = elf.ProgType(elfread.PTGNUSFrame)
	shtGNUSFrame = elf.SectionType(elfread.SHTGNUSFrame)
)

// pageSize is the smallest page a loader maps: two PT_LOADs that share one
// overlap in memory even when their byte ranges do not.
const pageSize = 0x1000

// LayoutProblem is one way in which a linked file's layout breaks what a
// loader, the kernel or the standard tools rely on. Strip, objcopy,
// eu-strip and patchelf exit 0 on files they break this way.
type LayoutProblem struct {
	What   string `json:"what"` // a short, stable key: "sframe-segment", "load-overlap", ...
	Detail string `json:"detail"`
}

func (p LayoutProblem) String() string { return "layout: " + p.Detail }

// checkLayout checks the program and section headers of a linked file
// (data is the whole file) where they describe .sframe and the loaded
// image:
//
//   - PT_LOADs sorted by address and not sharing a page;
//   - PT_PHDR inside the first PT_LOAD and at e_phoff, of the table's size;
//   - PT_GNU_SFRAME a loader can read (elfread.LoaderSegment: holding
//     bytes, inside a PT_LOAD and the file) and, when a .sframe section
//     header exists, describing the same bytes at the same address; a
//     .sframe section without PT_GNU_SFRAME, which no loader finds;
//     another section sharing file bytes with .sframe;
//   - every allocated section with contents inside a PT_LOAD at the
//     offset that segment maps it from (or running on into PT_LOADs that
//     follow it back to back in the file and in memory).
//
// Relocatable objects have no layout to check: nil.
func checkLayout(ef *elf.File, data []byte) []LayoutProblem {
	if ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN {
		return nil
	}
	var out []LayoutProblem
	add := func(what, format string, args ...any) {
		out = append(out, LayoutProblem{What: what, Detail: fmt.Sprintf(format, args...)})
	}
	var loads []*elf.Prog
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Memsz > 0 {
			loads = append(loads, p)
		}
	}
	for i := 1; i < len(loads); i++ {
		if loads[i].Vaddr < loads[i-1].Vaddr {
			add("load-order", "PT_LOAD at %#x comes after the one at %#x: loaders expect them sorted by address", loads[i].Vaddr, loads[i-1].Vaddr)
		}
	}
	sorted := append([]*elf.Prog(nil), loads...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Vaddr < sorted[j].Vaddr })
	for i := 1; i < len(sorted); i++ {
		a, b := sorted[i-1], sorted[i]
		if b.Vaddr&^(pageSize-1) < a.Vaddr+a.Memsz {
			add("load-overlap", "PT_LOAD [%#x,%#x) overlaps PT_LOAD [%#x,%#x) (counting whole %#x-byte pages): mapping one clobbers the other", b.Vaddr, b.Vaddr+b.Memsz, a.Vaddr, a.Vaddr+a.Memsz, pageSize)
		}
	}
	// mapped returns the PT_LOAD that maps [addr, addr+size) from the file,
	// and whether it maps it from file offset off.
	mapped := func(addr, size, off uint64) (*elf.Prog, bool) {
		for _, p := range loads {
			if covers(p, addr, size) {
				return p, off-p.Off == addr-p.Vaddr
			}
		}
		return nil, false
	}
	// mappedAcross is mapped for a section that may run on from one
	// PT_LOAD into the next when the two are back to back in the file and
	// in memory: patchelf writes the tables it grows into a page it adds
	// below the image and on into the first segment, and the loader maps
	// the bytes where the section says.
	mappedAcross := func(addr, size, off uint64) (*elf.Prog, bool) {
		if p, ok := mapped(addr, size, off); p != nil {
			return p, ok
		}
		for _, p := range sorted {
			if !covers(p, addr, 0) || addr-p.Vaddr == p.Filesz || off-p.Off != addr-p.Vaddr {
				continue
			}
			end, q := addr+size, p
			for q != nil && q.Vaddr+q.Filesz < end {
				next := (*elf.Prog)(nil)
				for _, r := range sorted {
					if r.Vaddr == q.Vaddr+q.Filesz && r.Off == q.Off+q.Filesz && q.Filesz == q.Memsz {
						next = r
					}
				}
				q = next
			}
			if q != nil {
				return p, true
			}
		}
		return nil, false
	}

	phoff := readPhoff(ef, data)
	phSize := uint64(len(ef.Progs)) * 56
	if ef.Class == elf.ELFCLASS32 {
		phSize = uint64(len(ef.Progs)) * 32
	}
	for _, p := range ef.Progs {
		if p.Type != elf.PT_PHDR {
			continue
		}
		if p.Off != phoff || p.Filesz != phSize {
			add("phdr", "PT_PHDR [%#x,+%#x) does not describe the program header table at e_phoff %#x (%#x bytes)", p.Off, p.Filesz, phoff, phSize)
		}
		if len(sorted) == 0 || p.Vaddr < sorted[0].Vaddr || p.Vaddr-sorted[0].Vaddr > sorted[0].Filesz || p.Filesz > sorted[0].Filesz-(p.Vaddr-sorted[0].Vaddr) || p.Off-sorted[0].Off != p.Vaddr-sorted[0].Vaddr {
			add("phdr", "PT_PHDR at %#x (file offset %#x) is not mapped by the first PT_LOAD: the kernel's AT_PHDR would point elsewhere", p.Vaddr, p.Off)
		}
	}

	checkSFrame(ef, data, mapped, add)

	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_NULL || s.Size == 0 || s.Flags&elf.SHF_TLS != 0 && s.Type == elf.SHT_NOBITS {
			continue
		}
		load, sameOff := mappedAcross(s.Addr, s.Size, s.Offset)
		switch {
		case load == nil:
			add("section-unmapped", "allocated section %s [%#x,%#x) is in no PT_LOAD", s.Name, s.Addr, s.Addr+s.Size)
		case !sameOff:
			add("section-offset", "section %s at %#x has file offset %#x, the PT_LOAD mapping it reads it from %#x", s.Name, s.Addr, s.Offset, load.Off+(s.Addr-load.Vaddr))
		}
	}
	return out
}

// checkSFrame is checkLayout's part on .sframe: PT_GNU_SFRAME against the
// PT_LOADs (mapped) and the section header, the bytes each describes, and
// any other section over them; it reports through add.
func checkSFrame(ef *elf.File, data []byte, mapped func(addr, size, off uint64) (*elf.Prog, bool), add func(what, format string, args ...any)) {
	var sfSegs []*elf.Prog
	for _, p := range ef.Progs {
		if p.Type == ptGNUSFrame {
			sfSegs = append(sfSegs, p)
		}
	}
	var sfSec *elf.Section
	for _, s := range ef.Sections {
		if s.Type == shtGNUSFrame || s.Name == ".sframe" {
			sfSec = s
			break
		}
	}
	if len(sfSegs) > 1 {
		add("sframe-segment", "%d PT_GNU_SFRAME program headers", len(sfSegs))
	}
	if len(sfSegs) == 0 && sfSec != nil && sfSec.Flags&elf.SHF_ALLOC != 0 {
		add("sframe-segment", "section %s at %#x has no PT_GNU_SFRAME: loaders and the kernel will not find it", sfSec.Name, sfSec.Addr)
	}
	for _, p := range sfSegs {
		load, sameOff := mapped(p.Vaddr, p.Filesz, p.Off)
		// Why a loader cannot read it, as dump and the check against the
		// CFI find it.
		_, _, problem := elfread.LoaderSegment(ef, p, int64(len(data)))
		switch {
		case problem != "":
			load = nil
			add("sframe-segment", "%s: the kernel reads SFrame data only through PT_GNU_SFRAME and would find none", problem)
		case load == nil: // in a PT_LOAD of no memory size
			add("sframe-segment", "PT_GNU_SFRAME [%#x,%#x) lies outside every PT_LOAD's file-backed part", p.Vaddr, p.Vaddr+p.Filesz)
		case !sameOff:
			add("sframe-segment", "PT_GNU_SFRAME at %#x says file offset %#x, the PT_LOAD mapping it says %#x", p.Vaddr, p.Off, load.Off+(p.Vaddr-load.Vaddr))
		}
		if p.Memsz != p.Filesz {
			add("sframe-segment", "PT_GNU_SFRAME at %#x: p_memsz %#x differs from p_filesz %#x", p.Vaddr, p.Memsz, p.Filesz)
		}
		if sfSec == nil {
			continue
		}
		// GNU ld sizes PT_GNU_SFRAME before merging the input sections
		// shrinks .sframe: its segment may run on past the section, over
		// zeros (binutils 2.44 to 2.47 do so on every file).
		if sfSec.Addr != p.Vaddr || sfSec.Size > p.Filesz || sfSec.Offset != p.Off {
			add("sframe-section", "section %s [%#x,+%#x) at file offset %#x and PT_GNU_SFRAME [%#x,+%#x) at file offset %#x differ", sfSec.Name, sfSec.Addr, sfSec.Size, sfSec.Offset, p.Vaddr, p.Filesz, p.Off)
		}
		// What a loader reads against what section-based tools read.
		if load != nil && sfSec.Type != elf.SHT_NOBITS {
			seg := fileRange(data, load.Off+(p.Vaddr-load.Vaddr), p.Filesz)
			sec := fileRange(data, sfSec.Offset, sfSec.Size)
			// A segment shorter than the section is reported above.
			n := min(len(sec), len(seg))
			if seg != nil && sec != nil && (!bytes.Equal(seg[:n], sec[:n]) || !zero(seg[n:])) {
				add("sframe-bytes", "the bytes of section %s differ from the ones PT_GNU_SFRAME maps at %#x", sfSec.Name, p.Vaddr)
			}
		}
	}

	if sfSec != nil && sfSec.Type != elf.SHT_NOBITS && sfSec.Size > 0 {
		// A section laid over .sframe's bytes (a tool placing one where
		// it saw free space) changes them when it is written.
		for _, s := range ef.Sections {
			if s == sfSec || s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_NULL || s.Size == 0 {
				continue
			}
			if s.Offset < fileEnd(sfSec.Offset, sfSec.Size) && sfSec.Offset < fileEnd(s.Offset, s.Size) {
				add("sframe-overlap", "section %s (file offset %#x, %#x bytes) shares bytes with %s (file offset %#x, %#x bytes)", s.Name, s.Offset, s.Size, sfSec.Name, sfSec.Offset, sfSec.Size)
			}
		}
	}
}

// fileEnd is off+size, or the largest offset when that overflows (a
// header's values, not checked against the file).
func fileEnd(off, size uint64) uint64 {
	if off+size < off {
		return ^uint64(0)
	}
	return off + size
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// covers reports whether l is a PT_LOAD whose file-backed part holds
// [addr, addr+size).
func covers(l *elf.Prog, addr, size uint64) bool {
	return l.Type == elf.PT_LOAD && addr >= l.Vaddr && addr-l.Vaddr <= l.Filesz && size <= l.Filesz-(addr-l.Vaddr)
}

// fileRange returns data[off:off+size], or nil when that is not inside data.
func fileRange(data []byte, off, size uint64) []byte {
	if off > uint64(len(data)) || size > uint64(len(data))-off {
		return nil
	}
	return data[off : off+size]
}

// readPhoff reads e_phoff from the ELF header (debug/elf does not keep it).
func readPhoff(ef *elf.File, data []byte) uint64 {
	if len(data) < 64 {
		return 0
	}
	if ef.Class == elf.ELFCLASS32 {
		return uint64(ef.ByteOrder.Uint32(data[28:]))
	}
	return ef.ByteOrder.Uint64(data[32:])
}
