package cfi

import (
	"debug/elf"
	"errors"
	"fmt"
	"sync"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/gocfi"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/goprologue"
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
	if !gopclntab.IsGo(ef) {
		return nil, nil
	}
	t, err := gopclntab.OpenELF(f)
	if errors.Is(err, gopclntab.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{&Error{Section: kindGo.String(), Msg: err.Error()}}
	}
	gn := &goNotes{m: map[uint64]goNote{}}
	img, notes, err := gocfi.DebugFrame(t, ef.Machine, goRules(f, ef.Machine, gn))
	if err != nil {
		return nil, append(notes, &Error{Section: kindGo.String(), Msg: err.Error()})
	}
	return &Section{kind: kindGo, data: img, order: ef.ByteOrder, ptrSize: ptr, goNotes: gn.m}, notes
}

// The codes of a Go function's note (FDE.Note), which translate gives
// as its diagnostic's reason: why the function's FDE says what its code
// does not show. Notes, not failures: the function is described.
const (
	// goStackSwitch: the function sets SP to another stack, or to a value
	// its pcsp table cannot say (flagged SPWrite: morestack, systemstack,
	// mcall, gogo, asmcgocall, ...); its return address is undefined from
	// its entry, so a walk ends there instead of reading the wrong stack.
	goStackSwitch = "go-stack-switch"
	// goOutermost: where a goroutine's or a thread's stack begins
	// (runtime.goexit, runtime.mstart, runtime.rt0_go, _rt0_*, or flagged
	// TopFrame, which Go's linker sets on link-register machines and the
	// runtime on its signal trampolines): the return address is undefined
	// from its entry.
	goOutermost = "go-outermost"
	// goFPUnknown: where the function saves the caller's frame pointer
	// was not found (internal/goprologue does not follow its
	// instructions); its FDE has no frame-pointer rule, so the frame
	// pointer reads as unchanged.
	goFPUnknown = "go-fp-unknown"
)

// goNote is a Go function's note: its code and what it is about.
type goNote struct{ code, detail string }

// goNotes are the notes of a Go program's functions, by entry, as
// goRules' goroutines add them.
type goNotes struct {
	mu sync.Mutex
	m  map[uint64]goNote
}

func (n *goNotes) add(entry uint64, note goNote) {
	n.mu.Lock()
	n.m[entry] = note
	n.mu.Unlock()
}

// Note is the note on the rules of an FDE that no CFI in the file gave.
// For one made from a Go program's function table (its Section's Name is
// .gopclntab), code says which of them the function's code does not
// give, detail why: "go-stack-switch" for a function that switches
// stacks and "go-outermost" for one where a stack begins (the return
// address is undefined from the entry on, an outermost frame),
// "go-fp-unknown" for one whose frame-pointer save was not found (no
// frame-pointer rule: it reads as unchanged). For one made from the
// instructions (Options.FromCode; Section name .text), code is
// "from-code" and detail the entry the analysis began at. "" for any
// other FDE.
func (f *FDE) Note() (code, detail string) {
	if f.sec == nil {
		return "", ""
	}
	switch f.sec.kind {
	case kindGo:
		n := f.sec.goNotes[f.Start]
		return n.code, n.detail
	case kindCode:
		return codeNote, fmt.Sprintf("described from its instructions, reached from the entry at %#x", f.sec.codeEntries[f.Start])
	}
	return "", ""
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

// goRules are the rules a Go function's pcsp table does not give: the
// return address undefined where a walk must end (outermostNote), and
// where the caller's frame pointer is saved, from the function's
// instructions (internal/goprologue; x86-64 and AArch64, where Go keeps
// frame pointers). A function whose instructions are not followed (the
// runtime's assembly that switches stacks, most of it marked outermost
// anyway) gets no frame-pointer rule: its frame pointer reads as unchanged.
// gocfi.DebugFrame calls it for every function on all CPUs at once; the
// executable sections are loaded before, so they are only read then. A
// function whose stack pointer never moves (its pcsp table all 0) cannot
// have saved the frame pointer in its frame, and is not decoded. Each
// function marked outermost, and each whose frame-pointer save was not
// found, gets a note in notes.
func goRules(f *elfread.File, m elf.Machine, notes *goNotes) gocfi.Extra {
	ra, ok := raColumn[m]
	if !ok {
		return nil
	}
	arch, fp, hasFP := goprologue.AMD64, uint64(6), m == elf.EM_X86_64 // RBP
	if m == elf.EM_AARCH64 {
		arch, fp, hasFP = goprologue.ARM64, 29, true // x29
	}
	var code *textReader
	if hasFP {
		code = newTextReader(f)
	}
	return func(fn *gopclntab.Func, buf []gocfi.RegRule) []gocfi.RegRule {
		if n := outermostNote(fn); n.code != "" {
			notes.add(fn.Entry, n)
			return append(buf, gocfi.RegRule{PC: fn.Entry, Reg: ra, Kind: gocfi.Undefined})
		}
		if !hasFP {
			return nil
		}
		rules, why := funcFP(fn, arch, fp, code, buf)
		if why != "" {
			notes.add(fn.Entry, goNote{goFPUnknown, why + "; the frame pointer reads as unchanged"})
		}
		return rules
	}
}

// funcFP is fn's frame-pointer rules (register fp), appended to out, or
// why they are not known; neither for a function without a pcsp table,
// one whose stack pointer never moves, or one that never saves the
// frame pointer.
func funcFP(fn *gopclntab.Func, arch goprologue.Arch, fp uint64, code *textReader, out []gocfi.RegRule) ([]gocfi.RegRule, string) {
	if !fn.HasPCSP() {
		return nil, ""
	}
	var buf [16]goprologue.SPRange
	sp := buf[:0]
	moves := false
	it := fn.PCSP()
	for r, ok := it.Next(); ok; r, ok = it.Next() {
		sp = append(sp, goprologue.SPRange{Start: r.PC, End: r.End, Delta: int64(r.Value)})
		moves = moves || r.Value != 0
	}
	if it.Err() != nil || !moves {
		return nil, ""
	}
	b := code.bytes(fn.Entry, sp[len(sp)-1].End)
	if b == nil {
		return nil, fmt.Sprintf("its code [%#x,%#x) is in no executable section", fn.Entry, sp[len(sp)-1].End)
	}
	// The compiler's usual shape, checked from its prologue and exits,
	// else every path followed (goprologue's tests hold the two equal).
	res, ok := goprologue.Result{}, false
	switch {
	case fn.Flag&gopclntab.Asm != 0:
	case arch == goprologue.AMD64:
		res, ok = goprologue.QuickAMD64(b, fn.Entry, sp)
	case arch == goprologue.ARM64:
		res, ok = goprologue.QuickARM64(b, fn.Entry, sp)
	}
	var err error
	if !ok {
		res, err = goprologue.Analyze(arch, b, fn.Entry, sp)
	}
	if err != nil || res.Kind != goprologue.Described {
		return nil, fpUnknown(res, err)
	}
	return fpRegRules(out, res.Rules, sp, fp, arch == goprologue.ARM64), ""
}

// fpUnknown says why goprologue's result (res, or its error err) gives
// no frame-pointer rules; "" when there is nothing to say: the rules are
// described, or the function never saves the frame pointer (it stays in
// its register, which is what no rule says).
func fpUnknown(res goprologue.Result, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case res.Kind == goprologue.Described || res.Kind == goprologue.Frameless:
		return ""
	}
	return res.String()
}

