package goprologue

import (
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"
)

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
	push, morestack, ok := quickPrologue(code, entry)
	if !ok {
		return Result{}, false
	}
	mov := push + 1
	rules := make([]Rule, 1, 8) // room for the usual prologue, exits and morestack block
	rules[0] = Rule{PC: entry}
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
			// stack check) after code that does not return or jumps.
			i := row.Start - entry
			if i == 0 || i > uint64(len(code)) {
				return Result{}, false
			}
			if code[i-1] != 0x5d && !noReturnBefore(code, entry, row.Start) &&
				(row.Start != morestack || !jumpBefore(code, entry, row.Start)) {
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
// or after the stack check (CMPQ SP, 16(R14); or LEAQ -n(SP), R12, or
// for a large frame MOVQ SP, R12; SUBQ $n, R12; JB, then CMPQ R12,
// 16(R14); then a conditional jump), and followed by MOVQ SP, BP.
// morestack is where the stack check's jumps go (0 without one): the
// block that calls morestack, entered before the frame is made.
func quickPrologue(code []byte, entry uint64) (push, morestack uint64, ok bool) {
	off := 0
	for n := 0; n < 6 && off < len(code); n++ {
		in, err := quickDecodeX86(code[off:])
		if err != nil {
			return 0, 0, false
		}
		switch {
		case in.Op == x86asm.PUSH && in.Args[0] == x86asm.RBP:
			next, err := quickDecodeX86(code[off+in.Len:])
			if err != nil || next.Op != x86asm.MOV || next.Args[0] != x86asm.RBP || next.Args[1] != x86asm.RSP {
				return 0, 0, false
			}
			return entry + uint64(off), morestack, true
		case in.Op == x86asm.CMP, in.Args[0] == x86asm.R12 && (in.Op == x86asm.LEA || in.Op == x86asm.SUB || in.Op == x86asm.MOV && in.Args[1] == x86asm.RSP):
		case jccAMD64[in.Op]:
			rel, isRel := in.Args[0].(x86asm.Rel)
			to := entry + uint64(off+in.Len) + uint64(int64(rel))
			if !isRel || morestack != 0 && to != morestack {
				return 0, 0, false
			}
			morestack = to
		default:
			return 0, 0, false
		}
		off += in.Len
	}
	return 0, 0, false
}

// quickDecodeX86 reads the encodings the Go compiler gives the
// instructions of its prologues (above) as x86asm reads them, and
// anything else with x86asm: every function's prologue is read, and
// x86asm's table-driven decoder was most of the fast path's time. Only
// Op, Args and Len are set; TestQuickDecodeX86 holds them to x86asm's
// for each encoding, with every displacement and immediate tried.
func quickDecodeX86(b []byte) (x86asm.Inst, error) {
	le32 := func(i int) uint32 { return binary.LittleEndian.Uint32(b[i:]) }
	r12SP := x86asm.Args{x86asm.R12, x86asm.RSP}
	switch {
	case len(b) >= 1 && b[0] == 0x55:
		return x86asm.Inst{Op: x86asm.PUSH, Args: x86asm.Args{x86asm.RBP}, Len: 1}, nil
	case len(b) >= 2 && (b[0] == 0x76 || b[0] == 0x72):
		return x86asm.Inst{Op: shortJcc[b[0]], Args: x86asm.Args{x86asm.Rel(int8(b[1]))}, Len: 2}, nil
	case len(b) >= 3:
		switch [3]byte(b[:3]) {
		case [3]byte{0x48, 0x89, 0xe5}:
			return x86asm.Inst{Op: x86asm.MOV, Args: x86asm.Args{x86asm.RBP, x86asm.RSP}, Len: 3}, nil
		case [3]byte{0x49, 0x89, 0xe4}:
			return x86asm.Inst{Op: x86asm.MOV, Args: r12SP, Len: 3}, nil
		}
	}
	switch {
	case len(b) >= 6 && b[0] == 0x0f && (b[1] == 0x86 || b[1] == 0x82):
		return x86asm.Inst{Op: shortJcc[b[1]-0x10], Args: x86asm.Args{x86asm.Rel(int32(le32(2)))}, Len: 6}, nil
	case len(b) >= 4 && (b[0] == 0x49 || b[0] == 0x4d) && b[1] == 0x3b && b[2] == 0x66 && b[3] == 0x10:
		reg := x86asm.RSP
		if b[0] == 0x4d {
			reg = x86asm.R12
		}
		return x86asm.Inst{Op: x86asm.CMP, Args: x86asm.Args{reg, x86asm.Mem{Base: x86asm.R14, Disp: 16}}, Len: 4}, nil
	case len(b) >= 5 && [4]byte(b[:4]) == [4]byte{0x4c, 0x8d, 0x64, 0x24}:
		return x86asm.Inst{Op: x86asm.LEA, Args: x86asm.Args{x86asm.R12, x86asm.Mem{Base: x86asm.RSP, Scale: 1, Disp: int64(int8(b[4]))}}, Len: 5}, nil
	case len(b) >= 8 && [4]byte(b[:4]) == [4]byte{0x4c, 0x8d, 0xa4, 0x24}:
		return x86asm.Inst{Op: x86asm.LEA, Args: x86asm.Args{x86asm.R12, x86asm.Mem{Base: x86asm.RSP, Scale: 1, Disp: int64(le32(4))}}, Len: 8}, nil
	case len(b) >= 4 && [3]byte(b[:3]) == [3]byte{0x49, 0x83, 0xec}:
		return x86asm.Inst{Op: x86asm.SUB, Args: x86asm.Args{x86asm.R12, x86asm.Imm(int8(b[3]))}, Len: 4}, nil
	case len(b) >= 7 && [3]byte(b[:3]) == [3]byte{0x49, 0x81, 0xec}:
		return x86asm.Inst{Op: x86asm.SUB, Args: x86asm.Args{x86asm.R12, x86asm.Imm(int32(le32(3)))}, Len: 7}, nil
	}
	return decodeX86(b)
}

// shortJcc are the conditional jumps of the stack check, by their
// one-byte opcode.
var shortJcc = map[byte]x86asm.Op{0x76: x86asm.JBE, 0x72: x86asm.JB}

// jumpBefore says whether the instruction that ends just before pc is
// an unconditional direct jump (JMP rel8 or rel32), read back from pc
// and decoded whole.
func jumpBefore(code []byte, entry, pc uint64) bool {
	i := int(pc - entry)
	for _, n := range []int{2, 5} {
		if i < n {
			continue
		}
		in, err := decodeX86(code[i-n : i])
		if err == nil && in.Op == x86asm.JMP && in.Len == n {
			if _, rel := in.Args[0].(x86asm.Rel); rel {
				return true
			}
		}
	}
	return false
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
