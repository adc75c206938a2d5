package pltsim

import "fmt"

// amd64LazyHeader reports whether a .plt section starts with PLT0, the
// lazy binder's stub (push GOT+8(%rip), after an ENDBR64 with IBT).
func amd64LazyHeader(code []byte) bool {
	if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa {
		code = code[4:]
	}
	return len(code) >= 2 && code[0] == 0xff && code[1] == 0x35
}

// amd64Simulate follows the instructions of one PLT stub and returns
// where its CFA offset changes; the return address stays at CFA-8. It
// knows only what PLT stubs contain — pushes, jumps, ENDBR64, BND prefixes
// and NOP padding. An indirect jump through the GOT does not end a lazy
// entry: until the symbol is bound, the GOT slot points back at the next
// instruction. A direct jump ends the stub; bytes after it are padding and
// keep the last height.
func amd64Simulate(code []byte, entryCFA int32, header bool) ([]Step, error) {
	// Callers reach every PLT entry with a call, so only the return
	// address is on the stack; PLT0 is reached by a jump from an entry
	// that has pushed the relocation index too.
	cfa := entryCFA
	if header {
		cfa += 8
	}
	steps := []Step{{Off: 0, CFAOffset: cfa}}
	jumped := false
	for off := 0; off < len(code); {
		n, push, jump, err := amd64Decode(code[off:])
		if err != nil {
			return nil, fmt.Errorf("PLT stub byte %#x: %w", off, err)
		}
		if push == 0 && jump == amd64NoJump && jumped {
			off += n // padding after an indirect jump
			continue
		}
		off += n
		if push != 0 {
			cfa += push
			if off < len(code) {
				steps = append(steps, Step{Off: uint32(off), CFAOffset: cfa})
			}
		}
		jumped = jump != amd64NoJump
		if jump == amd64Direct {
			if !amd64AllPadding(code[off:]) {
				return nil, fmt.Errorf("PLT stub byte %#x: code after the final jump", off)
			}
			return steps, nil
		}
	}
	if !jumped {
		return nil, fmt.Errorf("PLT stub of %d bytes does not end in a jump", len(code))
	}
	return steps, nil
}

type amd64JumpKind int

const (
	amd64NoJump   amd64JumpKind = iota
	amd64Direct                 // jmp rel: control never comes back
	amd64Indirect               // jmp through memory: may fall through while lazy
)

// amd64Decode returns the length of the instruction at b, how many bytes it
// pushes, and whether it is a jump.
func amd64Decode(b []byte) (n int, push int32, jump amd64JumpKind, err error) {
	i := 0
	// A BND (0xf2) prefix on jumps under MPX/IBT PLTs; NOTRACK (0x3e).
	for i < len(b) && (b[i] == 0xf2 || b[i] == 0x3e) && i < 2 {
		i++
	}
	need := func(k int) error {
		if len(b) < i+k {
			return fmt.Errorf("truncated instruction")
		}
		return nil
	}
	if err := need(1); err != nil {
		return 0, 0, amd64NoJump, err
	}
	switch op := b[i]; {
	case op == 0xf3 && i == 0 && len(b) >= 4 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa:
		return 4, 0, amd64NoJump, nil // endbr64
	case op == 0x68: // push imm32
		if err := need(5); err != nil {
			return 0, 0, amd64NoJump, err
		}
		return i + 5, 8, amd64NoJump, nil
	case op == 0xe9: // jmp rel32
		if err := need(5); err != nil {
			return 0, 0, amd64NoJump, err
		}
		return i + 5, 0, amd64Direct, nil
	case op == 0xeb: // jmp rel8
		if err := need(2); err != nil {
			return 0, 0, amd64NoJump, err
		}
		return i + 2, 0, amd64Direct, nil
	case op == 0xff: // push/jmp m64 with a RIP-relative operand
		if err := need(6); err != nil {
			return 0, 0, amd64NoJump, err
		}
		switch b[i+1] {
		case 0x35: // push qword [rip+disp32]
			return i + 6, 8, amd64NoJump, nil
		case 0x25: // jmp qword [rip+disp32]
			return i + 6, 0, amd64Indirect, nil
		}
		return 0, 0, amd64NoJump, fmt.Errorf("unexpected opcode ff %02x", b[i+1])
	}
	if k := amd64NopLen(b); k > 0 && i == 0 {
		return k, 0, amd64NoJump, nil
	}
	return 0, 0, amd64NoJump, fmt.Errorf("unexpected opcode %02x", b[i])
}

// amd64NopLen returns the length of a NOP form at b (the ones assemblers and
// linkers use for padding), or 0.
func amd64NopLen(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == 0x66 || b[i] == 0x2e) {
		i++
	}
	if i < len(b) && b[i] == 0x90 {
		return i + 1 // nop, xchg %ax,%ax and data16/cs prefixed forms
	}
	if i+2 < len(b) && b[i] == 0x0f && b[i+1] == 0x1f {
		n, ok := amd64ModRMLen(b[i+2:])
		if ok && i+2+n <= len(b) {
			return i + 2 + n
		}
	}
	if i == 0 && len(b) >= 1 && b[0] == 0xcc {
		return 1 // int3 padding
	}
	return 0
}

// amd64ModRMLen returns the length of a ModRM byte with its SIB and
// displacement, for the memory forms used by multi-byte NOPs.
func amd64ModRMLen(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	mod, rm := b[0]>>6, b[0]&7
	n := 1
	if mod != 3 && rm == 4 {
		n++ // SIB
	}
	switch mod {
	case 0:
		if rm == 5 {
			n += 4
		}
	case 1:
		n++
	case 2:
		n += 4
	}
	return n, true
}

func amd64AllPadding(b []byte) bool {
	for len(b) > 0 {
		n := amd64NopLen(b)
		if n == 0 {
			return false
		}
		b = b[n:]
	}
	return true
}
