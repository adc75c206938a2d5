package translate

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// verdict is what Describer.Decide says of a function.
type verdict uint8

const (
	vDescribed verdict = iota // described
	vSkipped                  // not described, with a diagnostic
	vIgnored                  // not described, without one
)

// described is what a Describer says of every FDE of a file, and the
// ranges of the functions the Translator emitted for the same file.
type described struct {
	verdicts []verdict
	spans    []span       // the FDEs, in the order given to the Describer
	diags    []Diagnostic // the skipped verdicts' diagnostics, in order
}

// describeAll gives a Describer every FDE, sorted by start address as
// the Translator takes them, with table(i) executing FDE i (nil on failure).
func describeAll(t *testing.T, m elf.Machine, plts []PLT, o Options, n int, rangeOf func(int) (uint64, uint64), table func(int) *cfi.Table) described {
	t.Helper()
	d, err := NewDescriber(m, binary.LittleEndian, plts, o)
	if err != nil {
		t.Fatal(err)
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		sa, _ := rangeOf(a)
		sb, _ := rangeOf(b)
		return cmp.Compare(sa, sb)
	})
	var out described
	for _, i := range order {
		start, size := rangeOf(i)
		tab := table(i)
		d.Next(start, size, tab != nil)
		isDescribed, diag := d.Decide(tab)
		v := vIgnored
		switch {
		case isDescribed:
			v = vDescribed
		case diag != nil:
			v = vSkipped
		}
		out.verdicts = append(out.verdicts, v)
		out.spans = append(out.spans, span{start, start + size})
		if diag != nil {
			if isDescribed {
				t.Errorf("%#x: described with a diagnostic", start)
			}
			out.diags = append(out.diags, *diag)
		}
	}
	return out
}

func skippedDiags(res *Result) []Diagnostic {
	var out []Diagnostic
	for _, d := range res.Diags {
		if d.Skipped {
			out = append(out, d)
		}
	}
	return out
}

// TestDescriberMatchesTranslate: a Describer skips exactly the functions
// the Translator skips, with the same diagnostics, and every function it calls
// described is covered by a function the Translator emitted (and every one it
// skips for its rows is not), for every linked GNU fixture and two system
// files, both versions and both outermost forms.
func TestDescriberMatchesTranslate(t *testing.T) {
	skipped := map[Reason]int{}
	files := eachLinked(t, true, func(name string, f *elfread.File) {
		plts := pltSections(t, f.ELF)
		for _, v := range []uint8{sframe.Version2, sframe.Version3} {
			for _, gap := range []bool{false, true} {
				o := Options{Version: v, OutermostGap: gap}
				idx := openCFI(t, f)
				entries := idx.Entries()
				var emitted []span
				cfi.SortEntries(entries)
				res, err := translateFile(Input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, PLTs: plts}, idx.Context(entries), o,
					func(fn *sframe.Function) error {
						emitted = append(emitted, span{fn.Start, fn.Start + uint64(fn.Size)})
						return nil
					})
				if err != nil {
					t.Fatal(err)
				}
				ctx := idx.Context(nil)
				var fde cfi.FDE
				var tab cfi.Table
				got := describeAll(t, f.ELF.Machine, plts, o, len(entries),
					func(i int) (uint64, uint64) { return entries[i].Start, entries[i].Size },
					func(i int) *cfi.Table {
						if ctx.ParseEntry(entries[i], &fde) != nil || ctx.Execute(&fde, &tab) != nil {
							return nil
						}
						return &tab
					})
				if diff := gocmp.Diff(skippedDiags(res), got.diags); diff != "" {
					t.Errorf("%s V%d gap=%v: skipped (-Translator +Describer):\n%s", name, v, gap, diff)
				}
				for i, verdict := range got.verdicts {
					s := got.spans[i]
					covered := spanIndex(emitted, s.lo, s.hi) >= 0
					switch {
					case verdict == vDescribed && !covered:
						t.Errorf("%s V%d gap=%v: [%#x,%#x) described, but no function emitted there", name, v, gap, s.lo, s.hi)
					case verdict == vSkipped && covered && got.diagAt(s.lo).Reason != Overlap:
						t.Errorf("%s V%d gap=%v: [%#x,%#x) skipped, but a function was emitted there", name, v, gap, s.lo, s.hi)
					}
				}
				for _, d := range got.diags {
					skipped[d.Reason]++
				}
			}
		}
	})
	if files == 0 {
		t.Fatal("no linked fixtures")
	}
	t.Logf("%d files; skipped, all versions and forms: %v", files, skipped)
}

func (d described) diagAt(start uint64) Diagnostic {
	for _, g := range d.diags {
		if g.Start == start {
			return g
		}
	}
	return Diagnostic{}
}

