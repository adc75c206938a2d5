package codeflow

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// image is a linked test program: its code for Analyze and its symbols.
type image struct {
	code *Code
	syms map[string]uint64
}

// loadELF reads a linked x86-64 file: .text (and every executable
// section) as code, read-only sections for jump tables, STT_FUNC symbols
// as entries.
func loadELF(t *testing.T, path string) *image {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	im := &image{code: &Code{Machine: f.Machine, Order: binary.LittleEndian}, syms: map[string]uint64{}}
	var ro []Range
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_ALLOC == 0 {
			continue
		}
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		if s.Flags&elf.SHF_EXECINSTR != 0 {
			im.code.Text = append(im.code.Text, Range{s.Addr, d})
		} else if s.Flags&elf.SHF_WRITE == 0 {
			ro = append(ro, Range{s.Addr, d})
		}
	}
	sort.Slice(im.code.Text, func(i, j int) bool { return im.code.Text[i].Addr < im.code.Text[j].Addr })
	im.code.Read = func(addr uint64, n int) []byte {
		for _, r := range ro {
			if addr >= r.Addr && addr+uint64(n) <= r.Addr+uint64(len(r.Data)) {
				return r.Data[addr-r.Addr : addr-r.Addr+uint64(n)]
			}
		}
		return nil
	}
	syms, _ := f.Symbols()
	seen := map[uint64]bool{}
	for _, s := range syms {
		im.syms[s.Name] = s.Value
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && !seen[s.Value] {
			seen[s.Value] = true
			e := Entry{Addr: s.Value, Source: FromSymbol}
			if strings.HasPrefix(s.Name, "pad_") {
				e.Source = FromPadding // as if found only after padding
			}
			if strings.HasPrefix(s.Name, "ptr_") {
				e.Source = FromPointer // as if found only by a pointer
			}
			if s.Size > 0 {
				e.End = s.Value + s.Size
			}
			im.code.Entries = append(im.code.Entries, e)
		}
	}
	sort.Slice(im.code.Entries, func(i, j int) bool { return im.code.Entries[i].Addr < im.code.Entries[j].Addr })
	return im
}

// assemble assembles and links AT&T source (functions declared with
// fn NAME, which gives .type and .size) into a static program.
func assemble(t *testing.T, src string) *image {
	t.Helper()
	for _, tool := range []string{"as", "ld"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found", tool)
		}
	}
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString(".text\n")
	var open string
	closeFn := func() {
		if open != "" {
			fmt.Fprintf(&b, ".size %s, .-%s\n", open, open)
			open = ""
		}
	}
	for _, line := range strings.Split(src, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "fn "):
			closeFn()
			open = strings.TrimSpace(l[3:])
			fmt.Fprintf(&b, ".globl %s\n.type %s,@function\n%s:\n", open, open, open)
		case l == "endfn" || strings.HasPrefix(l, ".section"):
			closeFn()
			if l != "endfn" {
				b.WriteString(l + "\n")
			}
		default:
			b.WriteString(l + "\n")
		}
	}
	closeFn()
	s := filepath.Join(dir, "a.s")
	if err := os.WriteFile(s, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"as", "--64", "-o", filepath.Join(dir, "a.o"), s},
		{"ld", "-static", "-e", "0", "-o", filepath.Join(dir, "a.out"), filepath.Join(dir, "a.o")},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s\n%s", cmd, err, out, b.String())
		}
	}
	return loadELF(t, filepath.Join(dir, "a.out"))
}

// result is what Analyze gave.
type result struct {
	funcs []Func
	skips []Skip
}

func analyze(c *Code) *result {
	r := &result{}
	Analyze(c, func(f Func) { r.funcs = append(r.funcs, f) }, func(s Skip) { r.skips = append(r.skips, s) })
	return r
}

// rowAt is the row in effect at pc, nil when no Func covers it.
func (r *result) rowAt(pc uint64) *Row {
	for i := range r.funcs {
		f := &r.funcs[i]
		if pc < f.Start || pc >= f.End {
			continue
		}
		k := sort.Search(len(f.Rows), func(k int) bool { return f.Rows[k].PC > pc }) - 1
		if k < 0 {
			return nil
		}
		return &f.Rows[k]
	}
	return nil
}

// short writes a row as "sp+16 fp@-16" (base, CFA offset, where the
// caller's frame pointer is when not in its register).
func short(r *Row) string {
	if r == nil {
		return "none"
	}
	base := "sp"
	if r.Base == BaseFP {
		base = "fp"
	}
	s := fmt.Sprintf("%s%+d", base, r.CFAOff)
	if r.FP.Where == OnStack {
		s += fmt.Sprintf(" fp@%d", r.FP.Off)
	}
	return s
}
