package elfwrite

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

const (
	progGNUSFrame = elf.ProgType(ptGNUSFrame)
	sectGNUSFrame = elf.SectionType(shtGNUSFrame)
)

// parsePlanned parses the input and the output with debug/elf and checks
// the output's size against the plan.
func parsePlanned(t *testing.T, in, out []byte, p *Plan) (inF, f *elf.File) {
	t.Helper()
	inF, err := elf.NewFile(bytes.NewReader(in))
	if err != nil {
		t.Fatalf("input does not parse with debug/elf: %v", err)
	}
	f, err = elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("output does not parse with debug/elf: %v", err)
	}
	if uint64(len(out)) != p.OutputSize {
		t.Errorf("output is %d bytes, plan said %d", len(out), p.OutputSize)
	}
	return inF, f
}

// checkOutput verifies, independently of the planner, that out is in with
// data inserted as .sframe the way the package promises.
func checkOutput(t *testing.T, in, out []byte, p *Plan, data []byte) {
	t.Helper()
	var w bytes.Buffer
	if err := p.Write(&w, data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if !bytes.Equal(w.Bytes(), out) {
		t.Fatalf("Write and Bytes differ")
	}
	if got := writeFile(t, in, p, data); !bytes.Equal(got, out) {
		t.Fatalf("WriteFile and Bytes differ")
	}
	for _, wrong := range []bool{false, true} {
		if got := writeFileAfter(t, in, p, data, wrong); !bytes.Equal(got, out) {
			t.Fatalf("WriteFileAfter (wrong early runs: %v) and Bytes differ", wrong)
		}
	}
	if !p.fragile {
		checkLinkerOutput(t, in, out, p, data)
		return
	}
	inF, f := parsePlanned(t, in, out, p)
	bo := f.ByteOrder
	phoff := bo.Uint64(out[32:])
	phnum := uint64(bo.Uint16(out[56:]))
	if phnum != uint64(len(f.Progs)) {
		t.Errorf("e_phnum %d, debug/elf saw %d", phnum, len(f.Progs))
	}
	if want := len(inF.Progs) + 2; !hasProg(inF, progGNUSFrame) && len(f.Progs) != want {
		t.Errorf("%d program headers, want %d", len(f.Progs), want)
	}

	// PT_LOADs sorted, the new one last and above everything else.
	var loads []*elf.Prog
	var sfs []*elf.Prog
	for _, pr := range f.Progs {
		switch pr.Type {
		case elf.PT_LOAD:
			loads = append(loads, pr)
		case progGNUSFrame:
			sfs = append(sfs, pr)
		}
	}
	for i := 1; i < len(loads); i++ {
		if loads[i].Vaddr <= loads[i-1].Vaddr {
			t.Errorf("PT_LOADs not sorted: %#x after %#x", loads[i].Vaddr, loads[i-1].Vaddr)
		}
	}
	nl := loads[len(loads)-1]
	if nl.Vaddr != p.SegmentAddr || nl.Off != p.SegmentOffset || nl.Filesz != p.SegmentSize || nl.Memsz != p.SegmentSize {
		t.Errorf("new PT_LOAD %+v does not match plan %+v", nl.ProgHeader, *p)
	}
	if nl.Flags != elf.PF_R {
		t.Errorf("new PT_LOAD flags %v, want R", nl.Flags)
	}
	if nl.Align == 0 || nl.Vaddr%nl.Align != nl.Off%nl.Align {
		t.Errorf("new PT_LOAD offset %#x and vaddr %#x not congruent modulo %#x", nl.Off, nl.Vaddr, nl.Align)
	}
	for _, pr := range inF.Progs {
		if pr.Type == elf.PT_LOAD && pr.Align > nl.Align {
			t.Errorf("new PT_LOAD align %#x below existing %#x", nl.Align, pr.Align)
		}
		if end := pr.Vaddr + pr.Memsz; end > nl.Vaddr&^(nl.Align-1) && pr.Memsz > 0 {
			t.Errorf("new PT_LOAD page %#x overlaps existing segment ending at %#x", nl.Vaddr, end)
		}
	}

	// PT_GNU_SFRAME covers exactly the data, inside the new PT_LOAD.
	if len(sfs) != 1 {
		t.Fatalf("%d PT_GNU_SFRAME headers, want 1", len(sfs))
	}
	sf := sfs[0]
	if sf.Off != p.Offset || sf.Vaddr != p.Addr || sf.Filesz != uint64(len(data)) || sf.Memsz != uint64(len(data)) || sf.Align != 8 {
		t.Errorf("PT_GNU_SFRAME %+v, want off %#x vaddr %#x size %#x align 8", sf.ProgHeader, p.Offset, p.Addr, len(data))
	}
	if sf.Off < nl.Off || sf.Off+sf.Filesz > nl.Off+nl.Filesz || sf.Vaddr-nl.Vaddr != sf.Off-nl.Off {
		t.Errorf("PT_GNU_SFRAME %+v is not inside the new PT_LOAD %+v", sf.ProgHeader, nl.ProgHeader)
	}
	if sf.Off%8 != 0 {
		t.Errorf("sframe data at unaligned offset %#x", sf.Off)
	}
	if got := out[p.Offset : p.Offset+uint64(len(data))]; !bytes.Equal(got, data) {
		t.Errorf("sframe bytes at %#x differ from the data", p.Offset)
	}

	// The program header table is mapped by a PT_LOAD, PT_PHDR describes it.
	phSize := phnum * phdrSize
	if !coveredByLoad(f, phoff, phSize) && coveredByLoad(inF, bo.Uint64(in[32:]), uint64(len(inF.Progs))*phdrSize) {
		t.Errorf("program header table [%#x,+%#x) is no longer covered by a PT_LOAD", phoff, phSize)
	}
	if hasProg(inF, elf.PT_PHDR) {
		ph := f.Progs[0]
		if ph.Type != elf.PT_PHDR {
			t.Errorf("first program header is %v, want PT_PHDR", ph.Type)
		}
		if ph.Off != phoff || ph.Filesz != phSize || ph.Memsz != phSize {
			t.Errorf("PT_PHDR %+v does not describe the table at %#x size %#x", ph.ProgHeader, phoff, phSize)
		}
		if l := loadFor(f, ph.Off, ph.Filesz); l == nil || ph.Vaddr-l.Vaddr != ph.Off-l.Off {
			t.Errorf("PT_PHDR %+v not mapped consistently by a PT_LOAD", ph.ProgHeader)
		}
	}

	// Sections.
	if len(inF.Sections) > 0 {
		if len(f.Sections) != len(inF.Sections)+1 && inF.Section(SectionName) == nil {
			t.Errorf("%d sections, want %d", len(f.Sections), len(inF.Sections)+1)
		}
		for i, s := range inF.Sections {
			o := f.Sections[i]
			if i == 0 || s.Name == SectionName || s.Type == sectGNUSFrame {
				continue // section 0 may carry the extended section count
			}
			if i == int(inF.ByteOrder.Uint16(in[62:])) {
				// The name table may be a longer copy elsewhere.
				old, _ := s.Data()
				cur, _ := o.Data()
				if s.Name != o.Name || !bytes.HasPrefix(cur, old) {
					t.Errorf("section name table %d does not extend the old one", i)
				}
				continue
			}
			if s.Name != o.Name || s.Type != o.Type || s.Addr != o.Addr || s.Size != o.Size || s.Offset != o.Offset {
				t.Errorf("section %d changed: %+v -> %+v", i, s.SectionHeader, o.SectionHeader)
			}
		}
		s := f.Section(SectionName)
		if s == nil {
			t.Fatalf("no %s section in the output", SectionName)
		}
		if s.Type != sectGNUSFrame || s.Flags != elf.SHF_ALLOC || s.Addr != p.Addr || s.Offset != p.Offset || s.Size != uint64(len(data)) || s.Addralign != 8 {
			t.Errorf("%s header %+v, want GNU_SFRAME/ALLOC at %#x off %#x size %#x align 8", SectionName, s.SectionHeader, p.Addr, p.Offset, len(data))
		}
	}

	// No existing byte changed outside the headers.
	allowed := func(i uint64) bool {
		if i < ehdrSize {
			return true
		}
		inPhoff := binary.ByteOrder(inF.ByteOrder).Uint64(in[32:])
		if i >= inPhoff && i < inPhoff+phSize && phoff == inPhoff {
			return true
		}
		inShoff := inF.ByteOrder.Uint64(in[40:])
		return inShoff != 0 && i >= inShoff && i < inShoff+uint64(len(inF.Sections))*shdrSize
	}
	for i := range uint64(len(in)) {
		if in[i] != out[i] && !allowed(i) {
			t.Fatalf("input byte at %#x changed from %#x to %#x", i, in[i], out[i])
		}
	}
}

func hasProg(f *elf.File, typ elf.ProgType) bool {
	for _, p := range f.Progs {
		if p.Type == typ {
			return true
		}
	}
	return false
}

func loadFor(f *elf.File, off, size uint64) *elf.Prog {
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= off && off+size <= p.Off+p.Filesz {
			return p
		}
	}
	return nil
}

