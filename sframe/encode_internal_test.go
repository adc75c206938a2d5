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

// TestPlainFREs: wherever plainFREs takes a function's rows, it writes
// the bytes and counts rowFREs gives for them, on each ABI and byte order
// it serves (with and without fixed RA and FP slots), for rows of every
// kind with offsets at the data-word boundaries; and it takes the rows
// real AMD64 and AArch64 functions have.
func TestPlainFREs(t *testing.T) {
	offs := []int32{0, 8, -8, 127, -128, 128, -129, 32767, -32768, 32768, -32769, math.MaxInt32, math.MinInt32}
	kinds := []LocKind{LocUnsaved, LocFixed, LocDefault, LocCFA, LocCFAValue, LocReg, LocRegDeref}
	rng := uint64(1)
	next := func(n int) int { // xorshift: the same rows every run
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	loc := func(regs []uint32) Loc {
		return Loc{Kind: kinds[next(len(kinds))], Reg: regs[next(len(regs))], Offset: offs[next(len(offs))]}
	}
	for _, o := range []Options{
		{Version: Version3, ABI: ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8},
		{Version: Version2, ABI: ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8, CFAFixedFP: -16},
		{Version: Version3, ABI: ABIAArch64LE, Order: binary.LittleEndian},
		{Version: Version3, ABI: ABIAArch64BE, Order: binary.BigEndian},
		{Version: Version2, ABI: ABIAArch64BE, Order: binary.BigEndian, CFAFixedFP: -16},
	} {
		e, err := NewEncoder(o)
		if err != nil {
			t.Fatal(err)
		}
		regs := []uint32{e.sp, e.fp, 0, 16}
		taken := 0
		for i := range 20000 {
			rows := make([]Row, 1+next(3))
			for k := range rows {
				r := &rows[k]
				r.Start, r.CFA, r.RA, r.FP = uint32(k*3), loc(regs), loc(regs), loc(regs)
				r.MangledRA, r.RAUndefined = next(4) == 0, next(50) == 0
				if next(2) == 0 { // mostly the usual shapes
					r.CFA.Kind, r.CFA.Reg, r.RAUndefined = LocReg, regs[next(2)], false
					r.RA.Kind, r.FP.Kind = []LocKind{LocFixed, LocCFA}[next(2)], []LocKind{LocUnsaved, LocCFA}[next(2)]
				}
			}
			for _, asz := range []int{1, 2, 4} {
				buf := make([]byte, 3, 3+len(rows)*(4+1+4*maxDataWords)) // as Add makes room
				got, ok := e.plainFREs(rows, buf, asz)
				if !e.raSlot && e.fpSlot && !e.be { // AMD64's options: amd64FREs too
					amd, amdOK := e.amd64FREs(rows, append(make([]byte, 0, cap(buf)), buf...), asz)
					if amdOK != ok || !bytes.Equal(amd, got) {
						t.Fatalf("%v: rows %+v: amd64FREs % x (%v), plainFREs % x (%v)", o.ABI, rows, amd, amdOK, got, ok)
					}
				}
				want, err := e.rowFREs(&Function{Start: 0x1000, Rows: rows}, buf, asz)
				if !ok {
					if len(got) != len(buf) {
						t.Fatalf("%v: plainFREs refused rows %+v but left %d bytes", o.ABI, rows, len(got)-len(buf))
					}
					continue
				}
				taken++
				if err != nil {
					t.Fatalf("%v: plainFREs took rows %+v that rowFREs refuses: %v", o.ABI, rows, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%v case %d: rows %+v: plainFREs % x, rowFREs % x", o.ABI, i, rows, got, want)
				}
			}
		}
		if taken < 3*1000 {
			t.Errorf("%v: plainFREs took only %d of 60000 row sets", o.ABI, taken)
		}
		t.Logf("%v: %d of 60000 row sets taken", o.ABI, taken)
	}
}

// TestArena: encoders whose FREs go into an arena (Reserve, Fork) give
// the section Encode gives, whether Section moves them in place (each fits
// its part, appended in carving order) or joins them into a new buffer (a
// part outgrown, parts appended in another order, more functions than
// the room in front holds), in both versions.
func TestArena(t *testing.T) {
	var funcs []Function
	for i := range 3000 {
		fn := Function{Start: 0x1000 + uint64(i)*0x100, Size: 0x80}
		for r := range i % 9 {
			fn.Rows = append(fn.Rows, Row{Start: uint32(r * 5), CFA: Loc{Kind: LocReg, Reg: 7, Offset: int32(8 + 300*r)},
				RA: Loc{Kind: LocFixed, Offset: -8}, FP: Loc{Kind: LocCFA, Offset: int32(-16 * r)}})
		}
		funcs = append(funcs, fn)
	}
	for _, v := range []uint8{Version2, Version3} {
		o := Options{Version: v, ABI: ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8, PCRel: true, Sort: true, Addr: 0x9000}
		want, err := Encode(funcs, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name        string
			funcs, part int  // room for functions in front, bytes a part
			swap        bool // the last two parts carved in the other order
			inPlace     bool
		}{
			{"fits", len(funcs), 40000, false, true},
			{"part outgrown", len(funcs), 2000, false, false},
			{"first part outgrown", len(funcs), -2000, false, false},
			{"carved out of order", len(funcs), 40000, true, false},
			{"index outgrown", len(funcs) - 1, 40000, false, false},
		} {
			e, _ := NewEncoder(o)
			e.Reserve(tc.funcs, 20*max(tc.part, 40000), 4096)
			const parts = 6
			encs := make([]*Encoder, parts)
			for p := range encs {
				q := p
				if tc.swap && p >= parts-2 {
					q = 2*parts - 3 - p
				}
				n := tc.part
				if n < 0 { // the first part gets -n bytes, the others 40000
					n = 40000
					if p == 0 {
						n = -tc.part
					}
				}
				encs[q] = e.Fork(n)
			}
			e.Add(&funcs[0])
			for i := 1; i < len(funcs); i++ {
				if err := encs[i*parts/len(funcs)].Add(&funcs[i]); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range encs {
				if err := e.Append(p); err != nil {
					t.Fatal(err)
				}
			}
			buf, pre := e.arena.buf, e.arena.prefix
			front := HeaderSize + len(funcs)*map[uint8]int{Version2: fdeSizeV2, Version3: fdeSizeV3}[v]
			if got := e.inPlace(front); got != tc.inPlace {
				t.Errorf("v%d %s: in place %v, want %v", v, tc.name, got, tc.inPlace)
			}
			got, err := e.Section(o.Addr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("v%d %s: section differs from Encode's", v, tc.name)
			}
			if inArena := pre >= front && &got[0] == &buf[pre-front]; inArena != tc.inPlace {
				t.Errorf("v%d %s: section in the arena %v, want %v", v, tc.name, inArena, tc.inPlace)
			}
			if again, err := e.Section(o.Addr + 0x40); err != nil || len(again) != len(want) {
				t.Errorf("v%d %s: Section at another address: %d bytes, %v", v, tc.name, len(again), err)
			}
		}
	}
}
