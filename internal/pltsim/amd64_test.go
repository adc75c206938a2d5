package pltsim

import (
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

func TestSimulatePLTAMD64(t *testing.T) {
	tests := []struct {
		name   string
		code   []byte
		header bool
		want   []Step
		err    bool
	}{
		{
			// GNU ld lazy PLT0: push GOT+8; jmp *GOT+16; nopl 0x0(%rax).
			name:   "plt0",
			code:   []byte{0xff, 0x35, 0xca, 0x2f, 0, 0, 0xff, 0x25, 0xcc, 0x2f, 0, 0, 0x0f, 0x1f, 0x40, 0x00},
			header: true,
			want:   []Step{{0, 16, 0}, {6, 24, 0}},
		},
		{
			// Lazy PLTn: jmp *GOT[n]; push $n; jmp PLT0.
			name: "pltn",
			code: []byte{0xff, 0x25, 0xca, 0x2f, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0xe0, 0xff, 0xff, 0xff},
			want: []Step{{0, 8, 0}, {11, 16, 0}},
		},
		{
			// IBT lazy PLTn: endbr64; push $n; jmp PLT0; xchg %ax,%ax.
			name: "ibt pltn",
			code: []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x68, 1, 0, 0, 0, 0xe9, 0xd2, 0xff, 0xff, 0xff, 0x66, 0x90},
			want: []Step{{0, 8, 0}, {9, 16, 0}},
		},
		{
			// .plt.sec: endbr64; bnd jmp *GOT[n]; nopl 0x0(%rax,%rax,1).
			name: "plt.sec",
			code: []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x1, 0x2, 0, 0, 0x0f, 0x1f, 0x44, 0x00, 0x00},
			want: []Step{{0, 8, 0}},
		},
		{
			// .plt.got: jmp *GOT[n]; xchg %ax,%ax.
			name: "plt.got",
			code: []byte{0xff, 0x25, 0x8a, 0x2f, 0, 0, 0x66, 0x90},
			want: []Step{{0, 8, 0}},
		},
		{
			// lld's PLT padding is int3.
			name: "int3 padding",
			code: []byte{0xff, 0x25, 0x8a, 0x2f, 0, 0, 0xcc, 0xcc},
			want: []Step{{0, 8, 0}},
		},
		{
			name: "sub rsp is not a PLT instruction",
			code: []byte{0x48, 0x83, 0xec, 0x08, 0xff, 0x25, 0, 0, 0, 0},
			err:  true,
		},
		{
			name: "code after the jump",
			code: []byte{0xff, 0x25, 0, 0, 0, 0, 0x68, 0, 0, 0, 0},
			err:  true,
		},
		{
			name: "no final jump",
			code: []byte{0x68, 0, 0, 0, 0},
			err:  true,
		},
		{
			name: "truncated",
			code: []byte{0xff, 0x25, 0},
			err:  true,
		},
		{name: "empty", code: nil, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Simulate(arch.AMD64, tt.code, tt.header)
			checkSteps(t, got, err, tt.want, tt.err)
		})
	}
}
