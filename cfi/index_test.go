package cfi

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/elfread"
)

// TestIndexMatchesScan: Index's entries are Scan's FDEs (same order,
// ranges, records), ExecuteEntry gives the table Execute gives, and the
// two streams report the same errors.
func TestIndexMatchesScan(t *testing.T) {
	files, _ := filepath.Glob("../testdata/sframe/v*")
	more, _ := filepath.Glob("../elfwrite/testdata/tiny-*")
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
