package goprologue

import (
	"encoding/binary"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// QuickAMD64 describes an x86-64 function the Go compiler made, in the
// shape of Go 1.21 and later or in Go 1.19's (see the package doc),
// without following all of its code: it decodes the prologue (after the
// stack check, nothing else may come first), then takes the frame
// pointer as saved wherever the pcsp rows put SP at or below the saved
// BP, and checks each place the frame is left that way to restore it
// (POPQ BP; or MOVQ n(SP), BP; ADDQ $fs, SP). It gives the rules Analyze
// gives such a function (a test runs both over whole binaries of both
// Go releases), at a small part of the cost; ok is false for any other
// function, which Analyze must follow: assembly, a prologue or an exit
// of another shape.
func QuickAMD64(code []byte, entry uint64, sp []SPRange) (r Result, ok bool) {
	if len(sp) == 0 || sp[0].Start != entry || sp[0].Delta != 0 {
		return Result{}, false
	}
	f, ok := quickPrologue(code, entry)
	if !ok {
		return Result{}, false
	}
	return quickRules(entry, sp, f, -16, func(pc uint64) (uint64, bool) { return f.left(code, entry, pc) })
}

// quickRules are the rules of a function whose prologue makes frame f,
// from its pcsp rows, for both fast paths: SP must not move before the
// frame is made; the caller's frame pointer is saved (at CFA+offset)
// from f.saved on, and wherever a row puts SP back in the frame after an
// exit; left(pc) checks the exit at a row where SP leaves the frame and
// gives where the frame pointer is back in its register. With f.size
// set, SP must be at the entry's or at the frame's; without (a pushed
// BP), it is in the frame wherever it is 8 or more below the entry's.
// ok is false for rows of any other shape.
func quickRules(entry uint64, sp []SPRange, f quickFrame, offset int64, left func(pc uint64) (uint64, bool)) (r Result, ok bool) {
	rules := make([]Rule, 1, 8) // room for the usual prologue, exits and morestack block
	rules[0] = Rule{PC: entry}
	saved := false
	for _, row := range sp {
		if row.Start < f.made {
			if row.Delta != 0 {
				return Result{}, false // SP moved before the frame was made
			}
			continue
		}
		s := row.Delta >= 8
		if f.size != 0 {
			if row.Delta != 0 && row.Delta != f.size {
				return Result{}, false
			}
			s = row.Delta == f.size
		}
		if s == saved {
			continue
		}
		at := row.Start
		switch {
		case s && len(rules) == 1:
			at = f.saved // the frame is made before BP is stored in it
			if at > row.End {
				return Result{}, false
			}
		case !s:
			if at, ok = left(row.Start); !ok {
				return Result{}, false
			}
		}
		if at <= rules[len(rules)-1].PC {
			return Result{}, false // rules out of order: not the compiler's code
		}
		r := Rule{PC: at, Saved: s}
		if s {
			r.Offset = offset
		}
		rules = append(rules, r)
		saved = s
	}
	return Result{Kind: Described, Rules: rules}, true
}

// quickFrame is the frame a prologue makes.
type quickFrame struct {
	made  uint64 // the PC after the instruction that moves SP
	saved uint64 // the PC from which the caller's BP is in the frame
	size  int64  // SP's offset in the frame (Go 1.19: SUBQ $size, SP; AArch64); 0 for PUSHQ BP (Go 1.21)
	// morestack is where the stack check's jumps go (0 without one): the
	// block that calls morestack, entered before the frame is made.
	morestack uint64
}

// left returns where the frame pointer is back in its register when SP
// leaves the frame at pc: just before pc, after POPQ BP (Go 1.21); before
// ADDQ $size, SP, after MOVQ size-8(SP), BP (Go 1.19); or at pc for a
// block the frame never covered (the morestack call, reached from the
// stack check) after code that does not return or jumps.
func (f *quickFrame) left(code []byte, entry, pc uint64) (uint64, bool) {
	i := pc - entry
	switch {
	case i == 0 || i > uint64(len(code)):
		return 0, false
	case noReturnBefore(code, entry, pc), pc == f.morestack && jumpBefore(code, entry, pc):
		return pc, true
	case f.size == 0:
		return pc, code[i-1] == 0x5d // POPQ BP
	}
	for _, n := range []uint64{4, 7} { // ADDQ $imm8 or $imm32, SP
		if i < n {
			continue
		}
		add, err := quickDecodeX86(code[i-n : i])
		if err != nil || add.Len != int(n) || spMove(add) != f.size {
			continue
		}
		for _, m := range []uint64{4, 5, 8} { // MOVQ (SP), disp8 or disp32(SP), BP
			if i-n < m {
				continue
			}
			mov, err := quickDecodeX86(code[i-n-m : i-n])
			if err == nil && mov.Op == x86asm.MOV && mov.Len == int(m) && mov.Args[0] == x86asm.RBP && mov.Args[1] == spSlot(f.size-8) {
				return pc - n, true
			}
		}
	}
	return 0, false
}

// spMove is how far an ADDQ or SUBQ of a constant moves SP (SUBQ $n,
// SP: -n; Go writes a frame of 128 bytes ADDQ $-128, SP, which an imm8
// holds); 0 for anything else.
func spMove(in x86asm.Inst) int64 {
	imm, ok := in.Args[1].(x86asm.Imm)
	switch {
	case !ok || in.Args[0] != x86asm.RSP:
		return 0
	case in.Op == x86asm.ADD:
		return int64(imm)
	case in.Op == x86asm.SUB:
		return -int64(imm)
	}
	return 0
}

// spSlot is the operand disp(SP) as x86asm gives it.
func spSlot(disp int64) x86asm.Mem { return x86asm.Mem{Base: x86asm.RSP, Scale: 1, Disp: disp} }

// quickPrologue finds the frame the prologue makes: at the entry, or
// after the stack check (CMPQ SP, 16(R14); or LEAQ -n(SP), R12, or for a
// large frame MOVQ SP, R12; SUBQ $n, R12; JB, then CMPQ R12, 16(R14);
// then a conditional jump), either PUSHQ BP; MOVQ SP, BP (Go 1.21 and
// later, and the assembler's frames) or SUBQ $fs, SP; MOVQ BP, fs-8(SP)
// (Go 1.19).
func quickPrologue(code []byte, entry uint64) (f quickFrame, ok bool) {
	off := 0
	for n := 0; n < 6 && off < len(code); n++ {
		in, err := quickDecodeX86(code[off:])
		if err != nil {
			return f, false
		}
		end := entry + uint64(off+in.Len)
		switch {
		case in.Op == x86asm.PUSH && in.Args[0] == x86asm.RBP:
			next, err := quickDecodeX86(code[off+in.Len:])
			if err != nil || next.Op != x86asm.MOV || next.Args[0] != x86asm.RBP || next.Args[1] != x86asm.RSP {
				return f, false
			}
			f.made, f.saved = end, end
			return f, true
		case spMove(in) < 0:
			size := -spMove(in)
			next, err := quickDecodeX86(code[off+in.Len:])
			if size < 8 || err != nil || next.Op != x86asm.MOV || next.Args[0] != spSlot(size-8) || next.Args[1] != x86asm.RBP {
				return f, false
			}
			f.made, f.saved, f.size = end, end+uint64(next.Len), size
			return f, true
		case in.Op == x86asm.CMP, in.Args[0] == x86asm.R12 && (in.Op == x86asm.LEA || in.Op == x86asm.SUB || in.Op == x86asm.MOV && in.Args[1] == x86asm.RSP):
		case jccAMD64[in.Op]:
			rel, isRel := in.Args[0].(x86asm.Rel)
			to := end + uint64(int64(rel))
			if !isRel || f.morestack != 0 && to != f.morestack {
				return f, false
			}
			f.morestack = to
		default:
			return f, false
		}
		off += in.Len
	}
	return f, false
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
	case len(b) >= 4 && (b[0] == 0x49 || b[0] == 0x48) && b[1] == 0x83 && quickImms[b[2]].op != 0:
		o := quickImms[b[2]]
		return x86asm.Inst{Op: o.op, Args: x86asm.Args{o.reg(b[0]), x86asm.Imm(int8(b[3]))}, Len: 4}, nil
	case len(b) >= 7 && (b[0] == 0x49 || b[0] == 0x48) && b[1] == 0x81 && quickImms[b[2]].op != 0:
		o := quickImms[b[2]]
		return x86asm.Inst{Op: o.op, Args: x86asm.Args{o.reg(b[0]), x86asm.Imm(int32(le32(3)))}, Len: 7}, nil
	case len(b) >= 4 && b[0] == 0x48 && (b[1] == 0x89 || b[1] == 0x8b) && b[2] == 0x2c && b[3] == 0x24:
		return bpSlotMove(b[1], 0, 4), nil
	case len(b) >= 5 && b[0] == 0x48 && (b[1] == 0x89 || b[1] == 0x8b) && b[2] == 0x6c && b[3] == 0x24:
		return bpSlotMove(b[1], int64(int8(b[4])), 5), nil
	case len(b) >= 8 && b[0] == 0x48 && (b[1] == 0x89 || b[1] == 0x8b) && b[2] == 0xac && b[3] == 0x24:
		return bpSlotMove(b[1], int64(le32(4)), 8), nil
	}
	return isa.AMD64(b)
}

