package callsite

import (
	"debug/elf"
	"encoding/binary"
	"testing"
)

// code returns a Code of machine m whose one executable segment holds b
// at 0x1000 (and is 0x100 bytes long in memory).
func code(m elf.Machine, order binary.ByteOrder, b []byte) *Code {
	p := &elf.Prog{ProgHeader: elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_X | elf.PF_R, Vaddr: 0x1000, Filesz: uint64(len(b)), Memsz: 0x100}}
	return &Code{m: m, order: order, exec: []*elf.Prog{p}, data: b}
}

func words(order binary.ByteOrder, ws ...uint32) []byte {
	b := make([]byte, 4*len(ws))
	for i, w := range ws {
		order.PutUint32(b[4*i:], w)
	}
	return b
}

func TestEndsWithCall(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	tests := []struct {
		name  string
		m     elf.Machine
		order binary.ByteOrder
		code  []byte
		from  int
		want  bool
	}{
		// push %rax; call .-6 (to 0x1000, code)
		{"x86-64 call rel32 to code", elf.EM_X86_64, le, []byte{0x50, 0xe8, 0xfa, 0xff, 0xff, 0xff}, 0, true},
		// the same displacement pointing far outside every segment
		{"x86-64 E8 whose target is no code", elf.EM_X86_64, le, []byte{0x50, 0xe8, 0x00, 0x00, 0x00, 0x40}, 0, false},
		{"x86-64 call *%rax", elf.EM_X86_64, le, []byte{0x48, 0x89, 0xc7, 0xff, 0xd0}, 0, true},
		{"x86-64 call *%r11", elf.EM_X86_64, le, []byte{0x50, 0x41, 0xff, 0xd3}, 0, true},
		{"x86-64 call *x(%rip)", elf.EM_X86_64, le, []byte{0x50, 0xff, 0x15, 0x10, 0x20, 0x00, 0x00}, 0, true},
		{"x86-64 call *8(%rax,%rbx,8)", elf.EM_X86_64, le, []byte{0x50, 0xff, 0x54, 0xd8, 0x08}, 0, true},
		// mov $0xd0ff0000,%eax: FF D0 as an immediate's bytes
		{"x86-64 call shape inside an immediate", elf.EM_X86_64, le, []byte{0x50, 0xb8, 0x00, 0x00, 0xff, 0xd0}, 0, false},
		{"x86-64 ret", elf.EM_X86_64, le, []byte{0x48, 0x83, 0xc4, 0x08, 0xc3}, 0, false},
		{"x86-64 jmp rel32", elf.EM_X86_64, le, []byte{0x50, 0xe9, 0xfa, 0xff, 0xff, 0xff}, 0, false},
		// decoded from the last row's start, past bytes that do not decode
		{"x86-64 decoded from a row start", elf.EM_X86_64, le, []byte{0x0f, 0x0b, 0x06, 0x48, 0x89, 0xc7, 0xff, 0xd0}, 3, true},

		{"AArch64 bl", elf.EM_AARCH64, le, words(le, 0xa9bf7bfd, 0x94000010), 0, true},
		{"AArch64 blr x1", elf.EM_AARCH64, le, words(le, 0xd63f0020), 0, true},
		{"AArch64 blraaz x1", elf.EM_AARCH64, le, words(le, 0xd63f083f), 0, true},
		{"AArch64 blraa x1, x2", elf.EM_AARCH64, le, words(le, 0xd73f0822), 0, true},
		{"AArch64 big-endian bl", elf.EM_AARCH64, be, words(be, 0x94000010), 0, true},
		{"AArch64 ret", elf.EM_AARCH64, le, words(le, 0x94000010, 0xd65f03c0), 0, false},
		{"AArch64 b", elf.EM_AARCH64, le, words(le, 0x14000010), 0, false},

		// lgr %r1,%r2; brasl %r14,x
		{"s390x brasl", elf.EM_S390, be, []byte{0xb9, 0x04, 0x00, 0x12, 0xc0, 0xe5, 0, 0, 0, 8}, 0, true},
		{"s390x basr", elf.EM_S390, be, []byte{0xb9, 0x04, 0x00, 0x12, 0x0d, 0xe1}, 0, true},
		{"s390x bras", elf.EM_S390, be, []byte{0xa7, 0xe5, 0x00, 0x04}, 0, true},
		{"s390x br %r14", elf.EM_S390, be, []byte{0xc0, 0xe5, 0, 0, 0, 8, 0x07, 0xfe}, 0, false},
		{"s390x brcl", elf.EM_S390, be, []byte{0xc0, 0xf4, 0, 0, 0, 8}, 0, false},

		{"other machine", elf.EM_RISCV, le, []byte{0x97, 0x00, 0x00, 0x00, 0xe7, 0x80, 0x00, 0x00}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := code(tt.m, tt.order, tt.code)
			end := 0x1000 + uint64(len(tt.code))
			if got := c.EndsWithCall(0x1000, end, 0x1000+uint64(tt.from)); got != tt.want {
				t.Errorf("EndsWithCall = %v, want %v", got, tt.want)
			}
		})
	}
	// A function no segment holds wholly is not looked at.
	if code(elf.EM_AARCH64, le, words(le, 0x94000010)).EndsWithCall(0xffc, 0x1004, 0xffc) {
		t.Error("EndsWithCall read outside the segment")
	}
}

