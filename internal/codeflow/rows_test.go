package codeflow

import (
	"math"
	"reflect"
	"testing"
)

// TestHold: a Func's rows come back from hold as they went in, packed
// when every field fits in a packedRow, kept as they are otherwise.
func TestHold(t *testing.T) {
	const start = 0x401000
	full := Row{PC: start + 7, Base: BaseFP, CFAOff: 16, FP: Saved{OnStack, -16}, RA: Saved{OnStack, -8},
		RASigned: true, BKey: true, SP: Val{-4096, true}, FPVal: Val{-16, true}}
	for _, c := range []struct {
		name   string
		rows   []Row
		packed bool
	}{
		{"none", nil, false},
		{"entry", []Row{{PC: start, CFAOff: 8, FP: Saved{Where: InReg}, RA: Saved{OnStack, -8}, SP: Val{-8, true}}}, true},
		{"every field set", []Row{{PC: start, CFAOff: 8}, full}, true},
		{"lost, unknown values kept", []Row{{PC: start, FP: Saved{Lost, 12}, RA: Saved{Lost, -3}, SP: Val{5, false}, FPVal: Val{-7, false}}}, true},
		{"32-bit extremes", []Row{{PC: start + math.MaxUint32, CFAOff: math.MinInt32, SP: Val{math.MaxInt32, true}}}, true},
		{"offset over 32 bits", []Row{{PC: start, CFAOff: 8}, {PC: start + 4, CFAOff: math.MaxInt32 + 1}}, false},
		{"pc past 32 bits", []Row{{PC: start + math.MaxUint32 + 1}}, false},
		{"pc before start", []Row{{PC: start - 1}}, false},
		{"unknown base", []Row{{PC: start, Base: 2}}, false},
		{"unknown where", []Row{{PC: start, RA: Saved{Where: 3}}}, false},
	} {
		fn := Func{Start: start, End: start + 64, Entry: start, Rows: c.rows}
		h := hold(fn)
		if (h.packed != nil) != c.packed {
			t.Errorf("%s: packed %v, want %v", c.name, h.packed != nil, c.packed)
		}
		if got := h.fn(); !reflect.DeepEqual(got, fn) {
			t.Errorf("%s: got back %+v, want %+v", c.name, got, fn)
		}
	}
}
