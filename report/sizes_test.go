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
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// whole is translateEncode done the direct way: one Translate and one
// Encode of the whole file, then the section decoded.
func whole(t *testing.T, ef *elf.File, st *cfi.Stream, plts []translate.PLT, v uint8) *encoded {
	t.Helper()
	errs := len(st.Errors)
	in := translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, FDEs: st.FDEs, Exec: st.Execute, PLTs: plts}
	if st.FDEs == nil {
		in.FDEs, in.Exec, in.Entries, in.ExecEntry = nil, nil, st.Entries, st.ExecuteEntry
	}
	tr, err := translate.Translate(in, translate.Options{Version: v})
	st.Errors = st.Errors[:errs]
	if err != nil {
		t.Fatal(err)
	}
	b, err := sframe.Encode(tr.Funcs, sframe.Options{Version: v, ABI: tr.ABI, Order: ef.ByteOrder, PCRel: true, Sort: true, CFAFixedFP: tr.CFAFixedFP, CFAFixedRA: tr.CFAFixedRA})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sframe.Decode(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := &encoded{size: uint64(len(b)), funcs: len(sec.FDEs), converted: tr.Converted, skipped: map[string]int{}}
	for _, d := range tr.Diags {
		if d.Skipped {
			e.skipped[string(d.Reason)]++
		}
	}
	for _, fn := range tr.Funcs {
		if !inPLT(fn.Start, plts) {
			e.codeBytes += uint64(fn.Size)
		}
	}
	for _, d := range sec.FDEs {
		e.freType[d.FREType]++
		for _, f := range d.FREs {
			e.fres++
			e.wordSize[f.WordSize/2]++
		}
	}
	return e
}

// checkPieces compares translateEncode cut into pieces of 1, 3 and the
// default number of FDEs with the whole-file computation.
// It returns the whole-file V3 figures.
func checkPieces(t *testing.T, name string, ef *elf.File, st *cfi.Stream, plts []translate.PLT) (v3 *encoded) {
	t.Helper()
	defer func(n int) { chunkFDEs = n }(chunkFDEs)
	for _, v := range []uint8{sframe.Version3, sframe.Version2} {
		want := whole(t, ef, st, plts, v)
		if v == sframe.Version3 {
			v3 = want
		}
		for _, n := range []int{1, 3, 4096} {
			chunkFDEs = n
			got, err := translateEncode(name, ef, st, plts, v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(encoded{})); diff != "" {
				t.Errorf("%s V%d in pieces of %d FDEs (-whole +pieces):\n%s", name, v, n, diff)
			}
		}
	}
	return v3
}

// TestPiecesMatchWhole: sizes, counts and histograms do not depend on
// the pieces the file is translated in, on the fixtures (PLTs, AArch64,
// both byte orders) and the system's libc.
func TestPiecesMatchWhole(t *testing.T) {
	names, err := filepath.Glob("../testdata/sframe/v[23]-*")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, "../testdata/example/hello", "/lib/x86_64-linux-gnu/libc.so.6")
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
		st, err := cfi.Scan(f)
		if err != nil {
			t.Fatal(err)
		}
		v3 := checkPieces(t, name, f.ELF, st, convert.PLTSections(f.ELF))
		// The same with the FDEs as cfi.Index keeps them (as Analyze reads
		// them): the same figures.
		ix, err := cfi.Index(f)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(v3, checkPieces(t, name+" (indexed)", f.ELF, ix, convert.PLTSections(f.ELF)), cmp.AllowUnexported(encoded{})); diff != "" {
			t.Errorf("%s: indexed FDEs (-parsed +indexed):\n%s", name, diff)
		}
		n++
	}
	if n < 10 {
		t.Fatalf("only %d files", n)
	}
}

// TestPiecesOverlaps: FDEs that overlap, nest, share a start, have no
// size or no address, in any order, give the same figures in pieces.
func TestPiecesOverlaps(t *testing.T) {
	// CFA rsp+8, RA at CFA-8; then (advance 1) CFA rsp+16; then
	// (advance 300) CFA rsp+0x12345, which needs 4-byte data words.
	cie := &cfi.CIE{CodeAlign: 1, DataAlign: -8, RAColumn: 16, Initial: []byte{0x0c, 7, 8, 0x90, 1}}
	prog := []byte{0x41, 0x0e, 0x10, 0x03, 0x2c, 0x01, 0x0e, 0xc5, 0xc6, 0x04}
	ef := &elf.File{FileHeader: elf.FileHeader{Machine: elf.EM_X86_64, ByteOrder: binary.LittleEndian}}
	rng := rand.New(rand.NewSource(1))
	overlaps, funcs := 0, 0
	for round := 0; round < 20; round++ {
		st := &cfi.Stream{}
		for i := 0; i < 40; i++ {
			start := uint64(0x1000 + rng.Intn(0x3000))
			size := uint64(rng.Intn(0x400))
			switch rng.Intn(10) {
			case 0:
				start = 0
			case 1:
				size = 0
			}
			st.FDEs = append(st.FDEs, &cfi.FDE{CIE: cie, Start: start, Size: size, Program: prog})
		}
		e := checkPieces(t, "random", ef, st, nil)
		overlaps += e.skipped[string(translate.Overlap)]
		funcs += e.funcs
	}
	if overlaps == 0 || funcs == 0 {
		t.Fatalf("%d overlaps, %d functions: the FDEs test nothing", overlaps, funcs)
	}
}
