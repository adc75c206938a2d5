package isa

import (
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestSignDisp: a 32-bit displacement comes out sign-extended, as the
// CPU uses it; 8-bit ones and mov's 64-bit moffs address as they are.
func TestSignDisp(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		arg  int
		disp int64
	}{
		{"lea -0x10(%rip),%rax", []byte{0x48, 0x8d, 0x05, 0xf0, 0xff, 0xff, 0xff}, 1, -0x10},
		{"lea -0x1a8(%rbp),%rsp", []byte{0x48, 0x8d, 0xa5, 0x58, 0xfe, 0xff, 0xff}, 1, -0x1a8},
		{"mov -0x10(%rax,%rcx,4),%rax (disp8)", []byte{0x48, 0x8b, 0x44, 0x88, 0xf0}, 1, -0x10},
		{"mov 0x10(%rax,%rcx,4),%rax (disp32)", []byte{0x48, 0x8b, 0x84, 0x88, 0x10, 0, 0, 0}, 1, 0x10},
		{"mov 0x7fffffff(%rax),%rax", []byte{0x48, 0x8b, 0x80, 0xff, 0xff, 0xff, 0x7f}, 1, 0x7fffffff},
		{"mov 0xfffffffffffffff0,%eax (SIB, no base)", []byte{0x8b, 0x04, 0x25, 0xf0, 0xff, 0xff, 0xff}, 1, -0x10},
		{"movabs 0x80000000,%rax (moffs)", []byte{0x48, 0xa1, 0, 0, 0, 0x80, 0, 0, 0, 0}, 1, 0x80000000},
		{"movabs %eax,0xfffffff0 (moffs)", []byte{0xa3, 0xf0, 0xff, 0xff, 0xff, 0, 0, 0, 0}, 0, 0xfffffff0},
	} {
		in, err := AMD64(tc.b)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		m, ok := in.Args[tc.arg].(x86asm.Mem)
		if !ok {
			t.Errorf("%s: argument %d is %v, not memory", tc.name, tc.arg, in.Args[tc.arg])
			continue
		}
		if m.Disp != tc.disp {
			t.Errorf("%s: Disp %#x, want %#x", tc.name, m.Disp, tc.disp)
		}
	}
}
