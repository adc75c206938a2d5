package verify

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// phdrField patches field (byte offset in an Elf64_Phdr: 8 p_offset, 16
// p_vaddr, 32 p_filesz, 40 p_memsz) of the first program header of type t.
func phdrField(t *testing.T, b []byte, typ elf.ProgType, field int, v uint64) {
	t.Helper()
	bo := binary.LittleEndian
	phoff, phnum := bo.Uint64(b[32:]), int(bo.Uint16(b[56:]))
	for i := 0; i < phnum; i++ {
		ph := b[phoff+uint64(i)*56:]
		if elf.ProgType(bo.Uint32(ph)) == typ {
			bo.PutUint64(ph[field:], v)
			return
		}
	}
	t.Fatalf("no program header of type %v", typ)
}

func parse(t *testing.T, b []byte) *elf.File {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCheckLayoutGNU: what GNU ld writes with --gsframe has no layout
// problem, on every machine and type of the committed fixtures.
func TestCheckLayoutGNU(t *testing.T) {
	files, _ := filepath.Glob("../testdata/sframe/v[23]-*")
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".o") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if probs := checkLayout(parse(t, b), b); len(probs) > 0 {
			t.Errorf("%s: %v", name, probs)
		}
		if f, err := elfread.NewFileBytes(b, name); err != nil {
			t.Fatal(err)
		} else if s, err := f.LoaderSFrame(); err != nil || !s.Segment {
			t.Errorf("%s: no .sframe found through PT_GNU_SFRAME (%v)", name, err)
		}
		n++
	}
	if n < 6 {
		t.Fatalf("only %d fixtures", n)
	}
}

// TestCheckLayoutBroken breaks a GNU-linked executable in each way the
// standard tools were seen to break retrofitted files, and expects the
// matching problem.
func TestCheckLayoutBroken(t *testing.T) {
	good, err := os.ReadFile("../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		t.Fatal(err)
	}
	f := parse(t, good)
	var sf, phdr, firstLoad, secondLoad *elf.Prog
	for _, p := range f.Progs {
		switch p.Type {
		case ptGNUSFrame:
			sf = p
		case elf.PT_PHDR:
			phdr = p
		case elf.PT_LOAD:
			if firstLoad == nil {
				firstLoad = p
			} else if secondLoad == nil {
				secondLoad = p
			}
		}
	}
	if sf == nil || phdr == nil || secondLoad == nil {
		t.Fatal("fixture lacks PT_GNU_SFRAME, PT_PHDR or two PT_LOADs")
	}
	sec := f.Section(".sframe")
	bo := binary.LittleEndian
	tests := []struct {
		name string
		mod  func(b []byte)
		want string
	}{
		{"sframe outside loads", func(b []byte) { phdrField(t, b, ptGNUSFrame, 16, 0x900000) }, "sframe-segment"},
		{"sframe other offset", func(b []byte) { phdrField(t, b, ptGNUSFrame, 8, sf.Off+8) }, "sframe-segment"},
		{"sframe segment shorter than the section", func(b []byte) {
			phdrField(t, b, ptGNUSFrame, 32, sec.Size-8)
			phdrField(t, b, ptGNUSFrame, 40, sec.Size-8)
		}, "sframe-section"},
		{"sframe segment empty", func(b []byte) {
			phdrField(t, b, ptGNUSFrame, 32, 0)
			phdrField(t, b, ptGNUSFrame, 40, 0)
		}, "sframe-segment"},
		{"no PT_GNU_SFRAME (eu-strip's PT_NULL)", func(b []byte) { phdrField(t, b, ptGNUSFrame, 0, 0) }, "sframe-segment"},
		{"sframe section bytes elsewhere", func(b []byte) {
			// Section header moved to other bytes; the segment is right.
			shoff := bo.Uint64(b[40:])
			for i := 0; i < int(bo.Uint16(b[60:])); i++ {
				sh := b[shoff+uint64(i)*64:]
				if bo.Uint64(sh[24:]) == sec.Offset && bo.Uint64(sh[16:]) == sec.Addr {
					bo.PutUint64(sh[24:], sec.Offset-16)
				}
			}
		}, "sframe-bytes"},
		{"a section over .sframe's bytes", func(b []byte) {
			// .strtab moved onto the last bytes of .sframe.
			shoff := bo.Uint64(b[40:])
			c := f.Section(".strtab")
			for i := 0; i < int(bo.Uint16(b[60:])); i++ {
				sh := b[shoff+uint64(i)*64:]
				if bo.Uint64(sh[24:]) == c.Offset && bo.Uint64(sh[32:]) == c.Size {
					bo.PutUint64(sh[24:], sec.Offset+sec.Size-4)
				}
			}
		}, "sframe-overlap"},
		{"overlapping loads (BFD's adjusted lma)", func(b []byte) {
			phdrField(t, b, elf.PT_LOAD, 16, secondLoad.Vaddr-firstLoad.Memsz/2) // first PT_LOAD's vaddr
			phdrField(t, b, elf.PT_LOAD, 40, firstLoad.Memsz+0x1000)
		}, "load-overlap"},
		{"PT_PHDR not at e_phoff", func(b []byte) { phdrField(t, b, elf.PT_PHDR, 8, phdr.Off+56) }, "phdr"},
		{"PT_PHDR outside the first load", func(b []byte) { phdrField(t, b, elf.PT_PHDR, 16, secondLoad.Vaddr) }, "phdr"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(good)
			tc.mod(b)
			probs := checkLayout(parse(t, b), b)
			found := false
			for _, p := range probs {
				found = found || p.What == tc.want
			}
			if !found {
				t.Errorf("problems %v, want one of kind %s", probs, tc.want)
			}
		})
	}
}

// TestCheckLayoutAcrossLoads: a section may run on from one PT_LOAD into
// the next when they are back to back in the file and in memory (what
// patchelf writes below an executable's image, converted or not); with a
// gap in either, the part past the first is mapped from elsewhere.
func TestCheckLayoutAcrossLoads(t *testing.T) {
	load := func(off, vaddr, size uint64) *elf.Prog {
		return &elf.Prog{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R, Off: off, Vaddr: vaddr, Paddr: vaddr, Filesz: size, Memsz: size, Align: 0x1000}}
	}
	sec := &elf.Section{SectionHeader: elf.SectionHeader{Name: ".dynstr", Type: elf.SHT_STRTAB, Flags: elf.SHF_ALLOC, Addr: 0x3ff5c0, Offset: 0x5c0, Size: 0x14eb}}
	tests := []struct {
		name  string
		loads []*elf.Prog
		want  bool // a problem is reported
	}{
		{"back to back", []*elf.Prog{load(0, 0x3ff000, 0x1000), load(0x1000, 0x400000, 0x7c9b0)}, false},
		{"gap in memory", []*elf.Prog{load(0, 0x3ff000, 0x1000), load(0x1000, 0x401000, 0x7c9b0)}, true},
		{"gap in the file", []*elf.Prog{load(0, 0x3ff000, 0x1000), load(0x2000, 0x400000, 0x7c9b0)}, true},
		{"runs past the last", []*elf.Prog{load(0, 0x3ff000, 0x1000), load(0x1000, 0x400000, 0x100)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &elf.File{FileHeader: elf.FileHeader{Class: elf.ELFCLASS64, Type: elf.ET_EXEC}, Progs: tc.loads, Sections: []*elf.Section{sec}}
			probs := checkLayout(f, nil)
			if got := len(probs) > 0; got != tc.want {
				t.Errorf("problems %v, want some: %v", probs, tc.want)
			}
		})
	}
}
