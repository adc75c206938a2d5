package codeentry

import (
	"debug/elf"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// noReturnNames are the C and C++ runtime functions that never return
// to their caller. A call to one ends its path: what follows it is
// padding or another function, not code that runs with the caller's
// state.
var noReturnNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range []string{
		"exit", "_exit", "_Exit", "abort", "quick_exit",
		"__stack_chk_fail", "__assert_fail", "__fortify_fail", "__chk_fail",
		"__cxa_throw", "__cxa_rethrow", "_Unwind_Resume",
		"__cxa_bad_cast", "__cxa_bad_typeid", "__cxa_throw_bad_array_new_length",
		"_ZSt9terminatev", // std::terminate()
		"longjmp", "siglongjmp", "_longjmp", "__longjmp_chk",
		"pthread_exit", "err", "errx", "verr", "verrx",
	} {
		m[n] = true
	}
	return m
}()

// throwName matches libstdc++'s std::__throw_* helpers:
// _ZSt16__throw_bad_allocv, _ZSt20__throw_length_errorPKc, ...
var throwName = regexp.MustCompile(`^_ZSt[0-9]+__throw_`)

// isNoReturn says the function called name does not return.
func isNoReturn(name string) bool {
	name, _, _ = strings.Cut(name, "@")
	return noReturnNames[name] || throwName.MatchString(name)
}

// noReturnSet gives the addresses whose calls do not return: the file's
// own definitions of those functions, and the PLT stubs that lead to
// them.
func noReturnSet(img *image, syms *symbols, rs *relocs, m elf.Machine) map[uint64]bool {
	out := map[uint64]bool{}
	for name, addrs := range syms.defined {
		if isNoReturn(name) {
			for _, a := range addrs {
				out[a] = true
			}
		}
	}
	for stub, name := range pltStubs(img, rs, m) {
		if isNoReturn(name) {
			out[stub] = true
		}
	}
	return out
}

// pltStubs maps each PLT stub's address to the function it jumps to. A
// stub is found by what it does, not by its place in the section, so
// that lazy .plt, .plt.sec (IBT) and .plt.got layouts alike are read:
// it loads a GOT slot and jumps through it, and the JUMP_SLOT (or, for
// .plt.got, GLOB_DAT) relocation of that slot names the function.
func pltStubs(img *image, rs *relocs, m elf.Machine) map[uint64]string {
	slots := map[uint64]string{}
	for _, r := range rs.list {
		switch elf.R_X86_64(r.typ) {
		case elf.R_X86_64_JMP_SLOT, elf.R_X86_64_GLOB_DAT:
			if m != elf.EM_X86_64 {
				continue
			}
		default:
			if m != elf.EM_AARCH64 || (r.typ != uint32(elf.R_AARCH64_JUMP_SLOT) && r.typ != uint32(elf.R_AARCH64_GLOB_DAT)) {
				continue
			}
		}
		if s, ok := rs.symbol(r.sym); ok {
			slots[r.off] = s.Name
		}
	}
	out := map[uint64]string{}
	for _, r := range img.text {
		if !img.inPLT(r.addr) {
			continue
		}
		var stubs map[uint64]uint64
		if m == elf.EM_X86_64 {
			stubs = stubsAMD64(r)
		} else {
			stubs = stubsARM64(r)
		}
		for stub, slot := range stubs {
			if name, ok := slots[slot]; ok {
				out[stub] = name
			}
		}
	}
	return out
}

// stubsAMD64 maps each x86-64 stub (from its endbr64, if it has one) to
// the GOT slot its jmp *slot(%rip) reads.
func stubsAMD64(r region) map[uint64]uint64 {
	out := map[uint64]uint64{}
	prevEndbr := false
	for off := 0; off < len(r.data); {
		pc := r.addr + uint64(off)
		in, ok := decodeAMD64(r.data[off:], pc)
		if !ok {
			off, prevEndbr = off+1, false
			continue
		}
		if x, err := isa.AMD64(r.data[off:]); err == nil && x.Op == x86asm.JMP {
			if mem, ok := x.Args[0].(x86asm.Mem); ok && mem.Base == x86asm.RIP && mem.Index == 0 {
				start := pc
				if prevEndbr {
					start -= 4
				}
				out[start] = pc + uint64(in.len) + uint64(mem.Disp)
			}
		}
		prevEndbr = in.endbr
		off += in.len
	}
	return out
}

// stubsARM64 maps each AArch64 stub (from its bti c, if it has one) to
// the GOT slot its adrp x16 / ldr x17, [x16, #lo] pair reads.
func stubsARM64(r region) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for off := 0; off+8 <= len(r.data); off += 4 {
		pc := r.addr + uint64(off)
		in, err := isa.ARM64(r.data[off:])
		if err != nil || in.Op != arm64asm.ADRP || in.Args[0] != arm64asm.X16 {
			continue
		}
		page, ok := in.Args[1].(arm64asm.PCRel)
		if !ok {
			continue
		}
		ld, err := isa.ARM64(r.data[off+4:])
		if err != nil || ld.Op != arm64asm.LDR || ld.Args[0] != arm64asm.X17 {
			continue
		}
		mem, ok := ld.Args[1].(arm64asm.MemImmediate)
		if !ok || mem.Base != arm64asm.RegSP(arm64asm.X16) || mem.Mode != arm64asm.AddrOffset {
			continue
		}
		lo, ok := memImm(mem)
		if !ok {
			continue
		}
		start := pc
		if off >= 4 {
			if prev, err := isa.ARM64(r.data[off-4:]); err == nil && prev.Op == arm64asm.HINT {
				start -= 4 // bti c
			}
		}
		out[start] = (pc &^ 0xfff) + uint64(int64(page)) + uint64(lo)
	}
	return out
}

// memImm is the offset of a [Xn,#imm] operand: arm64asm does not export
// it, so it is read from the operand's text ("[X16,#8]", "[X16]").
func memImm(m arm64asm.MemImmediate) (int64, bool) {
	s := m.String()
	i := strings.IndexByte(s, '#')
	if i < 0 {
		return 0, true
	}
	v, err := strconv.ParseInt(strings.TrimSuffix(s[i+1:], "]"), 0, 64)
	return v, err == nil
}
