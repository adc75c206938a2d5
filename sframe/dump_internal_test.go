package sframe

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

// referenceJSON is DumpJSON as it was before it streamed: the whole
// section as one value, through encoding/json's Encoder (each function
// made by the same jsonFunc.fill).
func referenceJSON(t *testing.T, s *Table) string {
	h := &s.Header
	js := jsonSection{
		Version: h.Version, Flags: h.Flags, ABI: h.ABI, ABIName: h.ABI.String(),
		CFAFixedFP: h.CFAFixedFP, CFAFixedRA: h.CFAFixedRA, AuxHdrLen: uint8(len(h.AuxHdr)),
		NumFDEs: h.NumFDEs, NumFREs: h.NumFREs, FRELen: h.FRELen, FDEOff: h.FDEOff, FREOff: h.FREOff,
		FlagNames: []string{}, Functions: []jsonFunc{},
	}
	if h.Flags&FlagFDESorted != 0 {
		js.FlagNames = append(js.FlagNames, "SFRAME_F_FDE_SORTED")
	}
	if h.Flags&FlagFramePointer != 0 {
		js.FlagNames = append(js.FlagNames, "SFRAME_F_FRAME_POINTER")
	}
	if h.Flags&FlagFDEFuncStartPCRel != 0 {
		js.FlagNames = append(js.FlagNames, "SFRAME_F_FDE_FUNC_START_PCREL")
	}
	for i := range int(h.NumFDEs) {
		var d FDE // fresh FREs for each function, as a whole decode has
		if err := s.FDE(i, &d); err != nil {
			t.Fatal(err)
		}
		var jf jsonFunc
		jf.fill(h, &d)
		js.Functions = append(js.Functions, jf)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(js); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDumpJSONStreamsTheSameBytes: DumpJSON writes function by function
// exactly what encoding/json writes for the whole decoded section, for sections
// with no function, functions without FREs, flex, mask and outermost
// rows, both byte orders.
func TestDumpJSONStreamsTheSameBytes(t *testing.T) {
	sp, fp := arch.AMD64.SP(), arch.AMD64.FP()
	cfa := Loc{Kind: LocReg, Reg: sp, Offset: 8}
	sets := map[string][]Function{
		"none":  nil,
		"empty": {{Start: 0x1000, Size: 4}},
		"mixed": {
			{Start: 0x1000, Size: 0x20, Signal: true, Rows: []Row{
				{Start: 0, CFA: cfa, RA: Loc{Kind: LocFixed}},
				{Start: 4, CFA: Loc{Kind: LocReg, Reg: fp, Offset: 16}, RA: Loc{Kind: LocFixed}, FP: Loc{Kind: LocCFA, Offset: -16}},
				{Start: 0x1f, RAUndefined: true},
			}},
			{Start: 0x2000, Size: 0x40, PCType: PCMask, RepSize: 16, Rows: []Row{{Start: 0, CFA: cfa, RA: Loc{Kind: LocFixed}}}},
			{Start: 0x3000, Size: 8, Flex: true, Rows: []Row{{Start: 0, CFA: Loc{Kind: LocRegDeref, Reg: 3, Offset: 24}, RA: Loc{Kind: LocReg, Reg: 12}, FP: Loc{Kind: LocCFAValue, Offset: -40}}}},
			{Start: 0x4000, Size: 8},
		},
	}
	for name, funcs := range sets {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			b, err := Encode(funcs, Options{Version: Version3, ABI: ABIAMD64LE, Order: order, PCRel: true, Sort: true, CFAFixedRA: -8})
			if err != nil {
				t.Fatal(err)
			}
			tb, err := Open(b, 0x400)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := tb.DumpJSON(&got); err != nil {
				t.Fatal(err)
			}
			if want := referenceJSON(t, tb); got.String() != want {
				t.Errorf("%s/%v: DumpJSON\n%s\nencoding/json\n%s", name, order, got.String(), want)
			}
		}
	}
}
