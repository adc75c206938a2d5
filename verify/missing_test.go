package verify

import (
	"bytes"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// converted is a linked file's CFI (and PLTs) with a conversion of it.
type converted struct {
	f    *elfread.File
	sec  *sfsection.Section // the conversion's .sframe, decoded
	data []byte             // and as bytes
	addr uint64
}

func convertFile(t *testing.T, name string, o convert.Options) converted {
	t.Helper()
	in, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	o.Force = true
	res, _, err := convertBytes(name, in, o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elfread.NewFile(bytes.NewReader(in), name)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sfsection.Decode(res.SFrame, res.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return converted{f: f, sec: sec, data: res.SFrame, addr: res.Addr}
}

// without re-encodes the section without the functions starting at the
// given addresses (each must be one).
func (c converted) without(t *testing.T, starts ...uint64) []byte {
	t.Helper()
	funcs := c.sec.Functions()
	n := len(funcs)
	funcs = slices.DeleteFunc(funcs, func(fn sframe.Function) bool { return slices.Contains(starts, fn.Start) })
	if n-len(funcs) != len(starts) {
		t.Fatalf("%d of the functions at %#x found", n-len(funcs), starts)
	}
	o := c.sec.Options()
	o.Addr = c.addr
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// check runs Check as the verify command does: the section checked, then
// read one function at a time (none when data is nil: an SHT_NOBITS
// section), the CFI indexed, the PLTs given.
func (c converted) check(t *testing.T, data []byte, list int) *Result {
	t.Helper()
	var tb *sframe.Table
	if data != nil {
		var err error
		if tb, err = sframe.Open(data, c.addr); err != nil {
			t.Fatal(err)
		}
		if err := tb.Check(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := cfi.Open(c.f.ELF)
	if err != nil {
		t.Fatal(err)
	}
	return check(input{Machine: c.f.ELF.Machine, Order: c.f.ELF.ByteOrder, SFrame: tb, Stream: st, Symbol: c.f.Symbolizer(),
		PLTs: pltfind.Sections(c.f.ELF), List: list})
}

// TestMissingFunctions: a CFI function missing from .sframe fails the
// check unless translate skips it too, and every one is counted. The
// example program's CFI has five functions: .plt and .plt.got (described
// from their instructions), main, _start (return address undefined
// throughout) and fib; a V3 conversion describes them all; the same for
// glibc (V2) leaves _start out (outermost); a V2 conversion of GNU's test
// program leaves out sigtramp_expr, whose CFA V2 cannot express.
func TestMissingFunctions(t *testing.T) {
	const hello = "../testdata/example/hello"
	v3 := convertFile(t, hello, convert.Options{})
	glibcOpts, err := convert.ForReader(convert.Glibc)
	if err != nil {
		t.Fatal(err)
	}
	glibc := convertFile(t, hello, glibcOpts)
	gnuV2 := convertFile(t, "../testdata/sframe/v3-x86_64-exe", convert.Options{Version: sframe.Version2})
	emptyOpts := v3.sec.Options()
	emptyOpts.Addr = v3.addr
	empty, err := sframe.Encode(nil, emptyOpts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		file    converted
		section []byte // nil: SHT_NOBITS, no bytes
		list    int
		agree   bool
		missing []string // the Missing findings, by symbol (all listed unless list caps them)
		count   int      // Result.Missing
		skipped map[translate.Reason]int
	}{
		{name: "correct V3 conversion", file: v3, section: v3.data, agree: true},
		{name: "empty .sframe", file: v3, section: empty,
			missing: []string{"(.plt)", "(.plt.got)", "main", "_start", "fib"}, count: 5},
		{name: "SHT_NOBITS .sframe", file: v3, section: nil,
			missing: []string{"(.plt)", "(.plt.got)", "main", "_start", "fib"}, count: 5},
		{name: "empty .sframe, two listed", file: v3, section: empty, list: 2,
			missing: []string{"(.plt)", "(.plt.got)"}, count: 5},
		{name: "main and fib removed", file: v3, section: v3.without(t, v3.symbol(t, "main"), v3.symbol(t, "fib")),
			missing: []string{"main", "fib"}, count: 2},
		{name: "_start removed from V3", file: v3, section: v3.without(t, v3.symbol(t, "_start")),
			missing: []string{"_start"}, count: 1},
		{name: "glibc: _start left out", file: glibc, section: glibc.data, agree: true,
			skipped: map[translate.Reason]int{translate.Outermost: 1}},
		{name: "glibc: _start left out, main removed", file: glibc, section: glibc.without(t, glibc.symbol(t, "main")),
			missing: []string{"main"}, count: 1, skipped: map[translate.Reason]int{translate.Outermost: 1}},
		{name: "V2 without the flexible function", file: gnuV2, section: gnuV2.data, agree: true,
			skipped: map[translate.Reason]int{translate.CFADeref: 1}},
		{name: "V2 without the flexible function and caller", file: gnuV2, section: gnuV2.without(t, gnuV2.symbol(t, "caller")),
			missing: []string{"caller"}, count: 1, skipped: map[translate.Reason]int{translate.CFADeref: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.file.check(t, tt.section, tt.list)
			var missing []string
			skipped := 0
			for _, f := range r.Findings {
				switch f.Kind {
				case Missing:
					missing = append(missing, f.Symbol)
				case Skipped:
					skipped++
					if f.Reason == "" || f.Detail == "" {
						t.Errorf("skipped without a reason: %+v", f)
					}
				case Disagree:
					t.Errorf("disagreement: %s", f)
				}
			}
			if r.Agree != tt.agree || r.Missing != tt.count || !cmp.Equal(missing, tt.missing) || !cmp.Equal(r.Skipped, tt.skipped) {
				t.Errorf("agree %v, %d missing %q, skipped %v; want %v, %d missing %q, skipped %v",
					r.Agree, r.Missing, missing, r.Skipped, tt.agree, tt.count, tt.missing, tt.skipped)
			}
			n := 0
			for _, c := range tt.skipped {
				n += c
			}
			if skipped != n {
				t.Errorf("%d Skipped findings, want %d", skipped, n)
			}
			// The section against executed tables says the same.
			if tt.section != nil {
				tb, err := sframe.Open(tt.section, tt.file.addr)
				if err != nil {
					t.Fatal(err)
				}
				l, err := loadCFI(tt.file.f)
				if err != nil {
					t.Fatal(err)
				}
				r2 := check(input{Machine: tt.file.f.ELF.Machine, Order: tt.file.f.ELF.ByteOrder, SFrame: tb, Tables: l.Tables,
					Symbol: tt.file.f.Symbolizer(), PLTs: pltfind.Sections(tt.file.f.ELF), List: tt.list})
				if diff := cmp.Diff(r, r2); diff != "" {
					t.Errorf("(-Stream +Tables):\n%s", diff)
				}
			}
		})
	}
}