// fpRegRules turns goprologue's rules into register rules, appended to
// out (empty). On AArch64 the
// return address is saved only where the pcsp value is not 0 (Go's rule,
// from where the frame is allocated), and SFrame cannot say that the
// frame pointer is saved while the return address is not: where the
// pcsp value is 0, the frame pointer reads as unchanged. That is where a
// large frame has stored x29 and x30 (STP) but not yet moved SP, and x29
// still holds the caller's value.
func fpRegRules(out []gocfi.RegRule, rs []goprologue.Rule, sp []goprologue.SPRange, fp uint64, lr bool) []gocfi.RegRule {
	emit := func(pc uint64, saved bool, off int64) {
		rr := gocfi.RegRule{PC: pc, Reg: fp, Kind: gocfi.SameValue}
		if saved {
			rr.Kind, rr.Offset = gocfi.SavedAt, off
		}
		if n := len(out); n > 0 && out[n-1].Kind == rr.Kind && out[n-1].Offset == rr.Offset {
			return
		}
		if n := len(out); n > 0 && out[n-1].PC == pc {
			out[n-1] = rr
			return
		}
		out = append(out, rr)
	}
	// Walk the boundaries of both lists in PC order.
	i, j := 0, 0
	var cur goprologue.Rule
	for i < len(rs) || j < len(sp) {
		var pc uint64
		switch {
		case j >= len(sp) || (i < len(rs) && rs[i].PC <= sp[j].Start):
			pc = rs[i].PC
		default:
			pc = sp[j].Start
		}
		for i < len(rs) && rs[i].PC == pc {
			cur = rs[i]
			i++
		}
		delta := int64(0)
		for j < len(sp) && sp[j].Start <= pc {
			j++
		}
		if j > 0 {
			delta = sp[j-1].Delta
		}
		emit(pc, cur.Saved && (!lr || delta != 0), cur.Offset)
	}
	return out
}

// textReader gives the bytes of the executable sections, all loaded
// before the goroutines of gocfi.DebugFrame share it (slices of the image for a file
// read from memory), so that it is only read concurrently.
type textReader struct {
	secs []textSection
}

type textSection struct {
	addr uint64
	data []byte
}

func newTextReader(f *elfread.File) *textReader {
	r := &textReader{}
	for i, s := range f.ELF.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type == elf.SHT_NOBITS {
			continue
		}
		if sec, err := f.SectionAt(i); err == nil {
			r.secs = append(r.secs, textSection{s.Addr, sec.Data})
		}
	}
	return r
}

// bytes returns the code in [lo, hi), or nil when no executable section
// holds all of it.
func (r *textReader) bytes(lo, hi uint64) []byte {
	for _, s := range r.secs {
		if hi >= lo && lo >= s.addr && hi-s.addr <= uint64(len(s.data)) {
			return s.data[lo-s.addr : hi-s.addr]
		}
	}
	return nil
}

// outermostNote says whether a walk must end at fn, and why (a zero note
// when it need not): the outermost frames (by name, or flagged TopFrame,
// which Go's linker marks so only on link-register machines), and the
// functions that write SP as no pcsp table can say (SPWrite: morestack,
// systemstack, mcall, gogo, asmcgocall...), whose CFA would be wrong once
// SP is switched to another stack. A function that is both is outermost.
func outermostNote(fn *gopclntab.Func) goNote {
	switch {
	case outermostFuncs[fn.Name]:
		return goNote{goOutermost, "a goroutine's or a thread's stack begins here (by name): return address undefined from the entry"}
	case fn.Flag&gopclntab.TopFrame != 0:
		return goNote{goOutermost, "flagged TopFrame (the runtime's unwinder stops here): return address undefined from the entry"}
	case fn.Flag&gopclntab.SPWrite != 0:
		return goNote{goStackSwitch, "flagged SPWrite (sets SP as its pcsp table cannot say): return address undefined from the entry"}
	}
	return goNote{}
}
