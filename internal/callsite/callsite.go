// Package callsite tells whether a function's last instruction is a call,
// so that the call's return address is the function's end: the first
// byte of the next function, or of the padding before it. A reader that
// looks a caller's return address up as it is (not minus one), as the
// Linux kernel's SFrame user unwinder does, then reads a rule that is not
// the caller's. Compilers put such calls at the end of functions that
// call a function that does not return (abort, exit, __stack_chk_fail,
// __cxa_throw, _Unwind_Resume).
package callsite

import (
	"debug/elf"
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
)

// MaxDecode bounds how many bytes of one function EndsWithCall decodes on
// x86-64, where the last instruction is found only by decoding; a longer
// stretch is not looked at (false).
const MaxDecode = 1 << 20

// Code reads the instructions of an ELF file's executable segments.
type Code struct {
	m     elf.Machine
	order binary.ByteOrder
	exec  []*elf.Prog // executable PT_LOAD segments
	data  []byte
}

// New returns the Code of the ELF file ef whose contents are data.
func New(ef *elf.File, data []byte) *Code {
	c := &Code{m: ef.Machine, order: ef.ByteOrder, data: data}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			c.exec = append(c.exec, p)
		}
	}
	return c
}

// Bytes returns the bytes [lo, hi), read from the executable segment
// that holds all of them, or nil where none does.
func (c *Code) Bytes(lo, hi uint64) []byte {
	for _, p := range c.exec {
		if lo < p.Vaddr || hi > p.Vaddr+p.Filesz || hi <= lo {
			continue
		}
		off := p.Off + (lo - p.Vaddr)
		if off > uint64(len(c.data)) || hi-lo > uint64(len(c.data))-off {
			return nil
		}
		return c.data[off : off+(hi-lo)]
	}
	return nil
}

// Release gives back the pages of code wholly inside [lo, hi) when the
// file is mapped (mapped.Drop): they stay in the page cache, and are
// mapped again if read again.
func (c *Code) Release(lo, hi uint64) {
	for _, p := range c.exec {
		size := uint64(len(c.data))
		a, b := max(lo, p.Vaddr), min(hi, p.Vaddr+p.Filesz)
		if a >= b || p.Off >= size || a-p.Vaddr >= size-p.Off {
			continue
		}
		start := p.Off + (a - p.Vaddr)
		mapped.Drop(c.data[start : start+min(b-a, size-start)])
	}
}

// executable says whether pc is in an executable segment.
func (c *Code) executable(pc uint64) bool {
	for _, p := range c.exec {
		if pc >= p.Vaddr && pc-p.Vaddr < p.Memsz {
			return true
		}
	}
	return false
}

// EndsWithCall reports whether the function [lo, hi) ends with a call
// instruction (x86-64, AArch64, s390x; false for another machine). from,
// in [lo, hi), is known to start an instruction (lo, or where a row of
// the function's CFI starts): x86-64 and s390x code is decoded from there.
func (c *Code) EndsWithCall(lo, hi, from uint64) bool {
	code := c.Bytes(lo, hi)
	if code == nil {
		return false
	}
	start := int(from - lo)
	if from < lo || from >= hi {
		start = 0
	}
	switch c.m {
	case elf.EM_X86_64:
		return c.amd64EndsWithCall(code, hi, start)
	case elf.EM_AARCH64:
		return arm64EndsWithCall(c.order, code)
	case elf.EM_S390:
		return s390xEndsWithCall(code, start)
	}
	return false
}

// PaddingAt says whether the bytes at pc are padding (Padding).
func (c *Code) PaddingAt(pc uint64) bool {
	for n := uint64(16); n > 0; n /= 2 {
		if b := c.Bytes(pc, pc+n); b != nil {
			return Padding(c.m, c.order, b)
		}
	}
	return false
}

// amd64EndsWithCall: a direct call (E8 rel32) in the last five bytes
// whose target is code is taken as it is (four bytes of anything else
// rarely name code); any other call shape (amd64CallTail) is confirmed
// by decoding from start (x86-64 cannot be decoded backwards).
func (c *Code) amd64EndsWithCall(code []byte, end uint64, start int) bool {
	n := len(code)
	if n >= 5 && code[n-5] == 0xe8 {
		rel := int32(binary.LittleEndian.Uint32(code[n-4:]))
		if c.executable(end + uint64(int64(rel))) {
			return true
		}
	}
	if n-start > MaxDecode || !amd64CallTail(code) {
		return false
	}
	for pc := start; pc < n; {
		inst, err := isa.AMD64(code[pc:])
		l := isa.LenAMD64(inst, code[pc:])
		if err != nil || l == 0 {
			return false
		}
		if pc+l == n {
			return inst.Op == x86asm.CALL
		}
		pc += l
	}
	return false
}

