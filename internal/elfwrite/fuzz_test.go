package elfwrite

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"testing"
)

// FuzzPlan checks that no input makes NewPlan or Bytes panic, and that any
// accepted input yields an output debug/elf can read with the section in
// place.
func FuzzPlan(f *testing.F) {
	for _, s := range []synth{
		{ptPhdr: true, sections: true},
		{be: true, machine: emAArch64, align: 0x10000},
		{ptPhdr: true, sections: true, slack: 2 * phdrSize},
		{sections: true, sfSection: true, sfSegment: true},
	} {
		f.Add(s.build(), uint16(24), false)
	}
	for _, name := range []string{"tiny-x86_64", "tiny-aarch64-pie"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b, uint16(28), false)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, size uint16, replace bool) {
		p, err := NewPlan(in, uint64(size), Options{Replace: replace, MaxPad: 1 << 16})
		if err != nil {
			return
		}
		if p.OutputSize > uint64(len(in))+uint64(size)+1<<17 {
			t.Fatalf("output of %d bytes for a %d-byte input", p.OutputSize, len(in))
		}
		data := bytes.Repeat([]byte{0x5a}, int(size))
		out, err := p.Bytes(data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out[p.Offset:p.Offset+uint64(size)], data) {
			t.Fatal("section data not at the planned offset")
		}
		var w bytes.Buffer
		if err := p.Write(&w, data); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), out) {
			t.Fatal("Write and Bytes differ")
		}
		if _, err := elf.NewFile(bytes.NewReader(in)); err != nil {
			return // debug/elf is stricter in places; only compare when it reads the input
		}
		of, err := elf.NewFile(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("output unreadable by debug/elf: %v", err)
		}
		found := false
		for _, pr := range of.Progs {
			if pr.Type == progGNUSFrame && pr.Off == p.Offset && pr.Vaddr == p.Addr && pr.Filesz == uint64(size) {
				found = true
			}
		}
		if !found {
			t.Fatal("no PT_GNU_SFRAME describing the new data")
		}
	})
}
