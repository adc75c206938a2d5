package verify

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
)

// TestShared: where a Go program's function table and another CFI
// section both describe functions, verify counts them by the pair of
// sections and names the first of those where CFI wins over the table,
// with the section the check used; they do not fail it. A cgo build with DWARF has every Go function
// in .gopclntab and .debug_frame (the table is used); two C FDEs moved
// onto runtime.morestack and main.main put them in .eh_frame too (.eh_frame
// is used). Real cgo programs (stripped, their .eh_frame for C only) share
// none.
func TestShared(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("builds x86-64 Linux cgo programs")
	}
	dir := t.TempDir()
	moved := []string{"runtime.morestack", "main.main"}
	for _, c := range []struct {
		cfg  gobuild.Config
		list int
		want map[string]int // a count of -1: at least 1000
		// The Shared findings by symbol: the section used.
		named map[string]string
		nList int // Shared findings listed
	}{
		{cfg: gobuild.Config{GOARCH: "amd64", Cgo: true, EHFrameOver: moved},
			want:  map[string]int{".eh_frame over .gopclntab": 2, ".gopclntab over .debug_frame": -1},
			named: map[string]string{"runtime.morestack": ".eh_frame", "main.main": ".eh_frame"}, nList: 2},
		{cfg: gobuild.Config{GOARCH: "amd64", Cgo: true, EHFrameOver: moved}, list: 1,
			want:  map[string]int{".eh_frame over .gopclntab": 2, ".gopclntab over .debug_frame": -1},
			named: map[string]string{"runtime.morestack": ".eh_frame"}, nList: 1},
		{cfg: gobuild.Config{GOARCH: "amd64", Cgo: true, Strip: true}},
	} {
		t.Run(fmt.Sprintf("%s-list%d", c.cfg, c.list), func(t *testing.T) {
			cv := convertFile(t, gobuild.Build(t, dir, c.cfg), convert.Options{})
			res := cv.check(t, cv.data, c.list)
			if !res.Agree {
				t.Errorf("the check fails: %+v", res.Findings)
			}
			for pair, n := range c.want {
				if got := res.Shared[pair]; got != n && (n >= 0 || got < 1000) {
					t.Errorf("%s: %d functions, want %d", pair, got, n)
				}
			}
			if len(res.Shared) != len(c.want) {
				t.Errorf("shared: %v, want %v", res.Shared, c.want)
			}
			sym := gopclntab.Symbolizer(cv.f)
			listed := 0
			for _, f := range res.Findings {
				if f.Kind != Shared {
					continue
				}
				listed++
				if used, ok := c.named[sym(f.Func)]; ok && (f.CFI != used || f.Detail != ".gopclntab") {
					t.Errorf("%s: used %s over %s, want %s over .gopclntab", sym(f.Func), f.CFI, f.Detail, used)
				}
				delete(c.named, sym(f.Func))
				if s := f.String(); !strings.Contains(s, "described by both "+f.CFI+" and "+f.Detail) {
					t.Errorf("%q", s)
				}
			}
			if listed != c.nList || len(c.named) > 0 {
				t.Errorf("%d Shared findings, want %d; not listed: %v", listed, c.nList, c.named)
			}
		})
	}
}
