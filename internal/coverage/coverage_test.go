package coverage

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSpans(t *testing.T) {
	got := Merge([]Span{{10, 20}, {0, 5}, {5, 8}, {15, 30}, {40, 40}})
	if diff := cmp.Diff([]Span{{0, 8}, {10, 30}}, got); diff != "" {
		t.Errorf("Merge (-want +got):\n%s", diff)
	}
	for addr, want := range map[uint64]bool{0: true, 7: true, 8: false, 9: false, 10: true, 29: true, 30: false} {
		if Inside(got, addr) != want {
			t.Errorf("Inside(%d) = %v", addr, !want)
		}
	}
	if n := Overlap(got, []Span{{4, 12}, {25, 50}}); n != 4+2+5 {
		t.Errorf("Overlap = %d, want 11", n)
	}
	c := Measure([]Span{{0, 100}}, []Span{{50, 60}, {0, 10}}, []uint64{0, 20, 55})
	if c != (Cover{CodeBytes: 100, CoveredBytes: 20, Funcs: 3, CoveredFuncs: 2}) {
		t.Errorf("Measure = %+v", c)
	}
}
