package gopclntab_test

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/gocfi"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/pclntest"
)

const (
	textAddr    = 0x401000
	tableAddr   = 0x500000
	noptrAddr   = 0x600000
	funcnameOff = 0x48 // funcnametab follows a Go 1.20 64-bit header (8 + 8 words)
)

func goTable(order binary.ByteOrder, ptr int, textStart uint64) []byte {
	return pclntest.Write(pclntest.Table{
		Magic: pclntest.Magic120, Order: order, PtrSize: ptr, Quantum: 1, TextStart: textStart,
		Funcs: []pclntest.Func{
			{Name: "main.main", Off: 0x10, PCSP: pclntest.PCValue(1, pclntest.R(0, 4), pclntest.R(24, 12))},
			{Name: "main.f", Off: 0x20, PCSP: pclntest.PCValue(1, pclntest.R(0, 16))},
		},
		End: 0x30,
	})
}

// goELF is a small Go 1.26-like executable: the table's text start is 0,
// the moduledata in .noptrdata gives it, in its words or (rela) only in
// R_X86_64_RELATIVE relocations, as lld leaves a PIE.
func goELF(rela bool) []byte {
	le := binary.LittleEndian
	table := goTable(le, 8, 0)
	md := make([]byte, 30*8)
	words := map[int]uint64{0: tableAddr, 1: tableAddr + funcnameOff, 22: textAddr + 0x100}
	var relocs []byte
	for w, v := range words {
		if rela {
			relocs = le.AppendUint64(relocs, noptrAddr+uint64(8*w))
			relocs = le.AppendUint64(relocs, uint64(elf.R_X86_64_RELATIVE))
			relocs = le.AppendUint64(relocs, v)
		} else {
			le.PutUint64(md[8*w:], v)
		}
	}
	secs := []pclntest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: textAddr, Data: make([]byte, 0x200)},
		{Name: ".gopclntab", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: tableAddr, Data: table},
		{Name: ".noptrdata", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_WRITE, Addr: noptrAddr, Data: md},
	}
	if rela {
		secs = append(secs, pclntest.Section{Name: ".rela.dyn", Type: elf.SHT_RELA, Flags: elf.SHF_ALLOC, Addr: 0x300000, Data: relocs})
	}
	return pclntest.ELF(le, 8, elf.EM_X86_64, secs)
}

// TestModuledata: the text start of a Go 1.26 table comes from the
// moduledata, whose words are in the file or only in its relocations.
func TestModuledata(t *testing.T) {
	for _, rela := range []bool{false, true} {
		tab, err := gopclntab.OpenBytes(goELF(rela))
		if err != nil {
			t.Fatal(err)
		}
		f, err := tab.Func(0)
		if err != nil {
			t.Fatal(err)
		}
		if tab.TextStart() != textAddr+0x100 || f.Entry != textAddr+0x110 || f.Name != "main.main" {
			t.Errorf("rela %v: text start %#x, %s at %#x", rela, tab.TextStart(), f.Name, f.Entry)
		}
	}
	// Neither: the table cannot be placed.
	le := binary.LittleEndian
	noText := pclntest.ELF(le, 8, elf.EM_X86_64, []pclntest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: textAddr, Data: make([]byte, 0x200)},
		{Name: ".gopclntab", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: tableAddr, Data: goTable(le, 8, 0)},
	})
	_, err := gopclntab.OpenBytes(noText)
	var e *gopclntab.Error
	if !errors.As(err, &e) || e.Error() != "gopclntab: header at 0x18: no text start puts the functions in executable code (tried header 0x0, moduledata 0x0, runtime.text 0x0)" {
		t.Errorf("error %v", err)
	}
	// A wrong header text start (outside .text) is passed over.
	wrong := pclntest.ELF(le, 8, elf.EM_X86_64, []pclntest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: textAddr, Data: make([]byte, 0x200)},
		{Name: ".gopclntab", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: tableAddr, Data: goTable(le, 8, 0x900000)},
	})
	_, err = gopclntab.OpenBytes(wrong)
	if err == nil {
		t.Error("a text start outside the code was taken")
	}
}

// FuzzParse reads arbitrary bytes as a table (the first byte picks the
// machine and whether the rest is a table or an ELF file) and reads every
// function, its pcsp rows and its synthetic call-frame information: no
// input may panic, rows must tile their function from its entry, and the
// image stays within four times the table's size.
func FuzzParse(f *testing.F) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, ptr := range []int{4, 8} {
			for _, m := range []uint32{pclntest.Magic116, pclntest.Magic118, pclntest.Magic120} {
				t := pclntest.Table{Magic: m, Order: order, PtrSize: ptr, Quantum: 4, TextStart: textAddr,
					Funcs: []pclntest.Func{
						{Name: "runtime.goexit", Off: 0, Flag: 1, PCSP: pclntest.PCValue(4, pclntest.R(0, 8), pclntest.R(16, 4))},
						{Name: "main.main", Off: 16, PCSP: pclntest.PCValue(4, pclntest.R(0, 4), pclntest.R(-16, 400))},
					},
					End: 512}
				f.Add(append([]byte{byte(ptr)}, pclntest.Write(t)...))
			}
		}
	}
	f.Add(append([]byte{0x80}, goELF(false)...))
	f.Add(append([]byte{0x81}, goELF(true)...))
	machines := []elf.Machine{elf.EM_X86_64, elf.EM_AARCH64, elf.EM_S390, elf.EM_386}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		m := machines[in[0]&3]
		var tab *gopclntab.Table
		var err error
		if in[0]&0x80 != 0 {
			tab, err = gopclntab.OpenBytes(in[1:])
		} else {
			tab, err = gopclntab.Parse(in[1:], textAddr)
			var e *gopclntab.Error
			if err != nil && !errors.As(err, &e) {
				t.Fatalf("error %v (%T), not an *Error", err, err)
			}
		}
		if err != nil {
			return
		}
		for fn, err := range tab.Funcs() {
			if err != nil {
				continue
			}
			pc := fn.Entry
			it := fn.PCSP()
			for v, ok := it.Next(); ok; v, ok = it.Next() {
				if v.PC != pc || v.End < v.PC || v.End > fn.End {
					t.Fatalf("%s [%#x, %#x): row [%#x, %#x) after %#x", fn.Name, fn.Entry, fn.End, v.PC, v.End, pc)
				}
				pc = v.End
			}
		}
		img, _, err := gocfi.DebugFrame(tab, m, nil)
		if err == nil && len(img) > 4*tab.Size()+1<<16 {
			t.Fatalf("image of %d bytes for a table of %d", len(img), tab.Size())
		}
	})
}
