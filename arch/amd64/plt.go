package amd64

import "fmt"

// A StackStep says that from byte Off of a stub onwards, until the next
// step, the CFA is RSP+CFAOffset. The return address stays at CFA-8.
type StackStep struct {
	Off       uint32
	CFAOffset int32
}

// PLTKind names the PLT sections whose stubs carry no CFI of their own in
// many links, and which the translator describes from their instructions.
type PLTKind int

const (
	// PLT is ".plt": a header (PLT0) followed by lazy-binding entries.
	PLT PLTKind = iota
	// PLTSec is ".plt.sec" (IBT): entries that jump through the GOT.
	PLTSec
	// PLTGot is ".plt.got": entries for functions bound through .got only.
	PLTGot
)

func (k PLTKind) String() string {
	switch k {
	case PLT:
		return ".plt"
	case PLTSec:
		return ".plt.sec"
	case PLTGot:
		return ".plt.got"
	}
	return fmt.Sprintf("PLTKind(%d)", int(k))
}

// EntryCFA is the CFA offset from RSP on entry to a stub. Callers reach
// every PLT entry with a call, so only the return address is on the
// stack; PLT0 is reached by a jump from an entry that has pushed the
// relocation index too.
func EntryCFA(header bool) int32 {
	if header {
		return 16
	}
	return 8
}

// LazyHeader reports whether a .plt section starts with PLT0, the lazy
// binder's stub (push GOT+8(%rip), after an ENDBR64 with IBT). A static
// executable's .plt has none: it holds only the stubs that IFUNCs are
// called through, bound by IRELATIVE relocations at startup.
func LazyHeader(code []byte) bool {
	if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa {
		code = code[4:]
	}
	return len(code) >= 2 && code[0] == 0xff && code[1] == 0x35
}

// SimulateStub follows the instructions of one PLT stub and returns where
// its CFA offset changes. It knows only what PLT stubs contain — pushes,
// jumps, ENDBR64, BND prefixes and NOP padding — and refuses anything else,
// so that an unfamiliar stub is never described by a guess. An indirect
// jump through the GOT does not end a lazy entry: until the symbol is
// bound, the GOT slot points back at the next instruction. A direct jump
// ends the stub; bytes after it are padding and keep the last height.
func SimulateStub(code []byte, entryCFA int32) ([]StackStep, error) {
	steps := []StackStep{{Off: 0, CFAOffset: entryCFA}}
	cfa := entryCFA
	jumped := false
	for off := 0; off < len(code); {
		n, push, jump, err := decode(code[off:])
		if err != nil {
			return nil, fmt.Errorf("PLT stub byte %#x: %w", off, err)
		}
		if push == 0 && jump == noJump && jumped {
			off += n // padding after an indirect jump
			continue
		}
		off += n
		if push != 0 {
			cfa += push
			if off < len(code) {
				steps = append(steps, StackStep{Off: uint32(off), CFAOffset: cfa})
			}
		}
		jumped = jump != noJump
		if jump == direct {
			if !allPadding(code[off:]) {
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

type jumpKind int

const (
	noJump   jumpKind = iota
	direct            // jmp rel: control never comes back
	indirect          // jmp through memory: may fall through while lazy
)

// decode returns the length of the instruction at b, how many bytes it
// pushes, and whether it is a jump.
func decode(b []byte) (n int, push int32, jump jumpKind, err error) {
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
		return 0, 0, noJump, err
	}
	switch op := b[i]; {
	case op == 0xf3 && i == 0 && len(b) >= 4 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa:
		return 4, 0, noJump, nil // endbr64
	case op == 0x68: // push imm32
		if err := need(5); err != nil {
			return 0, 0, noJump, err
		}
		return i + 5, 8, noJump, nil
	case op == 0xe9: // jmp rel32
		if err := need(5); err != nil {
			return 0, 0, noJump, err
		}
		return i + 5, 0, direct, nil
	case op == 0xeb: // jmp rel8
		if err := need(2); err != nil {
			return 0, 0, noJump, err
		}
		return i + 2, 0, direct, nil
	case op == 0xff: // push/jmp m64 with a RIP-relative operand
		if err := need(6); err != nil {
			return 0, 0, noJump, err
		}
		switch b[i+1] {
		case 0x35: // push qword [rip+disp32]
			return i + 6, 8, noJump, nil
		case 0x25: // jmp qword [rip+disp32]
			return i + 6, 0, indirect, nil
		}
		return 0, 0, noJump, fmt.Errorf("unexpected opcode ff %02x", b[i+1])
	}
	if k := nopLen(b); k > 0 && i == 0 {
		return k, 0, noJump, nil
	}
	return 0, 0, noJump, fmt.Errorf("unexpected opcode %02x", b[i])
}

// nopLen returns the length of a NOP form at b (the ones assemblers and
// linkers use for padding), or 0.
func nopLen(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == 0x66 || b[i] == 0x2e) {
		i++
	}
	if i < len(b) && b[i] == 0x90 {
		return i + 1 // nop, xchg %ax,%ax and data16/cs prefixed forms
	}
	if i+2 < len(b) && b[i] == 0x0f && b[i+1] == 0x1f {
		n, ok := modrmLen(b[i+2:])
		if ok && i+2+n <= len(b) {
			return i + 2 + n
		}
	}
	if i == 0 && len(b) >= 1 && b[0] == 0xcc {
		return 1 // int3 padding
	}
	return 0
}

// modrmLen returns the length of a ModRM byte with its SIB and
// displacement, for the memory forms used by multi-byte NOPs.
func modrmLen(b []byte) (int, bool) {
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

func allPadding(b []byte) bool {
	for len(b) > 0 {
		n := nopLen(b)
		if n == 0 {
			return false
		}
		b = b[n:]
	}
	return true
}
