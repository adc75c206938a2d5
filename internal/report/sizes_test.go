package report

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/allfuncs"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/callsite"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// whole is convertV done another way: every table executed at once
// (tables), the functions kept and encoded with sframe.Encode; figures
// reads the section back.
func whole(t *testing.T, ef *elf.File, tables []*cfi.Table, plts []translate.PLT, v uint8, pad *callsite.ReturnPad) *encoded {
	t.Helper()
	b, tr := encodeTables(t, ef, tables, plts, v, pad)
	e, err := figures(b, 0, tr, plts)
	if err != nil {
		t.Fatal(err)
	}
	// The counts figures takes function by function are the header's.
	tb, err := sframe.Open(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h := tb.Header; e.funcs != int(h.NumFDEs) || e.heldFREs != int(h.NumFREs) || e.fres < e.heldFREs || e.freType[0]+e.freType[1]+e.freType[2] != e.funcs ||
		e.wordSize[0]+e.wordSize[1]+e.wordSize[2] > e.fres {
		t.Fatalf("figures %+v, header %d FDEs, %d FREs", e, h.NumFDEs, h.NumFREs)
	}
	if e.unshared < e.size || e.blocks > e.funcs || (e.blocks < e.funcs) != (e.unshared > e.size) {
		t.Fatalf("%d blocks for %d functions, %d bytes unshared for %d", e.blocks, e.funcs, e.unshared, e.size)
	}
	return e
}

// encodeTables translates and encodes tables as whole does: the section
// and the translation.
func encodeTables(t *testing.T, ef *elf.File, tables []*cfi.Table, plts []translate.PLT, v uint8, pad *callsite.ReturnPad) ([]byte, *translate.Result) {
	t.Helper()
	tl, err := translate.New(translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, PLTs: plts}, translate.Options{Version: v, SignalOutermost: true}) // convert's default
	if err != nil {
		t.Fatal(err)
	}
	b, tr, err := allfuncs.Section(tl, tables, sframe.Options{Version: v, Order: ef.ByteOrder, PCRel: true, Sort: true,
		Share: ef.ByteOrder == binary.LittleEndian}, pad) // as convert shares
	if err != nil {
		t.Fatal(err)
	}
	return b, tr
}

// TestFiguresMatchWhole: the figures Analyze takes from the conversion
// (convert, the FDEs executed one at a time, the section read back one
// function at a time) are those of the decoded section of the whole file,
// on the fixtures (PLTs, AArch64, both byte orders) and the system's
// libc, in both versions.
func TestFiguresMatchWhole(t *testing.T) {
	names, err := filepath.Glob("../../testdata/sframe/v[23]-*")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, "../../testdata/example/hello", "/lib/x86_64-linux-gnu/libc.so.6")
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".o") {
			continue
		}
		b, err := os.ReadFile(name)
		if os.IsNotExist(err) && strings.HasPrefix(name, "/lib") {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := elfread.NewFile(bytes.NewReader(b), name)
		if err != nil {
			t.Fatal(err)
		}
		if m := f.ELF.Machine; m != elf.EM_X86_64 && m != elf.EM_AARCH64 {
			continue // translate does not convert it
		}
		cf, err := cfi.Open(f.ELF)
		if err != nil {
			t.Fatal(err)
		}
		tables, _ := alltables.Execute(cf)
		plts := pltfind.Sections(f.ELF)
		entries := cf.Entries()
		cfi.SortEntries(entries)
		pad := callsite.NewReturnPad(f.ELF, b, entries) // as a conversion applies it
		conv, err := convert.NewFile(name, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []uint8{sframe.Version3, sframe.Version2} {
			got, err := convertV(conv, plts, v, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(whole(t, f.ELF, tables, plts, v, pad), got, cmp.AllowUnexported(encoded{})); diff != "" {
				t.Errorf("%s V%d (-whole +conversion's figures):\n%s", name, v, diff)
			}
		}
		conv.Close()
		n++
	}
	if n < 10 {
		t.Fatalf("only %d files", n)
	}
}

// TestFiguresOverlaps: for FDEs that overlap, nest, share a start, have
// no size or no address, in any order, the figures read one function at a
// time from the section (figures) are those of the decoded section.
func TestFiguresOverlaps(t *testing.T) {
	// CFA rsp+8, RA at CFA-8; then (advance 1) CFA rsp+16; then
	// (advance 300) CFA rsp+0x12345, which needs 4-byte data words.
	cie := &cfi.CIE{CodeAlign: 1, DataAlign: -8, RAColumn: 16, Initial: []byte{0x0c, 7, 8, 0x90, 1}}
	prog := []byte{0x41, 0x0e, 0x10, 0x03, 0x2c, 0x01, 0x0e, 0xc5, 0xc6, 0x04}
	ef := &elf.File{FileHeader: elf.FileHeader{Machine: elf.EM_X86_64, ByteOrder: binary.LittleEndian}}
	var ctx cfi.Context
	rng := rand.New(rand.NewSource(1))
	overlaps, funcs := 0, 0
	for round := 0; round < 20; round++ {
		var tables []*cfi.Table
		for i := 0; i < 40; i++ {
			start := uint64(0x1000 + rng.Intn(0x3000))
			size := uint64(rng.Intn(0x400))
			switch rng.Intn(10) {
			case 0:
				start = 0
			case 1:
				size = 0
			}
			tab := &cfi.Table{}
			if err := ctx.Execute(&cfi.FDE{CIE: cie, Start: start, Size: size, Program: prog}, tab); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, tab)
		}
		for _, v := range []uint8{sframe.Version3, sframe.Version2} {
			want := whole(t, ef, tables, nil, v, nil)
			sec, tr := encodeTables(t, ef, tables, nil, v, nil)
			got, err := figures(sec, 0, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(encoded{})); diff != "" {
				t.Errorf("round %d V%d (-whole +encoder's figures):\n%s", round, v, diff)
			}
			overlaps += got.skipped[string(translate.Overlap)]
			funcs += got.funcs
		}
	}
	if overlaps == 0 || funcs == 0 {
		t.Fatalf("%d overlaps, %d functions: the FDEs test nothing", overlaps, funcs)
	}
}