func TestPadding(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	tests := []struct {
		m     elf.Machine
		order binary.ByteOrder
		b     []byte
		want  bool
	}{
		{elf.EM_X86_64, le, []byte{0x90}, true},
		{elf.EM_X86_64, le, []byte{0x66, 0x90}, true},
		{elf.EM_X86_64, le, []byte{0x0f, 0x1f, 0x00}, true},
		{elf.EM_X86_64, le, []byte{0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}, true},
		{elf.EM_X86_64, le, []byte{0xcc}, true},
		{elf.EM_X86_64, le, []byte{0, 0}, true},
		{elf.EM_X86_64, le, []byte{0x55, 0x48, 0x89, 0xe5}, false},       // push %rbp
		{elf.EM_X86_64, le, []byte{0xf3, 0x0f, 0x1e, 0xfa}, false},       // endbr64
		{elf.EM_X86_64, le, []byte{0x48, 0x83, 0xec, 0x08, 0x90}, false}, // sub $8,%rsp
		{elf.EM_AARCH64, le, words(le, 0xd503201f), true},
		{elf.EM_AARCH64, be, words(be, 0xd503201f), true},
		{elf.EM_AARCH64, le, words(le, 0), true},
		{elf.EM_AARCH64, le, words(le, 0xa9bf7bfd), false}, // stp x29, x30, [sp, #-16]!
		{elf.EM_AARCH64, le, words(le, 0xd503233f), false}, // paciasp
		{elf.EM_S390, be, []byte{0x07, 0x07}, true},
		{elf.EM_S390, be, []byte{0x47, 0x00, 0x00, 0x00}, true},
		{elf.EM_S390, be, []byte{0, 0}, true},
		{elf.EM_S390, be, []byte{0xeb, 0x6f, 0xf0, 0x30, 0x00, 0x24}, false}, // stmg
	}
	for _, tt := range tests {
		if got := Padding(tt.m, tt.order, tt.b); got != tt.want {
			t.Errorf("%v % x: Padding = %v, want %v", tt.m, tt.b, got, tt.want)
		}
	}
}

// FuzzEndsWithCall feeds any bytes as code of each machine: no panic, and
// a call found by EndsWithCall ends where the code does.
func FuzzEndsWithCall(f *testing.F) {
	f.Add([]byte{0x50, 0xe8, 0xfa, 0xff, 0xff, 0xff}, uint8(0))
	f.Add([]byte{0xc0, 0xe5, 0, 0, 0, 8}, uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, from uint8) {
		for _, m := range []elf.Machine{elf.EM_X86_64, elf.EM_AARCH64, elf.EM_S390} {
			for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				c := code(m, order, b)
				c.EndsWithCall(0x1000, 0x1000+uint64(len(b)), 0x1000+uint64(from))
				c.PaddingAt(0x1000)
				Padding(m, order, b)
			}
		}
	})
}