func coveredByLoad(f *elf.File, off, size uint64) bool { return loadFor(f, off, size) != nil }

// checkLinkerOutput verifies the linker-like layout independently of the
// planner: the program header table where it was, mapped by the first
// PT_LOAD; loads sorted and disjoint; .sframe and PT_GNU_SFRAME the same
// bytes in the new last PT_LOAD; every input section present with its
// address and contents, except the moved ones, which keep their contents at
// a new address inside the new segment; section headers sorted by offset;
// no loaded byte of the input changed outside the headers, the moved block
// and .dynamic/.dynsym.
func checkLinkerOutput(t *testing.T, in, out []byte, p *Plan, data []byte) {
	t.Helper()
	inF, f := parsePlanned(t, in, out, p)
	bo := f.ByteOrder
	if got, want := bo.Uint64(out[32:]), inF.ByteOrder.Uint64(in[32:]); got != want {
		t.Errorf("e_phoff moved from %#x to %#x", want, got)
	}
	phoff := bo.Uint64(out[32:])
	phSize := uint64(len(f.Progs)) * phdrSize
	var loads []*elf.Prog
	var sf *elf.Prog
	for _, pr := range f.Progs {
		switch pr.Type {
		case elf.PT_LOAD:
			loads = append(loads, pr)
		case progGNUSFrame:
			if sf != nil {
				t.Errorf("two PT_GNU_SFRAME")
			}
			sf = pr
		case elf.PT_PHDR:
			if pr.Off != phoff || pr.Filesz != phSize {
				t.Errorf("PT_PHDR %+v does not describe the table at %#x size %#x", pr.ProgHeader, phoff, phSize)
			}
		}
	}
	if len(loads) == 0 || loads[0].Off > phoff || phoff+phSize > loads[0].Off+loads[0].Filesz {
		t.Errorf("program header table [%#x,+%#x) is not inside the first PT_LOAD", phoff, phSize)
	}
	for i := 1; i < len(loads); i++ {
		a, b := loads[i-1], loads[i]
		if b.Vaddr&^(b.Align-1) < a.Vaddr+a.Memsz {
			t.Errorf("PT_LOAD at %#x overlaps the one at %#x (ends %#x)", b.Vaddr, a.Vaddr, a.Vaddr+a.Memsz)
		}
	}
	nl := loads[len(loads)-1]
	if nl.Off != p.SegmentOffset || nl.Vaddr != p.SegmentAddr || nl.Filesz != p.SegmentSize || nl.Flags != elf.PF_R || nl.Vaddr%nl.Align != nl.Off%nl.Align {
		t.Errorf("new PT_LOAD %+v, plan %+v", nl.ProgHeader, *p)
	}
	if sf == nil || sf.Off != p.Offset || sf.Vaddr != p.Addr || sf.Filesz != uint64(len(data)) || sf.Off < nl.Off || sf.Off+sf.Filesz > nl.Off+nl.Filesz || sf.Vaddr-nl.Vaddr != sf.Off-nl.Off {
		t.Errorf("PT_GNU_SFRAME %+v not the data inside the new PT_LOAD %+v", sf, nl.ProgHeader)
	}
	if !bytes.Equal(out[p.Offset:p.Offset+uint64(len(data))], data) {
		t.Errorf("sframe bytes differ")
	}
	if len(inF.Sections) == 0 {
		return
	}
	sec := f.Section(SectionName)
	if sec == nil || sec.Addr != p.Addr || sec.Offset != p.Offset || sec.Size != uint64(len(data)) || sec.Type != sectGNUSFrame {
		t.Errorf("%s section %+v does not match PT_GNU_SFRAME", SectionName, sec)
	}
	// Sections with file contents are sorted by offset (mold gives its
	// NOBITS sections offset 0; the output keeps the linker's value).
	var prev *elf.Section
	for _, s := range f.Sections[1:] {
		if s.Type == elf.SHT_NOBITS {
			continue
		}
		if prev != nil && s.Offset < prev.Offset {
			t.Errorf("section headers not sorted by offset: %s at %#x after %s at %#x", s.Name, s.Offset, prev.Name, prev.Offset)
		}
		prev = s
	}
	moved := map[string]bool{}
	for _, m := range p.Moved {
		moved[m] = true
	}
	for _, s := range inF.Sections[1:] {
		if s.Name == SectionName || s.Type == sectGNUSFrame || s.Name == ".shstrtab" {
			continue
		}
		o := f.Section(s.Name)
		if o == nil {
			t.Errorf("section %s lost", s.Name)
			continue
		}
		if o.Type != s.Type || o.Size != s.Size || o.Flags != s.Flags {
			t.Errorf("section %s changed: %+v -> %+v", s.Name, s.SectionHeader, o.SectionHeader)
		}
		if moved[s.Name] {
			if o.Offset < nl.Off || o.Offset+o.Size > nl.Off+nl.Filesz || o.Addr-nl.Vaddr != o.Offset-nl.Off {
				t.Errorf("moved section %s %+v not inside the new PT_LOAD", s.Name, o.SectionHeader)
			}
		} else if o.Addr != s.Addr {
			t.Errorf("section %s moved from %#x to %#x", s.Name, s.Addr, o.Addr)
		}
		if s.Type == elf.SHT_NOBITS || s.Type == elf.SHT_SYMTAB || s.Type == elf.SHT_DYNSYM || s.Type == elf.SHT_DYNAMIC {
			continue
		}
		a, _ := s.Data()
		b, _ := o.Data()
		if !bytes.Equal(a, b) {
			t.Errorf("section %s contents changed", s.Name)
		}
	}
}

// writeFile runs Plan.WriteFile from a file holding in, copying every
// unpatched run file to file however short, and returns what it wrote.
func writeFile(t *testing.T, in []byte, p *Plan, data []byte) []byte {
	t.Helper()
	src, dst, restore := copyFiles(t, in)
	defer restore()
	if err := p.WriteFile(dst, src, data); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	return readBack(t, dst)
}

// copyFiles returns a file holding in and an empty output file, both
// closed when t ends, and sets every unpatched run to be copied file to
// file however short (minFileCopy, minWhole) until restore is called.
func copyFiles(t *testing.T, in []byte) (src, dst *os.File, restore func()) {
	t.Helper()
	dir := t.TempDir()
	src, err := os.Create(filepath.Join(dir, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	if _, err := src.Write(in); err != nil {
		t.Fatal(err)
	}
	dst, err = os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dst.Close() })
	old, oldWhole := minFileCopy, minWhole
	minFileCopy, minWhole = 1, 1
	return src, dst, func() { minFileCopy, minWhole = old, oldWhole }
}

// readBack returns what f holds.
func readBack(t *testing.T, f *os.File) []byte {
	t.Helper()
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return out
}
