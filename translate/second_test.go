package translate

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestSecondMatchesOne: translating on two goroutines (Input.Second)
// hands over the same functions in the same order (the first part's then
// the second's) with the same diagnostics and counts as one goroutine,
// for every linked GNU fixture and two system files, both versions and
// both outermost forms, cut as small as possible so that the fixtures are
// split too.
func TestSecondMatchesOne(t *testing.T) {
	old := minSplit
	minSplit = 2
	defer func() { minSplit = old }()
	split := 0
	n := eachLinked(t, true, func(name string, f *elfread.File) {
		for _, v := range []uint8{sframe.Version2, sframe.Version3} {
			for _, gap := range []bool{false, true} {
				o := Options{Version: v, OutermostGap: gap, SignalOutermost: true}
				keep := func(to *[]sframe.Function) func(*sframe.Function) error {
					return func(fn *sframe.Function) error {
						c := *fn
						c.Rows = slices.Clone(fn.Rows)
						*to = append(*to, c)
						return nil
					}
				}
				one := func(second bool) (*Result, []sframe.Function, []error, bool) {
					st, err := cfi.Index(f)
					if err != nil {
						t.Fatal(err)
					}
					var first, rest []sframe.Function
					var st2 *cfi.Stream
					in := Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, Entries: st.Entries, ExecEntry: st.ExecuteEntry,
						PLTs: pltSections(t, f.ELF), Symbol: f.Symbolizer(), Emit: keep(&first)}
					if second {
						in.Second = func(int) (func(cfi.Entry) (*cfi.Table, error), func(*sframe.Function) error) {
							st2 = st.Clone()
							return st2.ExecuteEntry, keep(&rest)
						}
					}
					res, err := Translate(in, o)
					if err != nil {
						t.Fatal(err)
					}
					errs := st.Errors
					if st2 != nil {
						errs = append(errs, st2.Errors...)
					}
					return res, append(first, rest...), errs, st2 != nil
				}
				want, wantFns, wantErrs, _ := one(false)
				got, gotFns, gotErrs, didSplit := one(true)
				if didSplit {
					split++
				}
				if d := cmp.Diff(wantFns, gotFns); d != "" {
					t.Errorf("%s V%d gap=%v: functions differ (-one +two goroutines)\n%s", name, v, gap, d)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s V%d gap=%v: results differ (-one +two goroutines)\n%s", name, v, gap, d)
				}
				if len(wantErrs) != len(gotErrs) {
					t.Errorf("%s V%d gap=%v: %d CFI errors, %d on two goroutines", name, v, gap, len(wantErrs), len(gotErrs))
				}
			}
		}
	})
	if n == 0 || split == 0 {
		t.Fatalf("%d linked files, %d translations split", n, split)
	}
}

// TestCutPoint: the cut falls at the first FDE from the middle on that
// no earlier FDE reaches, and not at all when there is none before the
// last eighth or too few FDEs.
func TestCutPoint(t *testing.T) {
	old := minSplit
	minSplit = 4
	defer func() { minSplit = old }()
	type r struct{ start, size uint64 }
	for _, tc := range []struct {
		name   string
		ranges []r
		on     bool
		want   int
	}{
		{"disjoint", []r{{0, 10}, {10, 10}, {20, 10}, {30, 10}, {40, 10}, {50, 10}, {60, 10}, {70, 10}}, true, 4},
		{"off", []r{{0, 10}, {10, 10}, {20, 10}, {30, 10}, {40, 10}, {50, 10}, {60, 10}, {70, 10}}, false, 0},
		{"too few", []r{{0, 10}, {10, 10}, {20, 10}}, true, 0},
		{"overlap at the middle", []r{{0, 10}, {10, 10}, {20, 10}, {30, 25}, {40, 10}, {50, 10}, {60, 10}, {70, 10}}, true, 6},
		{"a long one before", []r{{0, 100}, {10, 10}, {20, 10}, {30, 10}, {40, 10}, {50, 10}, {60, 10}, {70, 10}}, true, 0},
		{"overlapping chain after the middle", []r{{0, 10}, {10, 10}, {20, 10}, {30, 10}, {40, 10}, {50, 10}, {60, 10}, {65, 10}, {70, 10}, {75, 10}, {80, 10}, {85, 10}, {90, 10}, {95, 10}, {100, 10}, {105, 10}}, true, 0},
		{"only the last eighth", []r{{0, 10}, {10, 10}, {20, 10}, {30, 10}, {35, 100}, {40, 10}, {50, 10}, {60, 10}, {70, 10}, {80, 10}, {90, 10}, {100, 10}, {110, 10}, {120, 10}, {140, 10}, {150, 10}}, true, 0},
	} {
		keep := make([]int, len(tc.ranges))
		for i := range keep {
			keep[i] = i
		}
		rangeOf := func(i int) (uint64, uint64, bool) { return tc.ranges[i].start, tc.ranges[i].size, true }
		if got := cutPoint(keep, rangeOf, tc.on); got != tc.want {
			t.Errorf("%s: cut at %d, want %d", tc.name, got, tc.want)
		}
	}
}
