package cfi

import (
	"bytes"
	"io"
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

// TestEntriesMatchParse: a File's entries are FDEs Parse finds in its
// sections (same ranges, records), a Context parses each again into the
// record Parse gives and executes it into the table Execute gives, and
// Next and Table walk the entries as ParseEntry and Execute do.
func TestEntriesMatchParse(t *testing.T) {
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
		file, err := open(ef, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		type key struct {
			sec int
			off int64
		}
		parsed := map[key]*FDE{}
		total := 0
		for i, sec := range file.Sections() {
			fdes, _ := Parse(sec)
			total += len(fdes)
			for _, f := range fdes {
				parsed[key{i, f.Offset}] = f
			}
		}
		if file.Parsed() != total || len(file.Entries()) > total {
			t.Fatalf("%s: %d parsed, %d entries; Parse finds %d FDEs", name, file.Parsed(), len(file.Entries()), total)
		}
		ctx := file.Context(file.Entries())
		walk := file.Context(file.Entries())
		var got FDE
		var tab Table
		failed := 0
		for i, e := range file.Entries() {
			f := parsed[key{int(e.ref & (1<<refSecBits - 1)), int64(e.ref >> refSecBits)}]
			if f == nil || e.Start != f.Start || e.Size != f.Size || e.Start+e.Size != f.End() {
				t.Fatalf("%s: entry %d [%#x, %#x): no such FDE (%v)", name, i, e.Start, e.Start+e.Size, f)
			}
			if err := ctx.ParseEntry(e, &got); err != nil {
				t.Fatalf("%s: entry %d: %v", name, i, err)
			}
			g := &got
			if g.Offset != f.Offset || g.Start != f.Start || g.Size != f.Size || g.lsda != f.lsda || g.StartField != f.StartField ||
				!bytes.Equal(g.Program, f.Program) || g.CIE.Offset != f.CIE.Offset || !reflect.DeepEqual(*g.CIE, *f.CIE) {
				t.Fatalf("%s: entry %d: FDE differs (-Parse +ParseEntry):\n%s", name, i, cmp.Diff(*f, *g, cmpopts.IgnoreUnexported(FDE{}, CIE{})))
			}
			want, werr := executeFDE(f)
			gerr := ctx.Execute(g, &tab)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s: entry %d: Execute error %v, Context.Execute %v", name, i, werr, gerr)
			}
			wf, err := walk.Next()
			if err != nil || wf.Offset != f.Offset || wf.Start != f.Start {
				t.Fatalf("%s: entry %d: Next gives %v, %v", name, i, wf, err)
			}
			wt := walk.Table()
			if (wt == nil) != (werr != nil) {
				t.Fatalf("%s: entry %d: Table %v, Execute error %v", name, i, wt, werr)
			}
			if werr != nil {
				failed++
				continue
			}
			if d := cmp.Diff(want.Rows, tab.Rows, cmpopts.EquateEmpty(), cmp.AllowUnexported(Row{}, touch{})); d != "" {
				t.Fatalf("%s: entry %d: rows differ (-Execute +Context.Execute):\n%s", name, i, d)
			}
			if d := cmp.Diff(want.Rows, wt.Rows, cmpopts.EquateEmpty(), cmp.AllowUnexported(Row{}, touch{})); d != "" {
				t.Fatalf("%s: entry %d: rows differ (-Execute +Table):\n%s", name, i, d)
			}
			n++
		}
		if _, err := walk.Next(); err != io.EOF {
			t.Fatalf("%s: Next after the last entry: %v", name, err)
		}
		if len(ctx.Errors()) != 0 || len(walk.Errors()) != failed {
			t.Errorf("%s: ParseEntry and Execute kept errors %v; Table kept %v, want %d", name, ctx.Errors(), walk.Errors(), failed)
		}
		ef.Close()
	}
	if n == 0 {
		t.Fatal("no FDE compared")
	}
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