// amd64CallTail is the cheap test before decoding: whether an indirect
// call could end exactly at the end of code: an FF
// opcode whose ModRM byte says /2 (near indirect call) and whose operand
// (SIB byte, displacement) fills the rest.
func amd64CallTail(code []byte) bool {
	n := len(code)
	for k := 2; k <= 7 && k <= n; k++ {
		if code[n-k] != 0xff {
			continue
		}
		modrm := code[n-k+1]
		if modrm>>3&7 == 2 && 1+modrmLen(modrm, code[n-k+2:]) == k {
			return true
		}
	}
	return false
}

// modrmLen is the length of a ModRM byte with its SIB byte and
// displacement; rest is what follows the ModRM byte.
func modrmLen(modrm byte, rest []byte) int {
	mod, rm := modrm>>6, modrm&7
	l := 1
	if mod != 3 && rm == 4 {
		l++ // SIB
		if mod == 0 && len(rest) > 0 && rest[0]&7 == 5 {
			return l + 4 // SIB with no base: disp32
		}
	}
	switch {
	case mod == 0 && rm == 5:
		l += 4 // RIP-relative
	case mod == 1:
		l++
	case mod == 2:
		l += 4
	}
	return l
}

// AArch64 calls: BL imm26; BLR Xn; and with pointer authentication BLRAA,
// BLRAB (Xn, Xm) and BLRAAZ, BLRABZ (Xn).
const (
	a64BLMask, a64BL         = 0xfc000000, 0x94000000
	a64BLRMask, a64BLR       = 0xfffffc1f, 0xd63f0000
	a64BLRAxMask, a64BLRAx   = 0xfffff800, 0xd73f0800
	a64BLRAxZMask, a64BLRAxZ = 0xfffff81f, 0xd63f081f
)

// arm64EndsWithCall reads the last instruction word.
func arm64EndsWithCall(order binary.ByteOrder, code []byte) bool {
	n := len(code)
	if n < 4 || n%4 != 0 {
		return false
	}
	w := order.Uint32(code[n-4:])
	return w&a64BLMask == a64BL || w&a64BLRMask == a64BLR ||
		w&a64BLRAxMask == a64BLRAx || w&a64BLRAxZMask == a64BLRAxZ
}

// s390xEndsWithCall walks the instruction lengths from from (the
// first byte's top two bits give 2, 4, 4 or 6 bytes) and tests the last
// instruction: BASR (0D), BAS (4D), BRAS (A7x5) and BRASL (C0x5).
func s390xEndsWithCall(code []byte, from int) bool {
	n := len(code)
	for pc := from; pc < n; {
		l := [4]int{2, 4, 4, 6}[code[pc]>>6]
		if pc+l > n {
			return false
		}
		if pc+l == n {
			op := code[pc]
			switch {
			case op == 0x0d || op == 0x4d:
				return true
			case l >= 4 && (op == 0xa7 || op == 0xc0) && code[pc+1]&0x0f == 0x05:
				return true
			}
			return false
		}
		pc += l
	}
	return false
}

// Padding reports whether b starts with what compilers and linkers fill
// the gaps between functions with, rather than code: on x86-64 NOP, a
// long NOP (prefixed or not), INT3 or zeros; on AArch64 NOP or a zero word; on s390x NOPR, NOP
// or zero bytes. A call's return address in such a gap is reached by no
// other path, so a rule there can only be the caller's.
func Padding(m elf.Machine, order binary.ByteOrder, b []byte) bool {
	switch m {
	case elf.EM_X86_64:
		if len(b) >= 1 && b[0] == 0xcc || len(b) >= 2 && b[0] == 0 && b[1] == 0 {
			return true // INT3, zero fill
		}
		// NOP (90) and the long NOPs (0F 1F /0), after any operand-size
		// (66) and segment (2E) prefixes: what assemblers pad with.
		i := 0
		for i < len(b) && i < 14 && (b[i] == 0x66 || b[i] == 0x2e) {
			i++
		}
		return i < len(b) && b[i] == 0x90 || i+1 < len(b) && b[i] == 0x0f && b[i+1] == 0x1f
	case elf.EM_AARCH64:
		if len(b) < 4 {
			return false
		}
		w := order.Uint32(b)
		return w == a64NOP || w == 0
	case elf.EM_S390:
		switch {
		case len(b) >= 2 && (b[0] == 0x07 && b[1] == 0x07 || b[0] == 0 && b[1] == 0):
			return true
		case len(b) >= 4 && b[0] == 0x47 && b[1]&0xf0 == 0:
			return true // NOP: BC with mask 0
		}
	}
	return false
}

const a64NOP = 0xd503201f
