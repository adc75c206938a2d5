package translate

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestSplitOutermost: with Options.OutermostGap, what the emitter hands
// over of each function.
func TestSplitOutermost(t *testing.T) {
	cfa := func(off int32) sframe.Loc { return sframe.Loc{Kind: sframe.LocReg, Reg: 7, Offset: off} }
	row := func(start uint32, off int32) sframe.Row { return sframe.Row{Start: start, CFA: cfa(off)} }
	undef := func(start uint32) sframe.Row { return sframe.Row{Start: start, RAUndefined: true} }
	tests := []struct {
		name string
		in   []sframe.Function
		want []sframe.Function
	}{
		{"untouched", []sframe.Function{{Start: 0x100, Size: 8, Rows: []sframe.Row{row(0, 8)}}},
			[]sframe.Function{{Start: 0x100, Size: 8, Rows: []sframe.Row{row(0, 8)}}}},
		{"_start: outermost throughout", []sframe.Function{{Start: 0x100, Size: 0x26, Rows: []sframe.Row{undef(0)}}}, nil},
		{"outermost prefix", []sframe.Function{{Start: 0x100, Size: 0x20, Rows: []sframe.Row{undef(0), row(4, 8), row(6, 16)}}},
			[]sframe.Function{{Start: 0x104, Size: 0x1c, Rows: []sframe.Row{row(0, 8), row(2, 16)}}}},
		{"outermost tail", []sframe.Function{{Start: 0x100, Size: 0x20, Rows: []sframe.Row{row(0, 8), undef(0x10)}}},
			[]sframe.Function{{Start: 0x100, Size: 0x10, Rows: []sframe.Row{row(0, 8)}}}},
		{"outermost middle", []sframe.Function{{Start: 0x100, Size: 0x20, Rows: []sframe.Row{row(0, 8), undef(4), undef(6), row(8, 16)}}},
			[]sframe.Function{
				{Start: 0x100, Size: 4, Rows: []sframe.Row{row(0, 8)}},
				{Start: 0x108, Size: 0x18, Rows: []sframe.Row{row(0, 16)}},
			}},
		{"pcmask untouched", []sframe.Function{{Start: 0x100, Size: 0x20, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{undef(0)}}},
			[]sframe.Function{{Start: 0x100, Size: 0x20, PCType: sframe.PCMask, RepSize: 16, Rows: []sframe.Row{undef(0)}}}},
	}
	for _, tt := range tests {
		var got []sframe.Function
		emit := emitter(collect(&got), Options{OutermostGap: true})
		for _, fn := range tt.in {
			if err := emit(fn); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []sframe.Function) bool {
			return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b)
		})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
