package translate

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestEmitMatchesFuncs: handing functions to Input.Emit, one at a time
// with reused rows, gives Result.Funcs once stably sorted by start
// address, with the same counts and diagnostics, for every linked GNU
// fixture, both versions and both outermost forms; so does translating
// from cfi.Index's entries instead of parsed FDEs.
func TestEmitMatchesFuncs(t *testing.T) {
	n := eachLinked(t, false, func(name string, f *elfread.File) {
		for _, v := range []uint8{sframe.Version2, sframe.Version3} {
			for _, gap := range []bool{false, true} {
				o := Options{Version: v, OutermostGap: gap, SignalOutermost: true}
				want := translateScan(t, f, o, nil)
				var got []sframe.Function
				res := translateScan(t, f, o, func(fn *sframe.Function) error {
					c := *fn
					c.Rows = slices.Clone(fn.Rows)
					got = append(got, c)
					return nil
				})
				if len(res.Funcs) != 0 {
					t.Errorf("%s: with Emit, Result.Funcs has %d functions", name, len(res.Funcs))
				}
				slices.SortStableFunc(got, func(a, b sframe.Function) int {
					if a.Start < b.Start {
						return -1
					}
					if a.Start > b.Start {
						return 1
					}
					return 0
				})
				if diff := cmp.Diff(want.Funcs, got); diff != "" {
					t.Errorf("%s V%d gap=%v: (-Funcs +emitted)\n%s", name, v, gap, diff)
				}
				res.Funcs = want.Funcs
				if diff := cmp.Diff(want, res); diff != "" {
					t.Errorf("%s V%d gap=%v: results differ (-Funcs +Emit)\n%s", name, v, gap, diff)
				}
				// The same from cfi.Index's compact entries.
				idx, err := cfi.Index(f)
				if err != nil {
					t.Fatal(err)
				}
				res2, err := Translate(Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, Entries: idx.Entries, ExecEntry: idx.ExecuteEntry,
					PLTs: pltSections(t, f.ELF)}, o)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, res2); diff != "" {
					t.Errorf("%s V%d gap=%v: results differ (-FDEs +Entries)\n%s", name, v, gap, diff)
				}
			}
		}
	})
	if n == 0 {
		t.Fatal("no linked fixtures")
	}
}

func translateScan(t *testing.T, f *elfread.File, o Options, emit func(*sframe.Function) error) *Result {
	t.Helper()
	st, err := cfi.Scan(f)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Translate(Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, FDEs: st.FDEs, Exec: st.Execute,
		PLTs: pltSections(t, f.ELF), Emit: emit}, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
