package cfi

import (
	"debug/elf"
	"errors"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/gocfi"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
)

// goSection is the call-frame information of a Go program's functions,
// from its function table (.gopclntab): the image of a .debug_frame
// section (internal/gocfi) with Go's own rules, the CFA from each
// function's pcsp table, plus the outermost frames and the stack
// switches marked. It comes after .eh_frame, whose FDEs win where both
// describe code (a cgo program's C parts), and before .debug_frame: Go's
// linker writes a Go function's .debug_frame FDE from this same pcsp
// table (the rules are equal at every PC, internal/gocfi's tests), but
// without those marks on x86-64, and a walk through a thread's first
// frame then runs off its stack; C code's .debug_frame FDEs, which the
// table does not cover, are kept. nil when the file is not a Go program;
// notes are the functions left out, and a table that cannot be read.
func goSection(f *elfread.File, ptr int) (*Section, []error) {
	ef := f.ELF
	if !isGo(ef) {
		return nil, nil
	}
	t, err := gopclntab.OpenELF(f)
	if errors.Is(err, gopclntab.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{&Error{Section: kindGo.String(), Msg: err.Error()}}
	}
	img, notes, err := gocfi.DebugFrame(t, ef.Machine, outermost(ef.Machine))
	if err != nil {
		return nil, append(notes, &Error{Section: kindGo.String(), Msg: err.Error()})
	}
	return &Section{kind: kindGo, data: img, order: ef.ByteOrder, ptrSize: ptr}, notes
}

// isGo says whether ef is a Go program: it has the function table's
// section or the build information's (every Go binary since 1.13), so
// that no other file pays for a search of its sections.
func isGo(ef *elf.File) bool {
	for _, name := range []string{".gopclntab", ".go.buildinfo", ".data.rel.ro.gopclntab"} {
		if ef.Section(name) != nil {
			return true
		}
	}
	return false
}

// raColumn is the DWARF number of the return address per machine (the
// column Go's CIEs use).
var raColumn = map[elf.Machine]uint64{elf.EM_X86_64: 16, elf.EM_AARCH64: 30, elf.EM_S390: 14}

// outermostFuncs are where a goroutine's or a thread's stack begins:
// walks end there.
var outermostFuncs = map[string]bool{
	"runtime.goexit": true, "runtime.rt0_go": true, "runtime.mstart": true,
	"_rt0_amd64": true, "_rt0_amd64_linux": true, "_rt0_arm64": true, "_rt0_arm64_linux": true, "_rt0_s390x_linux": true,
	"_rt0_amd64_linux_lib": true, "_rt0_arm64_linux_lib": true,
}

// outermost marks the return address undefined from the entry of the
// functions where a walk must end: the outermost frames (by name, or
// flagged TopFrame, which Go's linker marks so only on link-register
// machines), and the functions that write SP as no pcsp table can say
// (SPWrite: morestack, systemstack, mcall, gogo, asmcgocall...), whose
// CFA would be wrong once SP is switched to another stack.
func outermost(m elf.Machine) gocfi.Extra {
	ra, ok := raColumn[m]
	if !ok {
		return nil
	}
	return func(f *gopclntab.Func) []gocfi.RegRule {
		if f.Flag&(gopclntab.TopFrame|gopclntab.SPWrite) != 0 || outermostFuncs[f.Name] {
			return []gocfi.RegRule{{PC: f.Entry, Reg: ra, Kind: gocfi.Undefined}}
		}
		return nil
	}
}
