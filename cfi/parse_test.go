package cfi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

func TestParseAugmentations(t *testing.T) {
	tests := []struct {
		name  string
		cie   cieSpec
		fde   fdeSpec
		check func(t *testing.T, f *FDE)
	}{
		{"zR pcrel sdata4", amd64CIE, fdeSpec{start: 0x1234, size: 0x10}, func(t *testing.T, f *FDE) {
			if f.Start != 0x1234 || f.Size != 0x10 || f.CIE.fdeEnc != 0x1b || f.CIE.RAColumn != 16 || f.CIE.DataAlign != -8 {
				t.Errorf("got %+v / %+v", f, f.CIE)
			}
		}},
		{"no augmentation: absptr", cieSpec{version: 1, codeAlign: 4, dataAlign: -8, raCol: 30}, fdeSpec{start: 0x400000, size: 0x20}, func(t *testing.T, f *FDE) {
			if f.Start != 0x400000 || f.Size != 0x20 || f.CIE.CodeAlign != 4 {
				t.Errorf("got %+v", f)
			}
		}},
		{"zPLRS with personality and LSDA", cieSpec{version: 1, aug: "zPLRS", augData: []byte{0x00, 8, 7, 6, 5, 4, 3, 2, 1, 0x00, 0x1b}, codeAlign: 1, dataAlign: -8, raCol: 16, pcrel: true},
			fdeSpec{start: 0x1000, size: 8, augData: []byte{0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}}, func(t *testing.T, f *FDE) {
				c := f.CIE
				if !c.Signal || (c.personality != 0x0102030405060708 && c.personality != 0x0807060504030201) || c.lsdaEnc != 0 || (f.lsda != 0x1122334455667788 && f.lsda != 0x8877665544332211) || f.Start != 0x1000 {
					t.Errorf("got FDE %+v CIE %+v", f, c)
				}
			}},
		{"zRB (AArch64 B key) and G (MTE), version 3 RA column as uleb", cieSpec{version: 3, aug: "zRBG", augData: []byte{0x1b}, codeAlign: 4, dataAlign: -8, raCol: 30, pcrel: true},
			fdeSpec{start: 0x1000, size: 8}, func(t *testing.T, f *FDE) {
				if !f.CIE.BKey || !f.CIE.mteTagged || f.CIE.RAColumn != 30 || f.CIE.version != 3 {
					t.Errorf("got %+v", f.CIE)
				}
			}},
		{"unknown augmentation after z is skipped by its length", cieSpec{version: 1, aug: "zRX", augData: []byte{0x1b, 0xaa, 0xbb}, codeAlign: 1, dataAlign: -8, raCol: 16, pcrel: true},
			fdeSpec{start: 0x1000, size: 8}, func(t *testing.T, f *FDE) {
				if f.Start != 0x1000 {
					t.Errorf("got %+v", f)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
				data := ehFrame(order, 0x2000, tc.cie, tc.fde)
				fdes, errs := Parse(&Section{kind: kindEH, data: data, addr: 0x2000, order: order.(binary.ByteOrder), ptrSize: 8})
				if len(errs) != 0 || len(fdes) != 1 {
					t.Fatalf("%v: %d FDEs, errors %v", order, len(fdes), errs)
				}
				tc.check(t, fdes[0])
			}
		})
	}
}