// TestDescriberCases: the decisions one at a time, on hand-built tables,
// against the Translator on the same tables.
func TestDescriberCases(t *testing.T) {
	ok := cfi.Row{CFA: cfaSP8, Regs: []cfi.RegRule{ripSaved}}
	at := func(r cfi.Row, loc uint64) cfi.Row { r.Loc = loc; return r }
	undef := cfi.Row{CFA: cfaSP8, Regs: []cfi.RegRule{{Reg: 16, Rule: cfi.Rule{Kind: cfi.Undefined}}}}
	drap := cfi.Row{CFA: cfaReg(10, 0), Regs: []cfi.RegRule{ripSaved}} // CFA on r10: V3 flex only
	expr := cfi.Row{CFA: cfi.CFA{Kind: cfi.CFAExpression, Expr: []byte{0x30}}, Regs: []cfi.RegRule{ripSaved}}
	gotEntry := []byte{0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x66, 0x90} // jmp *GOT(%rip); xchg %ax,%ax
	plts := []PLT{{Name: ".plt.got", Addr: 0x9000, Data: append(append([]byte{}, gotEntry...), gotEntry...), EntSize: 8}}
	tables := []*cfi.Table{
		table(x86CIE, 0x3000, 0x10, at(ok, 0x3000)),
		table(x86CIE, 0x1000, 0x10, at(ok, 0x1000)),
		table(x86CIE, 0x1008, 0x10, at(ok, 0x1008)),    // overlaps the one before
		table(x86CIE, 0x1010, 0x08, at(ok, 0x1010)),    // overlaps 0x1008, which was skipped: taken
		table(x86CIE, 0x2000, 0, at(ok, 0x2000)),       // empty
		table(x86CIE, 0, 0x10, at(ok, 0)),              // discarded
		table(x86CIE, 0x4000, 0x20, at(drap, 0x4000)),  // flex
		table(x86CIE, 0x5000, 0x20, at(undef, 0x5000)), // _start
		table(x86CIE, 0x6000, 0x20, at(expr, 0x6000)),  // cfa-expression
		table(x86CIE, 0x9000, 0x10, at(expr, 0x9000)),  // in a PLT described from its instructions
		nil, // cannot be executed
		table(x86CIE, 0x5800, 0x20, at(undef, 0x5800), at(ok, 0x5808)), // outermost in part: split, not skipped
	}
	rangeOf := func(i int) (uint64, uint64) {
		if tables[i] == nil {
			return 0x7000, 0x10
		}
		return tables[i].FDE.Start, tables[i].FDE.Size
	}
	tests := []struct {
		o    Options
		want map[uint64]string // start → verdict, reason for skips
	}{
		{Options{Version: 3}, map[uint64]string{0x1000: "described", 0x1008: "overlap", 0x1010: "described", 0x3000: "described",
			0x4000: "described", 0x5000: "described", 0x5800: "described", 0x6000: "cfa-expression", 0x9000: "described", 0x7000: "ignored", 0x2000: "ignored", 0: "ignored"}},
		{Options{Version: 2}, map[uint64]string{0x1000: "described", 0x1008: "overlap", 0x1010: "described", 0x3000: "described",
			0x4000: "cfa-register", 0x5000: "described", 0x5800: "described", 0x6000: "cfa-expression", 0x9000: "described", 0x7000: "ignored", 0x2000: "ignored", 0: "ignored"}},
		{Options{Version: 2, OutermostGap: true}, map[uint64]string{0x1000: "described", 0x1008: "overlap", 0x1010: "described", 0x3000: "described",
			0x4000: "cfa-register", 0x5000: "outermost", 0x5800: "described", 0x6000: "cfa-expression", 0x9000: "described", 0x7000: "ignored", 0x2000: "ignored", 0: "ignored"}},
	}
	for _, tt := range tests {
		got := describeAll(t, elf.EM_X86_64, plts, tt.o, len(tables), rangeOf, func(i int) *cfi.Table { return tables[i] })
		have := map[uint64]string{}
		for i, v := range got.verdicts {
			s := got.spans[i].lo
			switch v {
			case vDescribed:
				have[s] = "described"
			case vIgnored:
				have[s] = "ignored"
			case vSkipped:
				have[s] = string(got.diagAt(s).Reason)
			}
		}
		if diff := gocmp.Diff(tt.want, have); diff != "" {
			t.Errorf("V%d gap=%v (-want +got):\n%s", tt.o.Version, tt.o.OutermostGap, diff)
		}
		res, err := translateAll(Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian, PLTs: plts}, tables, tt.o)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(skippedDiags(res.Result), got.diags); diff != "" {
			t.Errorf("V%d gap=%v: skipped (-Translator +Describer):\n%s", tt.o.Version, tt.o.OutermostGap, diff)
		}
	}
	if _, err := NewDescriber(elf.EM_PPC64, binary.BigEndian, nil, Options{}); err == nil {
		t.Error("ppc64: no error")
	}
}