// quickImm is an immediate form quickDecodeX86 reads (opcode 83 or 81),
// by its ModRM byte: the operation, and the register with each REX
// prefix (49: R12, 48: RSP).
type quickImm struct {
	op           x86asm.Op
	reg49, reg48 x86asm.Reg
}

// quickImms are SUBQ $n, R12 of a large frame's stack check, and Go
// 1.19's SUBQ $n, SP and ADDQ $n, SP.
var quickImms = [256]quickImm{
	0xec: {x86asm.SUB, x86asm.R12, x86asm.RSP},
	0xc4: {x86asm.ADD, x86asm.R12, x86asm.RSP},
}

func (q quickImm) reg(rex byte) x86asm.Reg {
	if rex == 0x49 {
		return q.reg49
	}
	return q.reg48
}

// bpSlotMove is MOVQ BP, disp(SP) (opcode 89) or MOVQ disp(SP), BP (8b).
func bpSlotMove(opcode byte, disp int64, n int) x86asm.Inst {
	args := x86asm.Args{spSlot(disp), x86asm.RBP}
	if opcode == 0x8b {
		args[0], args[1] = x86asm.RBP, spSlot(disp)
	}
	return x86asm.Inst{Op: x86asm.MOV, Args: args, Len: n}
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
		in, err := isa.AMD64(code[i-n : i])
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