func TestPointerEncodings(t *testing.T) {
	sec := &Section{addr: 0x1000, ptrSize: 8, textRel: 0x400000, dataRel: 0x600000}
	tests := []struct {
		enc  uint8
		data []byte
		pre  int // bytes before the field (for pcrel/aligned)
		want uint64
	}{
		{peAbsptr, []byte{1, 2, 3, 4, 5, 6, 7, 8}, 0, 0x0807060504030201},
		{peUleb128, []byte{0xe5, 0x8e, 0x26}, 0, 624485},
		{peSleb128, []byte{0x7f}, 0, ^uint64(0)},
		{peUdata2, []byte{0xff, 0xff}, 0, 0xffff},
		{peSdata2, []byte{0xfe, 0xff}, 0, ^uint64(1)},
		{peUdata4, []byte{0, 0, 0, 0x80}, 0, 0x80000000},
		{peSdata4, []byte{0, 0, 0, 0x80}, 0, uint64(0xffffffff80000000)},
		{peUdata8, []byte{1, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
		{peSdata8, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 0, ^uint64(0)},
		{pePCRel | peSdata4, []byte{0xf0, 0xff, 0xff, 0xff}, 4, 0x1000 + 4 - 16},
		{peTextRel | peUdata4, []byte{0x10, 0, 0, 0}, 0, 0x400010},
		{peDataRel | peSdata4, []byte{0x10, 0, 0, 0}, 0, 0x600010},
		{peFuncRel | peUdata2, []byte{0x10, 0}, 0, 0x500010},
		{peAligned, []byte{0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0}, 3, 9},
	}
	for _, tc := range tests {
		data := append(make([]byte, tc.pre), tc.data...)
		r := &reader{b: data, off: tc.pre, order: binary.LittleEndian}
		got, err := readEncoded(r, tc.enc, ptrCtx{sec: sec, ptrSize: 8, funcStart: 0x500000})
		if err != nil || got != tc.want {
			t.Errorf("encoding %#x: got %#x, %v; want %#x", tc.enc, got, err, tc.want)
		}
	}
	r := &reader{b: []byte{1}, order: binary.LittleEndian}
	if _, err := readEncoded(r, 0x07, ptrCtx{sec: sec, ptrSize: 8}); err == nil {
		t.Error("encoding 0x07: no error")
	}
}

// TestPCRelSdata4: the address fields of the usual FDE encoding, read
// without readEncoded, are what readEncoded and readRange give, in both
// byte orders and pointer sizes, at section addresses and field values
// that wrap.
func TestPCRelSdata4(t *testing.T) {
	vals := []uint32{0, 1, 0x7fffffff, 0x80000000, 0xfffffff0, 0x12345678}
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, ptr := range []int{4, 8} {
			for _, addr := range []uint64{0, 0x1000, 0xfffffff0, 0xffffffffffff0000} {
				for _, a := range vals {
					for _, b := range vals {
						sec := &Section{addr: addr, ptrSize: ptr, order: order}
						data := make([]byte, 13)
						order.PutUint32(data[5:], a)
						order.PutUint32(data[9:], b)
						p := &parser{s: sec, le: order == binary.LittleEndian}
						r := &reader{b: data, off: 5, order: order}
						start, size := p.pcrelSdata4(r)
						w := &reader{b: data, off: 5, order: order}
						ctx := ptrCtx{sec: sec, ptrSize: ptr}
						wantStart, err1 := readEncoded(w, pePCRel|peSdata4, ctx)
						wantSize, err2 := readRange(w, pePCRel|peSdata4, ctx)
						if err1 != nil || err2 != nil || start != wantStart || size != wantSize || r.off != w.off {
							t.Errorf("%v ptr %d addr %#x fields %#x %#x: got %#x %#x at %d, want %#x %#x at %d",
								order, ptr, addr, a, b, start, size, r.off, wantStart, wantSize, w.off)
						}
					}
				}
			}
		}
	}
}

// TestDebugFrame64 builds a 64-bit-DWARF .debug_frame (CIE id all ones,
// CIE pointer a section offset) with a version 4 CIE, in both byte orders.
func TestDebugFrame64(t *testing.T) {
	for _, order := range []binary.AppendByteOrder{binary.LittleEndian, binary.BigEndian} {
		b := &bld{order: order}
		cie := (&bld{order: order}).u64(^uint64(0)).u8(4).str("").u8(8, 0).uleb(4).sleb(-8).uleb(30).u8(0x0c).uleb(31).uleb(0)
		b.u32(0xffffffff).u64(uint64(len(cie.b))).u8(cie.b...)
		fde := (&bld{order: order}).u64(0).u64(0x400100).u64(0x40).u8(0x44, 0x0e).uleb(32)
		b.u32(0xffffffff).u64(uint64(len(fde.b))).u8(fde.b...)
		fdes, errs := Parse(&Section{kind: kindDebug, data: b.b, order: order.(binary.ByteOrder), ptrSize: 8})
		if len(errs) != 0 || len(fdes) != 1 {
			t.Fatalf("%v: %d FDEs, errors %v", order, len(fdes), errs)
		}
		f := fdes[0]
		if f.Start != 0x400100 || f.Size != 0x40 || f.CIE.version != 4 || f.CIE.addrSize != 8 {
			t.Fatalf("%v: got %+v, CIE %+v", order, f, f.CIE)
		}
		tab, err := executeFDE(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.Rows) != 2 || tab.Rows[1].Loc != 0x400110 || !cfaEqual(tab.Rows[1].CFA, cfa(31, 32)) {
			t.Errorf("%v: rows %+v", order, tab.Rows)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := ehFrame(binary.LittleEndian, 0x2000, amd64CIE, fdeSpec{start: 0x1000, size: 8}, fdeSpec{start: 0x1010, size: 8})
	badCIE := ehFrame(binary.LittleEndian, 0x2000, cieSpec{version: 2, raCol: 16}, fdeSpec{start: 0x1000, size: 8})
	tests := []struct {
		name     string
		data     []byte
		nFDEs    int
		want     string
		wantOffs int64
	}{
		{"truncated record", good[:len(good)-10], 1, "runs past the end", 41},
		{"length field cut", good[:2], 0, "truncated record length", 0},
		{"unsupported CIE version", badCIE, 0, "unsupported CIE version 2", 0},
		{"CIE pointer outside", append(append([]byte{}, good[:24]...), 8, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0), 0, "points outside", 24},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fdes, errs := Parse(&Section{kind: kindEH, data: tc.data, addr: 0x2000, order: binary.LittleEndian, ptrSize: 8})
			if len(fdes) != tc.nFDEs {
				t.Errorf("%d FDEs, want %d", len(fdes), tc.nFDEs)
			}
			var ce *Error
			found := false
			for _, e := range errs {
				if errors.As(e, &ce) && strings.Contains(e.Error(), tc.want) {
					found = true
					if ce.Off != tc.wantOffs {
						t.Errorf("error %q at offset %d, want %d", e, ce.Off, tc.wantOffs)
					}
				}
			}
			if !found {
				t.Errorf("errors %v: want one containing %q", errs, tc.want)
			}
		})
	}
}

// TestRealFiles parses and executes every FDE of the committed fixtures
// (GNU as/ld output for x86-64, AArch64 LE/BE, s390x) and, when present,
// of system files.
func TestRealFiles(t *testing.T) {
	files, _ := filepath.Glob("../testdata/sframe/v*")
	more, _ := filepath.Glob("../internal/elfwrite/testdata/tiny-*")
	files = append(files, more...)
	for _, f := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/ls", "/usr/aarch64-linux-gnu/lib/libc.so.6"} {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	total := 0
	for _, name := range files {
		if strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".s") || strings.HasSuffix(name, ".c") {
			continue
		}
		ef, err := elfread.Open(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		secs, err := sections(ef, nil)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		var in interpreter
		var tab Table
		for _, s := range secs {
			fdes, errs := Parse(s)
			for _, e := range errs {
				t.Errorf("%s: %v", name, e)
			}
			for _, f := range fdes {
				if err := in.execute(f, &tab); err != nil {
					t.Errorf("%s: %v", name, err)
				}
				if len(tab.Rows) == 0 || tab.Rows[0].Loc != f.Start {
					t.Errorf("%s: FDE at %d: first row %v, want one at %#x", name, f.Offset, tab.Rows, f.Start)
				}
				total++
			}
		}
		ef.Close()
	}
	t.Logf("%d files, %d FDEs parsed and executed", len(files), total)
}

// TestQuickFDE: wherever quickFDE takes a record, frame and fde take it
// too and give the same FDE and next offset; over the FDEs of real files
// (the fixtures, ls, libc and, when present, libLLVM-15) and copies of
// them with one byte of each FDE's first 24 changed. It must take most
// FDEs of real files.
func TestQuickFDE(t *testing.T) {
	paths := []string{"/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1"}
	fx, _ := filepath.Glob("testdata/*.elf")
	paths = append(paths, fx...)
	checked := 0
	for _, path := range paths {
		f, err := elfread.Open(path)
		if err != nil {
			continue
		}
		secs, err := sections(f, nil)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, sec := range secs {
			fdes, _ := Parse(sec)
			if len(fdes) == 0 {
				continue
			}
			taken := quickAgrees(t, path, sec, fdes, nil)
			if sec.kind == kindEH && sec.order == binary.LittleEndian && taken < len(fdes)*9/10 {
				t.Errorf("%s: quickFDE took %d of %d FDEs", path, taken, len(fdes))
			}
			checked += taken
			// One byte changed in each of a few FDEs: the length, the CIE
			// pointer, the addresses, the augmentation length or the LSDA.
			data := slices.Clone(sec.data)
			m := *sec
			m.data = data
			for i, fd := range fdes[:min(len(fdes), 2000)] {
				o := int(fd.Offset) + i%24
				if o < len(data) {
					data[o] ^= byte(1 << (i % 8))
				}
			}
			mf, _ := Parse(&m)
			quickAgrees(t, path+" (changed)", &m, mf, fdes)
		}
	}
	if checked == 0 {
		t.Fatal("no FDE checked")
	}
}

// quickAgrees checks quickFDE against frame and fde at every FDE of fdes
// (from sec), and at every record offset of orig when given, and returns
// how many quickFDE took.
func quickAgrees(t *testing.T, what string, sec *Section, fdes, orig []*FDE) int {
	t.Helper()
	quick, _ := newParser(sec)
	slow, _ := newParser(sec)
	taken := 0
	offs := []int64{}
	for _, fd := range append(fdes, orig...) {
		offs = append(offs, fd.Offset, fd.CIE.Offset)
	}
	for _, off := range offs {
		// The CIE the slow walk would have found last.
		quick.cie(fdesCIE(sec, off))
		var got, want FDE
		next, ok := quick.quickFDE(int(off), &got)
		if !ok {
			continue
		}
		taken++
		rec, rok := slow.frame(int(off))
		if !rok || rec.zeroLen || rec.body == 0 || rec.isCIE {
			t.Fatalf("%s: quickFDE took the record at %#x, frame does not", what, off)
		}
		if err := slow.fde(rec, &want); err != nil {
			t.Fatalf("%s: quickFDE took the record at %#x, fde refuses it: %v", what, off, err)
		}
		if next != rec.end || got.CIE.Offset != want.CIE.Offset || !bytes.Equal(got.Program, want.Program) || cap(got.Program) != cap(want.Program) {
			t.Fatalf("%s at %#x: quickFDE next %#x CIE %#x program % x, frame and fde %#x %#x % x", what, off, next, got.CIE.Offset, got.Program, rec.end, want.CIE.Offset, want.Program)
		}
		type fields struct {
			off, start, size, startField, lsda uint64
			sec                                *Section
			progOff                            int
		}
		g := fields{uint64(got.Offset), got.Start, got.Size, uint64(got.StartField), got.lsda, got.sec, got.progOff}
		w := fields{uint64(want.Offset), want.Start, want.Size, uint64(want.StartField), want.lsda, want.sec, want.progOff}
		if g != w {
			t.Fatalf("%s at %#x: quickFDE %+v, frame and fde %+v", what, off, g, w)
		}
	}
	return taken
}

// fdesCIE returns the CIE offset the record at off points to, or -1.
func fdesCIE(sec *Section, off int64) int64 {
	if off < 0 || off+8 > int64(len(sec.data)) {
		return -1
	}
	id := int64(sec.order.Uint32(sec.data[off+4:]))
	return off + 4 - id
}
