package goprologue

import "golang.org/x/arch/x86/x86asm"

// QuickAMD64 describes an x86-64 function the Go compiler made in the
// shape of Go 1.21 and later (see the package doc) without following all
// of its code: it decodes the prologue up to PUSHQ BP; MOVQ SP, BP
// (after the stack check, nothing else may come first), then takes the
// frame pointer as saved wherever the pcsp rows put SP at or below the
// pushed BP, and checks each place the frame is left that way to be a
// POPQ BP. It gives the rules Analyze gives such a function (a test runs
// both over whole binaries), at a small part of the cost; ok is false for
// any other function, which Analyze must follow: assembly, Go 1.19's
// frames, a prologue or an exit of another shape.
func QuickAMD64(code []byte, entry uint64, sp []SPRange) (r Result, ok bool) {
	if len(sp) == 0 || sp[0].Start != entry || sp[0].Delta != 0 {
		return Result{}, false
	}
	push, ok := quickPrologue(code, entry)
	if !ok {
		return Result{}, false
	}
	mov := push + 1
	rules := []Rule{{PC: entry}}
	saved := false
	for _, row := range sp {
		if row.Start < mov {
			if row.Delta != 0 {
				return Result{}, false // SP moved before the push
			}
			continue
		}
		s := row.Delta >= 8
		if s == saved {
			continue
		}
		if !s {
			// Leaving the frame: POPQ BP just before, or a block the
			// frame never covered (the morestack call, reached from the
			// stack check) after code that does not return.
			i := row.Start - entry
			if i == 0 || i > uint64(len(code)) {
				return Result{}, false
			}
			if code[i-1] != 0x5d && !noReturnBefore(code, entry, row.Start) {
				return Result{}, false
			}
		}
		r := Rule{PC: row.Start, Saved: s}
		if s {
			r.Offset = -16 // the pushed BP, below the return address
		}
		rules = append(rules, r)
		saved = s
	}
	return Result{Kind: Described, Rules: rules}, true
}

// quickPrologue finds the PUSHQ BP that starts the frame: at the entry,
// or after the stack check (CMPQ SP, 16(R14) or LEAQ -n(SP), R12; CMPQ
// R12, 16(R14), then a conditional jump), and followed by MOVQ SP, BP.
func quickPrologue(code []byte, entry uint64) (push uint64, ok bool) {
	off := 0
	for n := 0; n < 4 && off < len(code); n++ {
		in, err := decodeX86(code[off:])
		if err != nil {
			return 0, false
		}
		switch {
		case in.Op == x86asm.PUSH && in.Args[0] == x86asm.RBP:
			next, err := decodeX86(code[off+in.Len:])
			if err != nil || next.Op != x86asm.MOV || next.Args[0] != x86asm.RBP || next.Args[1] != x86asm.RSP {
				return 0, false
			}
			return entry + uint64(off), true
		case in.Op == x86asm.CMP, in.Op == x86asm.LEA && in.Args[0] == x86asm.R12, jccAMD64[in.Op]:
		default:
			return 0, false
		}
		off += in.Len
	}
	return 0, false
}

// noReturnBefore says whether the instruction that ends just before pc
// is one after which execution does not fall through: a call Go follows
// with a NOP or an INT3 when it does not return (runtime.gopanic,
// morestack's), a jump, a return or a trap. It decodes back from a
// window, so it only accepts what it can read as a whole.
func noReturnBefore(code []byte, entry, pc uint64) bool {
	i := int(pc - entry)
	switch {
	case i >= 1 && (code[i-1] == 0xcc || code[i-1] == 0xc3): // INT3, RET
		return true
	case i >= 1 && code[i-1] == 0x90: // NOP after a call that does not return
		return true
	case i >= 3 && code[i-3] == 0x0f && code[i-2] == 0x1f && code[i-1] == 0x00: // NOPL (AX)
		return true
	}
	return false
}
