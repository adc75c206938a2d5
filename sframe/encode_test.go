package sframe_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func TestEncodeV2RejectsFlex(t *testing.T) {
	fn := sframe.Function{Start: 0x1234, Size: 8, Flex: true, Rows: []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 10}}}}
	_, err := sframe.Encode([]sframe.Function{fn}, sframe.Options{Version: 2, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8})
	var fe *sframe.FuncError
	if !errors.As(err, &fe) || fe.Start != 0x1234 || !strings.Contains(err.Error(), "0x1234") {
		t.Fatalf("err = %v, want a FuncError naming 0x1234", err)
	}
	// A default FDE whose CFA is not SP/FP based is refused in any version.
	fn.Flex = false
	if _, err := sframe.Encode([]sframe.Function{fn}, sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8}); !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a FuncError", err)
	}
}

// TestEncodeWidths checks the narrowest FRE type and data-word size.
func TestEncodeWidths(t *testing.T) {
	sp := sframe.SPReg(sframe.ABIAArch64LE)
	tests := []struct {
		size     uint32
		start    uint32
		cfa      int32
		freType  uint8
		wordSize uint8
	}{
		{size: 0xff, start: 0x10, cfa: 127, freType: sframe.FREAddr1, wordSize: 1},
		{size: 0x100, start: 0x10, cfa: 128, freType: sframe.FREAddr2, wordSize: 2},
		{size: 0xffff, start: 0xfff0, cfa: -32768, freType: sframe.FREAddr2, wordSize: 2},
		{size: 0x10000, start: 0x10, cfa: 32768, freType: sframe.FREAddr4, wordSize: 4},
		{size: 0x10, start: 0, cfa: -128, freType: sframe.FREAddr1, wordSize: 1},
	}
	for _, tt := range tests {
		fn := sframe.Function{Start: 0x400000, Size: tt.size, Rows: []sframe.Row{
			{Start: tt.start, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: tt.cfa}, RA: sframe.Loc{Kind: sframe.LocCFA, Offset: -8}, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -16}},
		}}
		b, err := sframe.Encode([]sframe.Function{fn}, sframe.Options{Version: 3, ABI: sframe.ABIAArch64LE, Order: binary.LittleEndian, Addr: 0x1000, PCRel: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := sframe.Decode(b, 0x1000)
		if err != nil {
			t.Fatal(err)
		}
		d := s.FDEs[0]
		if d.Start != 0x400000 || d.FREType != tt.freType || d.FREs[0].WordSize != tt.wordSize || d.FREs[0].NumWords != 3 {
			t.Errorf("size %#x cfa %d: start %#x FRE type %d word size %d words %d, want type %d size %d",
				tt.size, tt.cfa, d.Start, d.FREType, d.FREs[0].WordSize, d.FREs[0].NumWords, tt.freType, tt.wordSize)
		}
		if diff := cmp.Diff([]sframe.Function{fn}, s.Functions()); diff != "" {
			t.Errorf("model changed (-want +got):\n%s", diff)
		}
	}
}

// TestReencodeAcrossVersions converts every V2/V3 fixture to V2 and V3,
// with and without PCREL, at another address and in the other byte order,
// and checks that the neutral model survives (V2 drops flex functions and
// the signal bit).
func TestReencodeAcrossVersions(t *testing.T) {
	for _, path := range fixtures(t) {
		es := loadFixture(t, path)
		sec, err := sframe.Decode(es.Data, es.Addr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if sec.Header.Version == sframe.Version1 {
			continue
		}
		orig := sec.Functions()
		for _, ver := range []uint8{2, 3} {
			for _, pcrel := range []bool{false, true} {
				o := sec.Options()
				o.Version, o.PCRel, o.Addr = ver, pcrel, o.Addr+0x1000
				if o.Order == binary.LittleEndian {
					o.Order = binary.BigEndian
				} else {
					o.Order = binary.LittleEndian
				}
				want := orig
				if ver == 2 {
					want = nil
					for _, f := range orig {
						if !f.Flex {
							f.Signal = false
							want = append(want, f)
						}
					}
				}
				b, err := sframe.Encode(want, o)
				if err != nil {
					t.Fatalf("%s V%d pcrel=%v: %v", filepath.Base(path), ver, pcrel, err)
				}
				s2, err := sframe.Decode(b, o.Addr)
				if err != nil {
					t.Fatalf("%s V%d pcrel=%v: decode: %v", filepath.Base(path), ver, pcrel, err)
				}
				if diff := cmp.Diff(want, s2.Functions(), cmp.Comparer(func(a, b []sframe.Function) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
					t.Errorf("%s V%d pcrel=%v (-want +got):\n%s", filepath.Base(path), ver, pcrel, diff)
				}
			}
		}
	}
}
