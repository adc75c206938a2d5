package sframe

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// TestEncoderChunks: FREs spread over many small chunks join into the
// bytes one chunk gives.
func TestEncoderChunks(t *testing.T) {
	var funcs []Function
	for i := range 200 {
		fn := Function{Start: 0x1000 + uint64(i)*0x100, Size: 0x80}
		for r := range i % 7 {
			fn.Rows = append(fn.Rows, Row{Start: uint32(r * 3), CFA: Loc{Kind: LocReg, Reg: 7, Offset: int32(8 + 8*r)}, RA: Loc{Kind: LocFixed, Offset: -8}})
		}
		funcs = append(funcs, fn)
	}
	o := Options{Version: Version3, ABI: ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8, PCRel: true, Sort: true, Addr: 0x9000}
	want, err := Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	old := freChunk
	freChunk = 16
	defer func() { freChunk = old }()
	e, err := NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range funcs {
		if err := e.Add(&funcs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.full) < 10 {
		t.Fatalf("only %d full chunks", len(e.full))
	}
	got, err := e.Section(o.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("chunked FREs differ from one chunk")
	}
}

// TestWordSize: the narrowest data-word size for signed words and
// unsigned control words, at each boundary.
func TestWordSize(t *testing.T) {
	for _, tc := range []struct {
		w    int64
		ctrl bool
		want int
	}{
		{0, false, 1}, {127, false, 1}, {-128, false, 1}, {128, false, 2}, {-129, false, 2},
		{32767, false, 2}, {-32768, false, 2}, {32768, false, 4}, {-32769, false, 4},
		{math.MaxInt32, false, 4}, {math.MinInt32, false, 4}, {math.MaxInt32 + 1, false, 8}, {math.MinInt32 - 1, false, 8},
		{0, true, 1}, {255, true, 1}, {256, true, 2}, {65535, true, 2}, {65536, true, 4},
		{math.MaxUint32, true, 4}, {math.MaxUint32 + 1, true, 8}, {-1, true, 8},
	} {
		if got := wordSize(tc.w, tc.ctrl); got != tc.want {
			t.Errorf("wordSize(%d, control %v) = %d, want %d", tc.w, tc.ctrl, got, tc.want)
		}
	}
}

// TestOffsetsSize: offsetsSize is wordSize of the widest offset, for
// every pair of boundary values and for none.
func TestOffsetsSize(t *testing.T) {
	vals := []int64{0, 1, -1, 127, -128, 128, -129, 32767, -32768, 32768, -32769,
		math.MaxInt32, math.MinInt32, math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64}
	if got := offsetsSize(nil); got != 1 {
		t.Errorf("offsetsSize(none) = %d, want 1", got)
	}
	for _, a := range vals {
		for _, b := range vals {
			want := max(wordSize(a, false), wordSize(b, false))
			if got := offsetsSize([]int64{a, b}); got != want {
				t.Errorf("offsetsSize(%d, %d) = %d, want %d", a, b, got, want)
			}
		}
	}
}
