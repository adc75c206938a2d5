package sframe_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// variantSections returns the fixtures' sections and lookupSection's, each
// also with the sorted flag cleared and, where it has two FDEs or more,
// with the first and last index entries swapped but the flag kept.
func variantSections(t *testing.T) map[string][]byte {
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
		s, err := sfsection.Decode(b, 0)
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

// TestTableReadsWhatDecodeHolds: on the fixtures' sections and
// lookupSection's, also with the sorted flag cleared and with an index
// falsely flagged sorted, FDE reads what Decode's Section holds, function
// by function with one reused FDE, and the lookups answer the oracle's
// answer at every PC of every function and around it, visited in an order
// that moves between functions.
func TestTableReadsWhatDecodeHolds(t *testing.T) {
	for name, b := range variantSections(t) {
		t.Run(name, func(t *testing.T) {
			const addr = 0x500
			s, err := sfsection.Decode(b, addr)
			if err != nil {
				t.Fatal(err)
			}
			tbs := tables(t, b, addr)
			tb := tbs[0]
			if int(tb.Header.NumFDEs) != len(s.FDEs) || !cmp.Equal(tb.Header, s.Header, cmpopts.EquateEmpty()) {
				t.Fatalf("header %+v, %d FDEs; Decode: %+v, %d FDEs", tb.Header, int(tb.Header.NumFDEs), s.Header, len(s.FDEs))
			}
			var d sframe.FDE
			for i := range s.FDEs {
				if err := tb.FDE(i, &d); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(s.FDEs[i], d, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("FDE %d (-Decode +Table.FDE):\n%s", i, diff)
				}
			}
			r := newRef(s, tb)
			for _, step := range []int{1, -1} {
				for k := range s.FDEs {
					i := k
					if step < 0 {
						i = len(s.FDEs) - 1 - k
					}
					f := &s.FDEs[i]
					for k := -1; k <= min(int(f.Size), 1<<12) && !t.Failed(); k++ {
						sameAsRef(t, r, f.Start+uint64(int64(k)), tbs...)
					}
				}
			}
		})
	}
}

// TestCheckErrors: Open and Check reject what Decode rejects, with the
// same error, for every truncation and a sample of single-byte changes of
// the sections; the general code and the fast path agree on Open's.
func TestCheckErrors(t *testing.T) {
	n := 0
	for name, b := range variantSections(t) {
		try := func(c []byte) {
			_, derr := sfsection.Decode(c, 0)
			tb, err := sframe.Open(c, 0)
			if _, gerr := sframe.OpenGeneral(c, 0); !sameErr(err, gerr) {
				t.Fatalf("%s: Open: %v; without the fast path: %v", name, err, gerr)
			}
			if err == nil {
				err = tb.Check()
			}
			var de, ce *sframe.Error
			if (derr == nil) != (err == nil) || derr != nil && (!errors.As(derr, &de) || !errors.As(err, &ce) || *de != *ce) {
				t.Fatalf("%s: Decode: %v; Open and Check: %v", name, derr, err)
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
