package sframe

import (
	"bytes"
	"encoding/binary"
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
