package isa

import (
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// TestAMDHints holds AMD64 to the 3DNow! hints x86asm does not know
// (bytes from OpenBLAS's OPTERON kernels and as's encodings) and to the
// forms near them that must stay errors.
func TestAMDHints(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		op   x86asm.Op // 0: no instruction (an error, or x86asm's Op 0)
		len  int
		base x86asm.Reg // the memory operand's base, for a prefetch
		disp int64
	}{
		{"prefetch 0x100(%rsi)", []byte{0x0f, 0x0d, 0x86, 0x00, 0x01, 0x00, 0x00, 0x41}, x86asm.PREFETCHW, 7, x86asm.RSI, 0x100},
		{"prefetch 0x100(%r14), REX.B", []byte{0x41, 0x0f, 0x0d, 0x86, 0x00, 0x01, 0x00, 0x00}, x86asm.PREFETCHW, 8, x86asm.R14, 0x100},
		{"prefetch 0x40(%rax)", []byte{0x0f, 0x0d, 0x40, 0x40}, x86asm.PREFETCHW, 4, x86asm.RAX, 0x40},
		{"prefetch /3 (%rbx,%rcx,8)", []byte{0x0f, 0x0d, 0x1c, 0xcb}, x86asm.PREFETCHW, 4, x86asm.RBX, 0},
		{"prefetchw 0x10(%rax), known to x86asm", []byte{0x0f, 0x0d, 0x48, 0x10}, x86asm.PREFETCHW, 4, x86asm.RAX, 0x10},
		{"prefetch with a segment prefix", []byte{0x64, 0x0f, 0x0d, 0x00}, x86asm.PREFETCHW, 4, x86asm.RAX, 0},
		{"femms", []byte{0x0f, 0x0e, 0x48}, x86asm.EMMS, 2, 0, 0},
		{"femms after REX.W", []byte{0x48, 0x0f, 0x0e}, x86asm.EMMS, 3, 0, 0},
		{"prefetch with a register operand (#UD)", []byte{0x0f, 0x0d, 0xc0}, 0, 0, 0, 0},
		{"lock prefetch (#UD)", []byte{0xf0, 0x0f, 0x0d, 0x00}, 0, 0, 0, 0},
		{"truncated prefetch", []byte{0x0f, 0x0d, 0x86, 0x00}, 0, 0, 0, 0},
		{"truncated opcode", []byte{0x0f, 0x0d}, 0, 0, 0, 0},
		{"two REX", []byte{0x48, 0x41, 0x0f, 0x0e}, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := AMD64(tt.b)
			if tt.op == 0 {
				if err == nil && in.Op != 0 {
					t.Fatalf("AMD64(% x) = %v, want no instruction", tt.b, in)
				}
				return
			}
			if err != nil {
				t.Fatalf("AMD64(% x): %v", tt.b, err)
			}
			if in.Op != tt.op || in.Len != tt.len {
				t.Fatalf("AMD64(% x) = %v, %d bytes, want %v, %d bytes", tt.b, in.Op, in.Len, tt.op, tt.len)
			}
			if tt.op != x86asm.PREFETCHW {
				return
			}
			m, ok := in.Args[0].(x86asm.Mem)
			if !ok || m.Base != tt.base || m.Disp != tt.disp {
				t.Fatalf("AMD64(% x) operand %v, want base %v disp %#x", tt.b, in.Args[0], tt.base, tt.disp)
			}
		})
	}
}
