package translate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// translateCursor translates f's FDEs as a conversion does: cfi.File's
// entries, sorted and executed one at a time through a cfi.Context into
// one reused table. It returns the result, every function in the order
// emitted, and the number of FDEs that could not be executed.
func translateCursor(t *testing.T, f *elfread.File, o Options) (*Result, []sframe.Function, int) {
	t.Helper()
	st := openCFI(t, f)
	cfi.SortEntries(st.Entries())
	var funcs []sframe.Function
	ctx := st.Context(st.Entries())
	res, err := translateFile(Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, PLTs: pltSections(t, f.ELF), Symbol: f.Symbolizer()},
		ctx, o, collect(&funcs))
	if err != nil {
		t.Fatal(err)
	}
	return res, funcs, len(st.Errors()) + len(ctx.Errors())
}

// TestCursorMatchesTables: translating from a Context (each FDE executed
// when reached, into one reused table; the functions' rows reused from
// call to call) emits the same functions in the same order, with the
// same counts and diagnostics, as translating every table executed at
// once (alltables.Execute, Tables), for every linked GNU fixture and two system
// files, both versions and both outermost forms.
func TestCursorMatchesTables(t *testing.T) {
	n := eachLinked(t, true, func(name string, f *elfread.File) {
		for _, v := range []uint8{sframe.Version2, sframe.Version3} {
			for _, gap := range []bool{false, true} {
				o := Options{Version: v, OutermostGap: gap, SignalOutermost: true}
				tables, lerrs := alltables.Execute(openCFI(t, f))
				var want []sframe.Function
				wantRes, err := translateFile(Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, PLTs: pltSections(t, f.ELF), Symbol: f.Symbolizer()},
					alltables.Sorted(tables), o, collect(&want))
				if err != nil {
					t.Fatal(err)
				}
				res, got, errs := translateCursor(t, f, o)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s V%d gap=%v: functions (-tables +cursor)\n%s", name, v, gap, diff)
				}
				if diff := cmp.Diff(wantRes, res, cmp.AllowUnexported(Result{})); diff != "" {
					t.Errorf("%s V%d gap=%v: results (-tables +cursor)\n%s", name, v, gap, diff)
				}
				if errs != len(lerrs) {
					t.Errorf("%s V%d gap=%v: %d CFI errors from the cursor, %d from alltables.Execute", name, v, gap, errs, len(lerrs))
				}
			}
		}
	})
	if n == 0 {
		t.Fatal("no linked fixtures")
	}
}

// TestPartsMatchWhole: a file's functions translated in two parts, cut
// wherever Cut allows, each part on its own goroutine with its own
// execution context (cfi.File.Context) and the PLTs with the first, give
// the functions of one translation in the same order (the first part's,
// then the second's) and, added, the same result; for every linked GNU
// fixture (at every cut) and two system files (at three), both versions
// and both outermost forms.
func TestPartsMatchWhole(t *testing.T) {
	cuts := 0
	n := eachLinked(t, true, func(name string, f *elfread.File) {
		for _, v := range []uint8{sframe.Version2, sframe.Version3} {
			for _, gap := range []bool{false, true} {
				o := Options{Version: v, OutermostGap: gap, SignalOutermost: true}
				want, wantFns, _ := translateCursor(t, f, o)
				st := openCFI(t, f)
				cfi.SortEntries(st.Entries())
				tr, err := New(Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, PLTs: pltSections(t, f.ELF), Symbol: f.Symbolizer()}, o)
				if err != nil {
					t.Fatal(err)
				}
				all := st.Entries()
				// Every cut in a small file, three in a large one.
				step := 1
				if len(all) > 64 {
					step = len(all)/4 + 1
				}
				for from := 1; from < len(all); from += step {
					cs := Cuts(all, []int{from})
					if len(cs) == 0 {
						break
					}
					c := cs[0]
					cuts++
					var first, rest []sframe.Function
					res, err := tr.PLTs(collect(&first))
					if err != nil {
						t.Fatal(err)
					}
					var r2 *Result
					var err2 error
					done := make(chan struct{})
					go func() {
						defer close(done)
						r2, err2 = tr.Functions(st.Context(all[c:]), collect(&rest))
					}()
					r1, err1 := tr.Functions(st.Context(all[:c]), collect(&first))
					<-done
					if err1 != nil || err2 != nil {
						t.Fatal(err1, err2)
					}
					res.Add(r1)
					res.Add(r2)
					if d := cmp.Diff(wantFns, append(first, rest...)); d != "" {
						t.Errorf("%s V%d gap=%v cut %d: functions (-whole +parts)\n%s", name, v, gap, c, d)
					}
					if d := cmp.Diff(want, res, cmp.AllowUnexported(Result{})); d != "" {
						t.Errorf("%s V%d gap=%v cut %d: results (-whole +parts)\n%s", name, v, gap, c, d)
					}
				}
			}
		}
	})
	if n == 0 || cuts == 0 {
		t.Fatalf("%d linked files, %d cuts", n, cuts)
	}
}
