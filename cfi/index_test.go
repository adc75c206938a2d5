package cfi

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// TestIndexMatchesScan: Index's entries are Scan's FDEs (same order,
// ranges, records), ExecuteEntry gives the table Execute gives, and the
// two streams report the same errors.
func TestIndexMatchesScan(t *testing.T) {
	files, _ := filepath.Glob("../testdata/sframe/v*")
	more, _ := filepath.Glob("../internal/elfwrite/testdata/tiny-*")
	files = append(files, more...)
	for _, f := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/usr/bin/ls"} {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".s") || strings.HasSuffix(name, ".c") {
			continue
		}
		ef, err := elfread.Open(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		scan, err := Scan(ef)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		idx, err := Index(ef)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(idx.Entries) != len(scan.FDEs) || idx.Parsed != scan.Parsed || idx.Sections != scan.Sections {
			t.Fatalf("%s: Index has %d entries (%d parsed, %d sections), Scan %d FDEs (%d, %d)", name,
				len(idx.Entries), idx.Parsed, idx.Sections, len(scan.FDEs), scan.Parsed, scan.Sections)
		}
		for i, e := range idx.Entries {
			f := scan.FDEs[i]
			if e.Start != f.Start || e.Size != f.Size || e.End() != f.End() {
				t.Fatalf("%s: entry %d [%#x, %#x), FDE [%#x, %#x)", name, i, e.Start, e.End(), f.Start, f.End())
			}
			want, werr := scan.Execute(f)
			var wantRows []Row
			if want != nil {
				wantRows = append(wantRows, want.Rows...)
			}
			got, gerr := idx.ExecuteEntry(e)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s: entry %d: Execute error %v, ExecuteEntry %v", name, i, werr, gerr)
			}
			if got == nil {
				continue
			}
			g := got.FDE
			if g.Offset != f.Offset || g.Start != f.Start || g.Size != f.Size || g.LSDA != f.LSDA || g.StartField != f.StartField ||
				!bytes.Equal(g.Program, f.Program) || g.CIE.Offset != f.CIE.Offset || !reflect.DeepEqual(*g.CIE, *f.CIE) {
				t.Fatalf("%s: entry %d: FDE differs (-Scan +Index):\n%s", name, i, cmp.Diff(*f, *g, cmpopts.IgnoreUnexported(FDE{}, CIE{})))
			}
			if len(wantRows) != len(got.Rows) || len(wantRows) > 0 && !reflect.DeepEqual(wantRows, got.Rows) {
				t.Fatalf("%s: entry %d: rows differ (-Execute +ExecuteEntry):\n%s", name, i, cmp.Diff(wantRows, got.Rows, cmpopts.EquateEmpty()))
			}
			n++
		}
		if diff := cmp.Diff(errStrings(scan.Errors), errStrings(idx.Errors)); diff != "" {
			t.Errorf("%s: errors differ (-Scan +Index):\n%s", name, diff)
		}
		ef.Close()
	}
	if n == 0 {
		t.Fatal("no FDE compared")
	}
}

func errStrings(errs []error) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

// TestSortEntries: SortEntries gives what a stable sort by start gives,
// for entries in 1 to 20 interleaved ascending sequences (merged, or
// sorted past maxSequences), with equal starts within and across them,
// and for shuffled ones.
func TestSortEntries(t *testing.T) {
	rng := uint64(7)
	next := func(n int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	merged := 0
	for round := range 400 {
		k := 1 + round%20
		n := next(3000)
		var e []Entry
		tails := make([]uint64, k)
		for i := range n {
			j := next(k)
			if round%7 == 0 {
				tails[j] = uint64(next(50)) // shuffled, many equal
			} else {
				tails[j] += uint64(next(3)) // ascending, some equal
			}
			e = append(e, Entry{Start: tails[j], Size: uint64(i), ref: uint64(i)})
		}
		want := slices.Clone(e)
		slices.SortStableFunc(want, byStart)
		if round%7 != 0 && k <= maxSequences {
			c := slices.Clone(e)
			if !mergeSequences(c) {
				t.Fatalf("round %d: %d sequences not merged", round, k)
			}
			merged++
		}
		SortEntries(e)
		if !slices.Equal(e, want) {
			t.Fatalf("round %d (%d sequences, %d entries): not a stable sort", round, k, n)
		}
	}
	if merged == 0 {
		t.Fatal("nothing merged")
	}
}
