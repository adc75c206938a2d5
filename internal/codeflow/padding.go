package codeflow

import (
	"debug/elf"
	"encoding/binary"
	"sort"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// maxJoin bounds the padding funcs joins: alignment inside a function is
// at most 64 bytes (a cache line); more is not padding of one function.
const maxJoin = 64

// padLen is the length of the padding instruction at b (x86-64: a nop
// form or int3; AArch64: nop or udf #0, the linker's fill), 0 when it is
// another instruction or does not decode.
func padLen(m elf.Machine, b []byte) int {
	switch m {
	case elf.EM_X86_64:
		if len(b) > 0 && b[0] == 0xcc {
			return 1
		}
		in, err := isa.AMD64(b)
		if err != nil || in.Op != x86asm.NOP {
			return 0
		}
		return isa.LenAMD64(in, b)
	case elf.EM_AARCH64:
		if len(b) < 4 {
			return 0
		}
		if binary.LittleEndian.Uint32(b) == 0 {
			return 4
		}
		if in, err := isa.ARM64(b[:4]); err == nil && in.Op == arm64asm.NOP {
			return 4
		}
	}
	return 0
}

// isCall says the instruction at b is a call: the address after it is a
// return address, which an unwinder may look up as it is.
func isCall(m elf.Machine, b []byte) bool {
	switch m {
	case elf.EM_X86_64:
		in, err := isa.AMD64(b)
		return err != nil || in.Op == x86asm.CALL
	case elf.EM_AARCH64:
		if len(b) < 4 {
			return false
		}
		in, err := isa.ARM64(b[:4])
		// An instruction arm64asm does not know (the PAC calls blraa and
		// kin among them) counts as a call: the walk could not have
		// stepped it, so a join after one only costs the join.
		return err != nil || in.Op == arm64asm.BL || in.Op == arm64asm.BLR
	}
	return false
}

// joinable says the bytes [lo, hi) between two runs of the walk's code,
// the first ending with the instruction at last, are padding no path
// runs: every byte is in a padding instruction, no entry starts there,
// none is described or data, and the instruction before is no call (its
// return address, the padding's first byte, is looked up by unwinders
// that do not step back into the call; the row there would have to be
// the call's, not the next instruction's).
func (w *walk) joinable(last, lo, hi uint64) bool {
	if hi <= lo || hi-lo > maxJoin || w.textRange(lo) < 0 || w.textRange(lo) != w.textRange(hi-1) {
		return false
	}
	if isCall(w.code.Machine, w.bytes(last)) {
		return false
	}
	es := w.code.Entries
	if i := sort.Search(len(es), func(i int) bool { return es[i].Addr >= lo }); i < len(es) && es[i].Addr < hi {
		return false
	}
	for pc := lo; pc < hi; {
		if w.code.described(pc) || w.code.Data != nil && w.code.Data(pc) {
			return false
		}
		n := padLen(w.code.Machine, w.bytes(pc))
		if n == 0 {
			return false
		}
		pc += uint64(n)
		if pc > hi {
			return false
		}
	}
	return true
}

// withFuncs is x and the extents of fs: the padding funcs joined into a
// Func is the walk's too, and another walk reaching it conflicts, as for
// code.
func withFuncs(x extents, fs []Func) extents {
	for _, f := range fs {
		x.add(f.Start, f.End)
	}
	return x
}
