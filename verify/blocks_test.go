package verify

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// blockSection encodes three functions, the first two with the same
// rows (one shared block with Share), the third with a block of its own,
// and applies damage to the section bytes (fdeOff(i): the section offset
// of FDE i's FRE offset field).
func blockSection(t *testing.T, v uint8, damage func(b []byte, fdeOff func(int) int)) *sframe.Table {
	t.Helper()
	sp, fp := arch.AMD64.SP(), arch.AMD64.FP()
	ra := sframe.Loc{Kind: sframe.LocFixed}
	rows := []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: ra},
		{Start: 1, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 16}, RA: ra, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -16}}}
	other := []sframe.Row{rows[0], {Start: 4, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: fp, Offset: 16}, RA: ra, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -16}}, rows[0]}
	other[2].Start = 9
	funcs := []sframe.Function{{Start: 0x1000, Size: 16, Rows: rows}, {Start: 0x1010, Size: 32, Rows: rows}, {Start: 0x1030, Size: 16, Rows: other}}
	o := sframe.Options{Version: v, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, PCRel: true, Sort: true, CFAFixedRA: -8, Share: true}
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	size, field := 16, 12 // V3 index entry, its FRE offset field
	if v == sframe.Version2 {
		size, field = 20, 8
	}
	if damage != nil {
		damage(b, func(i int) int { return sframe.HeaderSize + i*size + field })
	}
	tb, err := sframe.Open(b, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestBlockProblems: a shared section has none; an FDE pointing into the
// middle of a block, past the sub-section, or (V2) reading a shared
// block with another FRE count each gives its typed problem.
func TestBlockProblems(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name   string
		v      uint8
		damage func(b []byte, fdeOff func(int) int)
		want   string // the problem's What, "" for none
	}{
		{"shared-v3", sframe.Version3, nil, ""},
		{"shared-v2", sframe.Version2, nil, ""},
		{"inside-v3", sframe.Version3, func(b []byte, at func(int) int) {
			// FDE 2 at FDE 0's second FRE, read as an attribute: point
			// it at the third byte of FDE 0's block, whose FREs decode.
			le.PutUint32(b[at(2):], le.Uint32(b[at(0):])+2)
		}, "sframe-block-inside"},
		{"inside-v2", sframe.Version2, func(b []byte, at func(int) int) {
			le.PutUint32(b[at(2):], le.Uint32(b[at(0):])+2) // FDE 0's second FRE
		}, "sframe-block-inside"},
		{"differs-v2", sframe.Version2, func(b []byte, at func(int) int) {
			// FDE 0 reads one FRE of the block FDE 1 reads two of.
			le.PutUint32(b[at(0)+4:], 1)
			le.PutUint32(b[12:], 1+3) // the header counts the FREs held
		}, "sframe-block-differs"},
		{"past-v2", sframe.Version2, func(b []byte, at func(int) int) {
			// Five FREs from FDE 2's offset: two bytes each would fit
			// (what Open bounds), its FREs of three do not.
			le.PutUint32(b[at(2)+4:], 5)
			le.PutUint32(b[12:], 2+5)
		}, "sframe-block-bounds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := blockProblems(blockSection(t, tc.v, tc.damage))
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("problems %v, want none", got)
				}
				return
			}
			found := false
			for _, p := range got {
				found = found || p.What == tc.want
			}
			if !found {
				t.Fatalf("problems %v, want one %s", got, tc.want)
			}
		})
	}
}
