package convert

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/allfuncs"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/callsite"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// TestStreamingMatchesTables: Convert executes one FDE at a time; the
// section and the diagnostics must be those of translating every table
// of the file at once (alltables.Execute), byte for byte.
func TestStreamingMatchesTables(t *testing.T) {
	files := linkedInputs(filepath.Join("..", "testdata", "example", "hello"), "/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6")
	n := 0
	for _, name := range files {
		in, err := os.ReadFile(name)
		if err != nil {
			continue // a system file that is not there
		}
		for _, v := range []uint8{sframe.Version3, sframe.Version2} {
			o := Options{Version: v, Force: true}
			res, err := convertMem(name, in, o)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			f, err := elfread.NewFile(bytes.NewReader(in), name)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := cfi.OpenBytes(in)
			if err != nil {
				t.Fatal(err)
			}
			tables, cfiErrs := alltables.Execute(cf)
			entries := cf.Entries()
			cfi.SortEntries(entries)
			ef := f.ELF
			tl, err := translate.New(translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, PLTs: pltfind.Sections(ef), Symbol: f.Symbolizer()},
				o.translateOptions())
			if err != nil {
				t.Fatal(err)
			}
			b, tr, err := allfuncs.Section(tl, tables, sframe.Options{Version: v, Order: ef.ByteOrder, PCRel: v == sframe.Version3, Sort: true, Addr: res.Addr,
				Share: ef.ByteOrder == binary.LittleEndian}, // as convert shares
				callsite.NewReturnPad(ef, in, entries))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, res.SFrame) {
				t.Errorf("%s v%d: streamed .sframe (%d bytes) differs from the all-tables one (%d bytes)", name, v, len(res.SFrame), len(b))
			}
			if d := cmp.Diff(tr.Diags, res.Translate.Diags); d != "" {
				t.Errorf("%s v%d: diagnostics differ (-tables +streamed):\n%s", name, v, d)
			}
			if len(cfiErrs) != len(res.CFIErrors) || tr.Converted != res.Translate.Converted ||
				!cmp.Equal(*tr, *res.Translate, cmp.AllowUnexported(translate.Result{})) { // the ignored FDEs too
				t.Errorf("%s v%d: counts differ", name, v)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("only %d conversions compared", n)
	}
}

// TestSplitMatchesOne: translating on two goroutines (the functions cut
// in two, each part with its own execution context and encoder) gives
// the section, the diagnostics and the CFI errors of one goroutine, for
// the fixtures and two system files, cut as small files allow.
func TestSplitMatchesOne(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU: no second goroutine")
	}
	files := linkedInputs("/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6")
	split := 0
	for _, name := range files {
		in, err := os.ReadFile(name)
		if err != nil {
			continue // a system file that is not there
		}
		for _, o := range []Options{{Force: true}, {Version: 2, Force: true, OutermostGap: true}} {
			convertWith := func(min int) *Result {
				defer func(old int) { minSplit = old }(minSplit)
				minSplit = min
				res, err := convertMem(name, in, o)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return res
			}
			one, two := convertWith(1<<62), convertWith(2)
			if !bytes.Equal(one.SFrame, two.SFrame) || !bytes.Equal(one.output, two.output) {
				t.Errorf("%s %+v: the output differs on two goroutines", name, o)
			}
			if d := cmp.Diff(one.Translate, two.Translate, cmp.AllowUnexported(translate.Result{})); d != "" {
				t.Errorf("%s %+v: results differ (-one +two goroutines)\n%s", name, o, d)
			}
			if len(one.CFIErrors) != len(two.CFIErrors) {
				t.Errorf("%s %+v: %d CFI errors, %d on two goroutines", name, o, len(one.CFIErrors), len(two.CFIErrors))
			}
		}
		if splits(t, name, in) {
			split++
		}
	}
	if split < 3 {
		t.Fatalf("only %d files split", split)
	}
	t.Logf("%d files split", split)
}

// splits says whether the file's functions are cut in two with minSplit 2.
func splits(t *testing.T, name string, in []byte) bool {
	t.Helper()
	defer func(old int) { minSplit = old }(minSplit)
	minSplit = 2
	st, err := cfi.OpenBytes(in)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	cfi.SortEntries(st.Entries())
	return len(parts(st.Entries())) > 2
}

// TestParts: where the functions are cut into parts for the goroutines:
// partsPerCPU parts per CPU, each cut the first point from its share on
// that translate.Cuts allows; none on one CPU or with too few functions.
func TestParts(t *testing.T) {
	defer func(old int) { minSplit = old }(minSplit)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	minSplit = 4
	type r struct{ start, size uint64 }
	disjoint := func(n int) []r {
		var rs []r
		for i := range n {
			rs = append(rs, r{uint64(10 + 10*i), 10})
		}
		return rs
	}
	every := func(step, n int) []int {
		var b []int
		for i := 0; i < n; i += step {
			b = append(b, i)
		}
		return append(b, n)
	}
	long := append([]r{{5, 1000}}, disjoint(40)...)
	second := append([]r{{10, 10}, {15, 1000}}, disjoint(31)[1:]...) // reaches past every other
	for _, tc := range []struct {
		name   string
		ranges []r
		cpus   int
		want   []int
	}{
		{"disjoint", disjoint(32), 2, every(2, 32)},
		{"more than parts", disjoint(64), 2, every(4, 64)},
		{"fewer than parts", disjoint(8), 2, every(1, 8)},
		{"too few", disjoint(3), 2, []int{0, 3}},
		{"one CPU", disjoint(32), 1, []int{0, 32}},
		{"a long one first", long, 2, []int{0, 41}},
		{"a long one second", second, 2, []int{0, 32}},
	} {
		runtime.GOMAXPROCS(tc.cpus)
		es := make([]cfi.Entry, len(tc.ranges))
		for i, x := range tc.ranges {
			es[i] = cfi.Entry{Start: x.start, Size: x.size}
		}
		if got := parts(es); !slices.Equal(got, tc.want) {
			t.Errorf("%s: parts %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTruncatedWhileMapped: a file another process truncates after it was
// mapped gives an error, not a crash (SIGBUS on the mapping).
func TestTruncatedWhileMapped(t *testing.T) {
	name := filepath.Join(t.TempDir(), "hello")
	b, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if !in.in.Mapped() {
		t.Skip("file system cannot map")
	}
	if err := os.Truncate(name, 0); err != nil {
		t.Fatal(err)
	}
	_, err = in.Convert(Options{})
	if !errors.Is(err, errChanged) || !strings.HasPrefix(err.Error(), name) {
		t.Errorf("error %v, want one naming the file and wrapping errChanged", err)
	}
}

// linkedInputs returns the linked V3 fixtures (not the objects, not the
// dumps) and then extra, for tests that convert each; an extra file that
// is not on this machine is for the caller's read to pass over.
func linkedInputs(extra ...string) []string {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "sframe", "v3-*"))
	files = slices.DeleteFunc(files, func(name string) bool {
		return strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".o")
	})
	return append(files, extra...)
}
