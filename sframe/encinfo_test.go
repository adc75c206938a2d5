package sframe_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// encinfoFuncs are functions of every FRE type (by size) and every
// data-word size (by CFA offset), not in address order.
func encinfoFuncs() []sframe.Function {
	ra := sframe.Loc{Kind: sframe.LocFixed, Offset: -8}
	row := func(start uint32, cfa int32) sframe.Row {
		return sframe.Row{Start: start, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 7, Offset: cfa}, RA: ra}
	}
	return []sframe.Function{
		{Start: 0x5000, Size: 0x10, Rows: []sframe.Row{row(0, 8), row(1, 16)}},                           // 1-byte starts, 1-byte words
		{Start: 0x1000, Size: 0x300, Rows: []sframe.Row{row(0, 8), row(0x200, 0x1000)}},                  // 2-byte starts, 1- and 2-byte words
		{Start: 0x20000, Size: 0x20000, Rows: []sframe.Row{row(0, 0x12345), row(0x10000, 8), row(1, 8)}}, // 4-byte starts
		{Start: 0x3000, Size: 0x10, Rows: []sframe.Row{{Start: 0, RAUndefined: true}}},                   // no data words
	}
}

// TestEncoderStartField: the start fields are where the decoded header
// locates them (Size, FDEOff, FDESize: what a relocatable object's
// relocations need), 4 bytes in V2 and 8 in V3, in both versions, with and without an auxiliary header, sorted or in the
// order added: each holds its function's start (absolute, with the
// section at address 0), in the field's size.
func TestEncoderStartField(t *testing.T) {
	funcs := encinfoFuncs()
	for _, v := range []uint8{sframe.Version2, sframe.Version3} {
		for _, aux := range [][]byte{nil, {1, 2, 3}} {
			for _, sorted := range []bool{false, true} {
				name := fmt.Sprintf("V%d aux=%d sorted=%v", v, len(aux), sorted)
				o := sframe.Options{Version: v, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8, Sort: sorted, AuxHdr: aux}
				e, err := sframe.NewEncoder(o)
				if err != nil {
					t.Fatal(err)
				}
				for i := range funcs {
					if err := e.Add(&funcs[i]); err != nil {
						t.Fatal(err)
					}
				}
				sec, err := e.Section(0)
				if err != nil {
					t.Fatal(err)
				}
				dec, err := sfsection.Decode(sec, 0)
				if err != nil {
					t.Fatal(err)
				}
				for i, d := range dec.FDEs {
					h := &dec.Header
					off, size := h.Size()+int(h.FDEOff)+i*h.FDESize(), 4
					if h.Version == sframe.Version3 {
						size = 8
					}
					var got uint64
					switch size {
					case 4:
						got = uint64(binary.LittleEndian.Uint32(sec[off:]))
					case 8:
						got = binary.LittleEndian.Uint64(sec[off:])
					default:
						t.Fatalf("%s: field size %d", name, size)
					}
					if want := map[uint8]int{2: 4, 3: 8}[v]; size != want {
						t.Errorf("%s: field size %d, want %d", name, size, want)
					}
					if got != d.Start {
						t.Errorf("%s: FDE %d: field at %d holds %#x, the FDE starts at %#x", name, i, off, got, d.Start)
					}
				}
			}
		}
	}
}
