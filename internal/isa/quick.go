package isa

import "encoding/binary"

// QuickAMD64 reads the most common x86-64 instruction forms without
// x86asm, for a reader that needs only an instruction's length and
// whether it transfers control (the entry sweep, which decodes every
// instruction of a file: x86asm was most of its time). It knows the
// forms below, with at most a REX prefix; for anything else ok is false
// and the caller decodes with AMD64. TestQuickAMD64 holds it to x86asm on
// every instruction of libc's code and on random bytes after each form.
func QuickAMD64(b []byte) (q Quick, ok bool) {
	i := 0
	rex := byte(0)
	if len(b) > 0 && b[0]&0xf0 == 0x40 {
		rex, i = b[0], 1
	}
	if i >= len(b) {
		return Quick{}, false
	}
	op := b[i]
	i++
	switch {
	case op == 0x0f:
		return quick0F(b, i)
	case op < 0x40 && op&7 < 4:
		// ALU r/m,r and r,r/m: add or adc sbb and sub xor cmp.
		return modrm(b, i, 0, QPlain)
	case op == 0x84 || op == 0x85 || op == 0x86 || op == 0x87 || op == 0x63:
		// test, xchg, movsxd.
		return modrm(b, i, 0, QPlain)
	case op >= 0x88 && op <= 0x8b:
		// mov: not from a table without a base (refs: a jump table).
		return modrm(b, i, 0, QMov)
	case op == 0x8d:
		return modrm(b, i, 0, QLea)
	case op == 0x80 || op == 0x83 || op == 0x6b:
		return modrm(b, i, 1, QPlain)
	case op == 0x81 || op == 0x69:
		return modrm(b, i, 4, QPlain)
	case op == 0xc0 || op == 0xc1 || op >= 0xd0 && op <= 0xd3:
		// Shifts and rotates; x86asm refuses /6 (an alias of shl).
		if i >= len(b) || b[i]>>3&7 == 6 {
			return Quick{}, false
		}
		imm := 0
		if op < 0xd0 {
			imm = 1
		}
		return modrm(b, i, imm, QPlain)
	case op >= 0x50 && op <= 0x5f, op == 0xc9:
		return Quick{Len: i, Kind: QPlain}, true
	case rex != 0:
		// The one-byte forms below mean something else after a REX
		// prefix (41 90 is xchg %eax,%r8d) or are not worth telling.
		return Quick{}, false
	case op == 0x90:
		return Quick{Len: 1, Kind: QNop}, true
	case op == 0xc3:
		return Quick{Len: 1, Kind: QRet}, true
	case op == 0xcc:
		return Quick{Len: 1, Kind: QInt3}, true
	case op == 0xe8 || op == 0xe9:
		if len(b) < 5 {
			return Quick{}, false
		}
		k := QCall
		if op == 0xe9 {
			k = QJump
		}
		return Quick{Len: 5, Kind: k, Rel: int64(int32(binary.LittleEndian.Uint32(b[1:])))}, true
	case op == 0xeb || op >= 0x70 && op <= 0x7f:
		if len(b) < 2 {
			return Quick{}, false
		}
		k := QJcc
		if op == 0xeb {
			k = QJump
		}
		return Quick{Len: 2, Kind: k, Rel: int64(int8(b[1]))}, true
	}
	return Quick{}, false
}

// quick0F reads the two-byte opcodes after 0f at b[i].
func quick0F(b []byte, i int) (Quick, bool) {
	if i >= len(b) {
		return Quick{}, false
	}
	op := b[i]
	i++
	switch {
	case op >= 0x80 && op <= 0x8f:
		if b[0] != 0x0f || len(b) < 6 {
			return Quick{}, false // a REX prefix: leave it to x86asm
		}
		return Quick{Len: 6, Kind: QJcc, Rel: int64(int32(binary.LittleEndian.Uint32(b[2:])))}, true
	case op == 0x1f:
		if b[0] != 0x0f || i >= len(b) || b[i]&0x38 != 0 {
			return Quick{}, false
		}
		return modrm(b, i, 0, QNop)
	case op >= 0x40 && op <= 0x4f, op == 0xaf, op == 0xb6, op == 0xb7, op == 0xbe, op == 0xbf:
		// cmovcc, imul, movzx, movsx.
		return modrm(b, i, 0, QPlain)
	}
	return Quick{}, false
}

// modrm is the instruction whose ModRM byte is b[i], followed by imm
// bytes of immediate, of kind k. A lea must have a memory operand; an
// operand naming an address (RIP-relative, or a SIB without a base) is
// left to x86asm, whose decoding the sweep reads the address from.
func modrm(b []byte, i, imm int, k QuickKind) (Quick, bool) {
	if i >= len(b) {
		return Quick{}, false
	}
	m := b[i]
	mod, rm := m>>6, m&7
	n := i + 1
	disp := 0
	switch {
	case mod == 3:
		if k == QLea || k == QNop {
			return Quick{}, false
		}
	case rm == 4:
		if n >= len(b) {
			return Quick{}, false
		}
		sib := b[n]
		n++
		if mod == 0 && sib&7 == 5 {
			// No base: an absolute address, which the sweep gathers
			// (a jump table, data a table scan must stop at).
			return Quick{}, false
		}
	case mod == 0 && rm == 5:
		// RIP-relative: the sweep gathers the address (a function's
		// start, data a table scan must stop at).
		return Quick{}, false
	}
	switch mod {
	case 1:
		disp = 1
	case 2:
		disp = 4
	}
	n += disp + imm
	if n > len(b) {
		return Quick{}, false
	}
	q := Quick{Len: n, Kind: k}
	if k == QMov {
		q.Kind = QPlain
	}
	if k == QLea {
		q.Kind = QPlain
	}
	return q, true
}

// Quick is what QuickAMD64 reads of an instruction: its length, its kind
// and, for a relative call or jump, the displacement from the
// instruction's end.
type Quick struct {
	Len  int
	Kind QuickKind
	Rel  int64
}

// QuickKind is the kind of a Quick instruction.
type QuickKind uint8

const (
	QPlain QuickKind = iota // none of the below
	QNop                    // nop, nopl
	QInt3                   // int3
	QRet                    // ret
	QCall                   // call rel32
	QJump                   // jmp rel8 or rel32
	QJcc                    // a conditional jump
	QMov                    // modrm's: a mov, QPlain when read
	QLea                    // modrm's: a lea (not RIP-relative), QPlain when read
)
