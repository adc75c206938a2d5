package cfi

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/cfiexpr"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// fuzzSection turns fuzz input into a section: the first byte picks the
// kind, byte order and pointer size.
func fuzzSection(data []byte) *Section {
	if len(data) == 0 {
		return nil
	}
	m := data[0]
	s := &Section{kind: kindEH, data: data[1:], addr: 0x10000, order: binary.LittleEndian, ptrSize: 8, textRel: 0x1000, dataRel: 0x2000}
	if m&1 != 0 {
		s.kind = kindDebug
	}
	if m&2 != 0 {
		s.order = binary.BigEndian
	}
	if m&4 != 0 {
		s.ptrSize = 4
	}
	s.untilTerminator = m&8 != 0
	return s
}

func addFixtureSeeds(f *testing.F) {
	files, _ := filepath.Glob("../testdata/sframe/v3-*")
	for _, name := range files {
		if filepath.Ext(name) == ".objdump" {
			continue
		}
		ef, err := elfread.Open(name)
		if err != nil {
			continue
		}
		secs, _ := sections(ef, nil)
		for _, s := range secs {
			m := byte(0)
			if s.order == binary.BigEndian {
				m |= 2
			}
			f.Add(append([]byte{m}, s.data...))
		}
		ef.Close()
	}
}

// FuzzParse parses arbitrary bytes as a call-frame section and executes
// every FDE found: no input may panic or hang.
func FuzzParse(f *testing.F) {
	addFixtureSeeds(f)
	f.Add(append([]byte{0}, ehFrame(binary.LittleEndian, 0x10000, amd64CIE, fdeSpec{start: 0x1000, size: 64, program: op(0x41, 0x0e, 16, 0x86, 2)})...))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := fuzzSection(data)
		if s == nil {
			return
		}
		fdes, errs := Parse(s)
		for _, e := range errs {
			if e == nil || e.Error() == "" {
				t.Fatal("empty error")
			}
		}
		sameAsSlow(t, s, fdes, errs)
		var in interpreter
		var tab Table
		for _, fd := range fdes {
			if err := in.execute(fd, &tab); err != nil {
				continue
			}
			for i := 1; i < len(tab.Rows); i++ {
				if tab.Rows[i].Loc <= tab.Rows[i-1].Loc {
					t.Fatalf("rows out of order: %#x after %#x", tab.Rows[i].Loc, tab.Rows[i-1].Loc)
				}
			}
			for _, r := range tab.Rows {
				if r.CFA.Kind == CFAExpression {
					cfiexpr.ParseSimpleExpr(r.CFA.Expr)
					cfiexpr.ParsePLTExpr(r.CFA.Expr)
				}
			}
		}
	})
}

// FuzzExecute runs arbitrary CFA programs after a fixed AMD64-like CIE.
func FuzzExecute(f *testing.F) {
	f.Add([]byte{0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6})
	f.Add([]byte{0x0a, 0x41, 0x0e, 8, 0x0b, 0x2d, 0x2c})
	f.Add([]byte{0x0f, 3, 0x76, 0x78, 0x06, 0x10, 6, 2, 0x76, 0})
	f.Add([]byte{0x01, 0, 0, 0, 0, 0x02, 0xff, 0x1d, 1, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		data := ehFrame(binary.LittleEndian, 0x2000, amd64CIE, fdeSpec{start: 0x1000, size: 0x100, program: prog})
		fdes, errs := Parse(&Section{kind: kindEH, data: data, addr: 0x2000, order: binary.LittleEndian, ptrSize: 8})
		if len(errs) != 0 || len(fdes) != 1 {
			t.Fatalf("the wrapper must parse: %v", errs)
		}
		tab, err := executeFDE(fdes[0])
		if err != nil {
			return
		}
		if len(tab.Rows) == 0 || tab.Rows[0].Loc != 0x1000 {
			t.Fatalf("first row %v", tab.Rows)
		}
		for i := 1; i < len(tab.Rows); i++ {
			if tab.Rows[i].Loc <= tab.Rows[i-1].Loc || tab.Rows[i].Loc >= 0x1100 {
				t.Fatalf("row %d at %#x", i, tab.Rows[i].Loc)
			}
		}
	})
}

// sameAsSlow checks that parsing s without quickFDE gives fdes and errs.
func sameAsSlow(t *testing.T, s *Section, fdes []*FDE, errs []error) {
	t.Helper()
	want, wantErrs := parse(s, true)
	if len(fdes) != len(want) || len(errs) != len(wantErrs) {
		t.Fatalf("%d FDEs and %d errors, %d and %d without quickFDE", len(fdes), len(errs), len(want), len(wantErrs))
	}
	for i, e := range errs {
		if e.Error() != wantErrs[i].Error() {
			t.Fatalf("error %q, without quickFDE %q", e, wantErrs[i])
		}
	}
	for i, f := range fdes {
		w := want[i]
		if f.Offset != w.Offset || f.CIE.Offset != w.CIE.Offset || f.Start != w.Start || f.Size != w.Size || f.StartField != w.StartField ||
			f.lsda != w.lsda || f.progOff != w.progOff || !bytes.Equal(f.Program, w.Program) || cap(f.Program) != cap(w.Program) {
			t.Fatalf("FDE %d: %+v, without quickFDE %+v", i, *f, *w)
		}
	}
}
