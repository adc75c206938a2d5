package sframe_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// readerSections returns the fixtures' sections and lookupSection's, each
// also with the sorted flag cleared (FindFRE then scans the index).
func readerSections(t *testing.T) map[string][]byte {
	m := map[string][]byte{}
	for _, path := range fixtures(t) {
		es := loadFixture(t, path)
		m[filepath.Base(path)] = es.Data
	}
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), s.Options())
	if err != nil {
		t.Fatal(err)
	}
	m["lookup"] = b
	for name, b := range m {
		if b[3]&sframe.FlagFDESorted == 0 {
			continue
		}
		u := append([]byte(nil), b...)
		u[3] &^= sframe.FlagFDESorted
		m[name+"-unsorted"] = u
		// Flagged sorted but not: the first and last index entries
		// swapped.
		s, err := sframe.Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(s.FDEs); n > 1 {
			size := (int(s.Header.FREOff) - int(s.Header.FDEOff)) / n
			if s.Header.FREOff < s.Header.FDEOff || size < 16 {
				continue
			}
			l := append([]byte(nil), b...)
			first := s.Header.Size() + int(s.Header.FDEOff)
			last := first + (n-1)*size
			tmp := append([]byte(nil), l[first:first+size]...)
			copy(l[first:first+size], l[last:last+size])
			copy(l[last:last+size], tmp)
			m[name+"-lying"] = l
		}
	}
	return m
}

// TestReaderMatchesDecode: the Reader reads, dumps and looks up what
// Decode's Section holds, function by function, with one reused FDE.
func TestReaderMatchesDecode(t *testing.T) {
	for name, b := range readerSections(t) {
		t.Run(name, func(t *testing.T) {
			const addr = 0x500
			s, err := sframe.Decode(b, addr)
			if err != nil {
				t.Fatal(err)
			}
			r, err := sframe.NewReader(b, addr)
			if err != nil {
				t.Fatal(err)
			}
			if r.NumFDEs() != len(s.FDEs) || !cmp.Equal(r.Header, s.Header, cmpopts.EquateEmpty()) {
				t.Fatalf("header %+v, %d FDEs; Decode: %+v, %d FDEs", r.Header, r.NumFDEs(), s.Header, len(s.FDEs))
			}
			var d sframe.FDE
			for i := range s.FDEs {
				r.ReadFDE(i, &d)
				if diff := cmp.Diff(s.FDEs[i], d); diff != "" {
					t.Fatalf("FDE %d (-Decode +Reader):\n%s", i, diff)
				}
			}
			var want, got bytes.Buffer
			if err := s.Dump(&want); err != nil {
				t.Fatal(err)
			}
			if err := r.Dump(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("Reader.Dump differs\n--- got\n%s\n--- want\n%s", got.String(), want.String())
			}
			want.Reset()
			got.Reset()
			if err := s.DumpJSON(&want); err != nil {
				t.Fatal(err)
			}
			if err := r.DumpJSON(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("Reader.DumpJSON differs\n--- got\n%s\n--- want\n%s", got.String(), want.String())
			}
			// Every PC of every function and around it, in an order that
			// moves between functions.
			for _, step := range []int{1, -1} {
				for k := range s.FDEs {
					i := k
					if step < 0 {
						i = len(s.FDEs) - 1 - k
					}
					f := &s.FDEs[i]
					for k := -1; k <= min(int(f.Size), 1<<12); k++ {
						pc := f.Start + uint64(int64(k))
						wr, wok := s.FindFRE(pc)
						gr, gok := r.FindFRE(pc)
						if gok != wok || gr != wr {
							t.Fatalf("FindFRE(%#x) = %+v, %v; Section: %+v, %v", pc, gr, gok, wr, wok)
						}
					}
				}
			}
		})
	}
}

// TestReaderErrors: NewReader rejects what Decode rejects, with the same
// error, for every truncation and a sample of single-byte changes of the
// fixtures.
func TestReaderErrors(t *testing.T) {
	n := 0
	for name, b := range readerSections(t) {
		try := func(c []byte) {
			_, derr := sframe.Decode(c, 0)
			_, rerr := sframe.NewReader(c, 0)
			var de, re *sframe.Error
			if (derr == nil) != (rerr == nil) || derr != nil && (!errors.As(derr, &de) || !errors.As(rerr, &re) || *de != *re) {
				t.Fatalf("%s: Decode: %v; NewReader: %v", name, derr, rerr)
			}
			if derr != nil {
				n++
			}
		}
		for k := 0; k <= len(b); k += 1 + len(b)/64 {
			try(b[:k])
		}
		for k := 0; k < len(b); k += 1 + len(b)/256 {
			for _, v := range []byte{0, 0xff, b[k] ^ 0x10} {
				c := append([]byte(nil), b...)
				c[k] = v
				try(c)
			}
		}
	}
	if n == 0 {
		t.Fatal("no input was rejected: the test compares nothing")
	}
}

// FuzzReader: on any bytes, NewReader and Decode agree, and so do their
// dumps and lookups.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0xe2, 0xde, 3, 4, 3, 0, 0xf8, 0})
	le := binary.LittleEndian
	b := header(le, 2, sframe.FlagFDESorted, 3, -8, 1, 1, 3, 0, 20)
	fde := make([]byte, 20)
	le.PutUint32(fde[4:], 16)
	le.PutUint32(fde[12:], 1)
	f.Add(append(append(b, fde...), 0, 0x02, 8))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, derr := sframe.Decode(b, 0x1000)
		r, rerr := sframe.NewReader(b, 0x1000)
		if (derr == nil) != (rerr == nil) || derr != nil && derr.Error() != rerr.Error() {
			t.Fatalf("Decode: %v; NewReader: %v", derr, rerr)
		}
		if derr != nil {
			return
		}
		var want, got bytes.Buffer
		s.Dump(&want)
		r.Dump(&got)
		if got.String() != want.String() {
			t.Fatalf("dumps differ\n--- Reader\n%s\n--- Section\n%s", got.String(), want.String())
		}
		want.Reset()
		got.Reset()
		s.DumpJSON(&want)
		r.DumpJSON(&got)
		if got.String() != want.String() {
			t.Fatalf("JSON dumps differ\n--- Reader\n%s\n--- Section\n%s", got.String(), want.String())
		}
		for _, d := range s.FDEs {
			for _, pc := range []uint64{d.Start, d.Start + uint64(d.Size)/2, d.Start + uint64(d.Size) - 1} {
				wr, wok := s.FindFRE(pc)
				gr, gok := r.FindFRE(pc)
				if gok != wok || gr != wr {
					t.Fatalf("FindFRE(%#x) = %+v, %v; Section: %+v, %v", pc, gr, gok, wr, wok)
				}
			}
		}
	})
}
