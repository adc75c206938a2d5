package pltsim

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

func words(ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}

func TestSimulatePLTARM64(t *testing.T) {
	tests := []struct {
		name string
		code []byte
		want []Step
		err  bool
	}{
		{
			// GNU ld PLT0 (objdump of a real shared library).
			name: "plt0",
			code: words(0xa9bf7bf0, 0xf00000f0, 0xf947fe11, 0x913fe210, 0xd61f0220, a64Nop, a64Nop, a64Nop),
			want: []Step{{Off: 0}, {Off: 4, CFAOffset: 16, RAOffset: -8}},
		},
		{
			name: "pltn",
			code: words(0x90000110, 0xf9400211, 0x91000210, 0xd61f0220),
			want: []Step{{Off: 0}},
		},
		{
			// BTI PLTn: bti c; adrp; ldr; add; br x17; nop.
			name: "bti pltn",
			code: words(a64BtiC, 0x90000110, 0xf9400211, 0x91000210, 0xd61f0220, a64Nop),
			want: []Step{{Off: 0}},
		},
		{
			// PAC PLTn: adrp; ldr; add; autia1716; br x17; nop.
			name: "pac pltn",
			code: words(0x90000110, 0xf9400211, 0x91000210, a64Autia1716, 0xd61f0220, a64Nop),
			want: []Step{{Off: 0}},
		},
		{
			name: "sub sp is refused",
			code: words(0xd10043ff, 0xd61f0220),
			err:  true,
		},
		{
			name: "ldr with sp base is refused",
			code: words(0xf94003f1, 0xd61f0220),
			err:  true,
		},
		{name: "no branch", code: words(a64Nop, a64Nop), err: true},
		{name: "code after branch", code: words(0xd61f0220, 0x90000110), err: true},
		{name: "partial word", code: []byte{1, 2, 3}, err: true},
		{name: "empty", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Simulate(arch.ARM64, tt.code, tt.name == "plt0")
			checkSteps(t, got, err, tt.want, tt.err)
		})
	}
}
