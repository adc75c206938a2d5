// Package gocfi turns a Go binary's function table (internal/gopclntab)
// into call-frame information: the image of a .debug_frame section with
// one FDE per Go function, built from the function's pcsp table as Go's
// linker builds the .debug_frame it writes into a binary with DWARF
// (cmd/link, writeframes), so that a stripped Go binary (-ldflags='-s -w')
// can be described as one with DWARF is. Executed by package cfi, its
// rules equal those of the linker's own .debug_frame at every PC.
//
// The section (32-bit DWARF, version 3, no augmentation):
//
//   - One CIE at offset 0, code alignment 1, data alignment -4, the
//     return-address column the linker uses (x86-64: 16, the RA; AArch64:
//     30, the LR), its initial instructions padded with DW_CFA_nop to the
//     linker's reserved size (16 bytes, 32 on link-register machines).
//     x86-64: CFA = RSP+8, RA at CFA-8. AArch64 (and every link-register
//     machine): CFA = SP+0, LR same value, SP = CFA (val_offset 0).
//   - One FDE per function with a pcsp table, in table (address) order:
//     start = entry, size = the end of its pcsp table (the function's
//     symbol size, without the padding up to the next function). For each
//     pcsp row, from its PC: CFA = SP + value (+ the pointer size on x86,
//     for the pushed return address); on link-register machines the LR
//     is saved at CFA-value when value > 0 and has the same value when it
//     is 0, except in TopFrame functions, whose LR is undefined from their
//     entry on (an unwinder stops there). Each program is padded with
//     DW_CFA_nop to a multiple of the pointer size.
//
// Where it follows the linker's encoding rather than the simplest one,
// so that the FDE programs are the linker's byte for byte (the tests
// compare them):
//
//   - Code alignment 1 on every machine, not the PC quantum: the linker's
//     last advance goes to the function's end minus one (the DWARF range
//     is exclusive, and the linker stops "just before the end"), which is
//     not a multiple of 4 on AArch64. The row at end-1 changes no rule.
//   - Offsets are factored by -4 with Go's truncating division, as the
//     linker does; pcsp values are multiples of the pointer size, so
//     nothing is lost.
//   - The ops of a row come before the advance to the next one, the LR
//     rule before the CFA rule.
//
// A caller adds register rules the pcsp table does not know (where a
// prologue saves the frame pointer, say) as RegRules, per function, from
// a PC on: they go into the program in PC order, after the row ops at the
// same PC, so they win over them. The image is then no longer the
// linker's, but the CFA and RA rules are unchanged unless a RegRule names
// the RA register.
//
// What the linker's FDEs say and do not: the LR is "saved" from the PC
// the frame is allocated at, not from the store (the linker's own TODO);
// SPWrite functions (morestack, systemstack, ...) change SP in ways the
// pcsp table cannot say, and get an FDE all the same; negative pcsp values
// occur (Go 1.19's AArch64 asyncPreempt ends 16 below its entry SP) and
// are kept. A caller may drop functions by Flag or Name, or correct them
// with RegRules. Functions without a pcsp table (the markers Go 1.24
// added around its FIPS code, "go:textfipsstart" and "go:textfipsend")
// get no FDE, as from the linker.
//
// For cfi: the image is a .debug_frame section whose addresses are the
// table's (link-time) addresses, pointer-sized in the table's byte order;
// CIE pointers are section offsets (0). cfi opens call-frame sections
// only from an ELF file (cfi.Open, cfi.OpenBytes); the tests wrap the
// image into a minimal ELF file (its header, the section, the section
// names) and open that with cfi.OpenBytes.
package gocfi

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/leb128"
)

// RuleKind is how a RegRule recovers its register.
type RuleKind uint8

const (
	SavedAt   RuleKind = iota // saved at CFA+Offset (DW_CFA_offset_extended_sf)
	SameValue                 // unchanged (DW_CFA_same_value)
	Undefined                 // not recoverable (DW_CFA_undefined)
)

// RegRule sets one register's rule from PC on, up to the function's end
// or the next RegRule for the register.
type RegRule struct {
	PC     uint64 // an address inside the function
	Reg    uint64 // DWARF register number
	Kind   RuleKind
	Offset int64 // SavedAt: from the CFA, a multiple of 4
}

// Extra returns a function's extra rules, sorted by PC; nil for none.
// DebugFrame calls it from several goroutines at once, each with its own
// buf (empty, its room reused from the call before) to append the rules
// to: their bytes are written before the goroutine's next call, so
// that a table of tens of thousands of functions does not allocate
// their rules one function at a time.
type Extra func(f *gopclntab.Func, buf []RegRule) []RegRule

// machine is what the linker's CIE and FDEs depend on: the DWARF numbers
// of the stack pointer and of the return-address column, and whether the
// return address is in a register (link register) or pushed by the call.
type machine struct {
	sp, ra uint64
	hasLR  bool
}

// Go's linker's choices (cmd/link/internal/*/l.go: dwarfRegSP, dwarfRegLR).
var machines = map[elf.Machine]machine{
	elf.EM_X86_64:    {sp: 7, ra: 16},
	elf.EM_386:       {sp: 4, ra: 8},
	elf.EM_AARCH64:   {sp: 31, ra: 30, hasLR: true},
	elf.EM_ARM:       {sp: 13, ra: 14, hasLR: true},
	elf.EM_S390:      {sp: 15, ra: 14, hasLR: true},
	elf.EM_PPC64:     {sp: 1, ra: 65, hasLR: true},
	elf.EM_RISCV:     {sp: 2, ra: 1, hasLR: true},
	elf.EM_LOONGARCH: {sp: 3, ra: 1, hasLR: true},
	elf.EM_MIPS:      {sp: 29, ra: 31, hasLR: true},
}

// DWARF call-frame instructions used here.
const (
	cfaAdvanceLoc     = 0x40
	cfaAdvanceLoc1    = 0x02
	cfaAdvanceLoc2    = 0x03
	cfaAdvanceLoc4    = 0x04
	cfaOffsetExtended = 0x05
	cfaUndefined      = 0x07
	cfaSameValue      = 0x08
	cfaDefCFA         = 0x0c
	cfaOffsetExtSF    = 0x11
	cfaDefCFAOffsetSF = 0x13
	cfaValOffset      = 0x14
)

const dataAlign = -4

// sizeFactor bounds the image by the table's size: a table whose
// functions share one long pcsp table (each row is at least two bytes of
// the table) could otherwise make an image quadratic in its size. Real
// images are a fifth of their table or less (Go's .debug_frame and
// .gopclntab).
const sizeFactor = 4

// FuncError is a function left out of the image: its pcsp table or its
// extra rules are malformed.
type FuncError struct {
	Index int
	Name  string
	Err   error
}

func (e *FuncError) Error() string {
	return fmt.Sprintf("gocfi: func %d (%s): %v", e.Index, e.Name, e.Err)
}

func (e *FuncError) Unwrap() error { return e.Err }

// DebugFrame builds the .debug_frame image of t's functions for machine m
// (the ELF header's), with extra's rules (extra may be nil). Functions
// without a pcsp table get no FDE; a function whose table or rules are
// malformed gets none either, and is reported (*FuncError, or the
// *gopclntab.Error of a record that does not read). The error is for a
// machine Go does not describe, or an image that would exceed four times
// the table's size (a hostile table).
//
// The functions are taken in runs of funcsPerPart on every CPU at once
// (each FDE points at the one CIE, at offset 0, so an FDE's bytes do not
// depend on where it lands), and the runs joined in table order: the
// image is the one a single pass writes. extra is called on those
// goroutines, so it must be safe for concurrent use; it is where a
// caller's work per function is (decoding its prologue, say), so that is
// spread over the CPUs too.
func DebugFrame(t *gopclntab.Table, m elf.Machine, extra Extra) ([]byte, []error, error) {
	mach, ok := machines[m]
	if !ok {
		return nil, nil, fmt.Errorf("gocfi: no Go call-frame rules for machine %v", m)
	}
	var order binary.AppendByteOrder = binary.LittleEndian
	if t.ByteOrder() == binary.BigEndian {
		order = binary.BigEndian
	}
	cie := &writer{order: order, ptr: t.PtrSize(), m: mach}
	cie.cie()
	parts := make([]part, (t.NumFuncs()+funcsPerPart-1)/funcsPerPart)
	b := builder{t: t, mach: mach, order: order, extra: extra, limit: int64(sizeFactor*t.Size() + 1<<16)}
	var wg sync.WaitGroup
	for range min(runtime.NumCPU(), len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.work(parts)
		}()
	}
	wg.Wait()
	if b.over.Load() {
		return nil, nil, fmt.Errorf("gocfi: the image passes %d bytes, %d times the table's size: its functions share pcsp tables as no linker makes them", b.limit, sizeFactor)
	}
	out := make([]byte, 0, len(cie.out)+int(b.total.Load()))
	out = append(out, cie.out...)
	var errs []error
	for _, p := range parts {
		out = append(out, p.out...)
		errs = append(errs, p.errs...)
	}
	return out, errs, nil
}

// funcsPerPart is how many functions one goroutine takes at a time:
// enough that taking them costs nothing, few enough that the largest
// functions (whose prologues the caller decodes) spread over the CPUs.
const funcsPerPart = 64

// part is the FDEs of one run of functions, and their errors.
type part struct {
	out  []byte
	errs []error
}

// builder hands out runs of functions to the goroutines of DebugFrame.
type builder struct {
	t     *gopclntab.Table
	mach  machine
	order binary.AppendByteOrder
	extra Extra
	limit int64
	next  atomic.Int64 // the next run to take
	total atomic.Int64 // bytes of FDEs written
	over  atomic.Bool  // total passed limit
}

// work builds runs of parts until none is left or the image is too big.
func (b *builder) work(parts []part) {
	w := &writer{order: b.order, ptr: b.t.PtrSize(), m: b.mach}
	// Room for a run's FDEs, at the fifth of the table real images take.
	room := b.t.Size()/5/max(b.t.NumFuncs(), 1)*funcsPerPart + 256
	var prog []byte
	var buf []RegRule
	for !b.over.Load() {
		c := int(b.next.Add(1) - 1)
		if c >= len(parts) {
			return
		}
		w.out = make([]byte, 0, room)
		var errs []error
		for i := c * funcsPerPart; i < min((c+1)*funcsPerPart, b.t.NumFuncs()); i++ {
			f, err := b.t.Func(i)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !f.HasPCSP() {
				continue
			}
			var rules []RegRule
			if b.extra != nil {
				rules = b.extra(&f, buf[:0])
				buf = rules
			}
			var end uint64
			n := len(w.out)
			prog, end, err = w.program(prog[:0], &f, rules)
			if err != nil {
				errs = append(errs, &FuncError{Index: f.Index, Name: f.Name, Err: err})
				continue
			}
			w.fde(f.Entry, end-f.Entry, prog)
			if b.total.Add(int64(len(w.out)-n)) > b.limit {
				b.over.Store(true)
				return
			}
		}
		parts[c] = part{out: w.out, errs: errs}
	}
}

type writer struct {
	out   []byte
	order binary.AppendByteOrder
	ptr   int
	m     machine
}

func (w *writer) u32(v uint32) { w.out = w.order.AppendUint32(w.out, v) }

func (w *writer) addr(v uint64) {
	if w.ptr == 4 {
		w.u32(uint32(v))
		return
	}
	w.out = w.order.AppendUint64(w.out, v)
}

// cie writes the CIE, padded as the linker pads it.
func (w *writer) cie() {
	reserve := 16
	if w.m.hasLR {
		reserve = 32
	}
	w.u32(uint32(reserve))
	w.u32(0xffffffff) // CIE id
	w.out = append(w.out, 3, 0, 1)
	w.out = leb128.AppendSleb(w.out, dataAlign)
	w.out = leb128.AppendUleb(w.out, w.m.ra)
	w.out = append(w.out, cfaDefCFA)
	w.out = leb128.AppendUleb(w.out, w.m.sp)
	if w.m.hasLR {
		w.out = leb128.AppendUleb(w.out, 0)
		w.out = append(w.out, cfaSameValue)
		w.out = leb128.AppendUleb(w.out, w.m.ra)
		w.out = append(w.out, cfaValOffset)
		w.out = leb128.AppendUleb(w.out, w.m.sp)
		w.out = leb128.AppendUleb(w.out, 0)
	} else {
		w.out = leb128.AppendUleb(w.out, uint64(w.ptr))
		w.out = append(w.out, cfaOffsetExtended)
		w.out = leb128.AppendUleb(w.out, w.m.ra)
		w.out = leb128.AppendUleb(w.out, uint64(int64(-w.ptr)/dataAlign))
	}
	for len(w.out) < 4+reserve {
		w.out = append(w.out, 0)
	}
}

// fde writes an FDE for [start, start+size) with program prog.
func (w *writer) fde(start, size uint64, prog []byte) {
	pad := (w.ptr - len(prog)%w.ptr) % w.ptr
	w.u32(uint32(4 + 2*w.ptr + len(prog) + pad))
	w.u32(0) // CIE pointer: the CIE at offset 0
	w.addr(start)
	w.addr(size)
	w.out = append(w.out, prog...)
	w.out = append(w.out, make([]byte, pad)...)
}

// program appends f's FDE program to b and returns it with the end of
// f's pcsp table.
func (w *writer) program(b []byte, f *gopclntab.Func, rules []RegRule) ([]byte, uint64, error) {
	top := w.m.hasLR && f.Flag&gopclntab.TopFrame != 0
	if top {
		b = append(b, cfaUndefined)
		b = leb128.AppendUleb(b, w.m.ra)
	}
	loc := f.Entry
	// extras writes the rules for PCs before pc (at pc too when at).
	extras := func(pc uint64, at bool) error {
		for ; len(rules) > 0 && (rules[0].PC < pc || at && rules[0].PC == pc); rules = rules[1:] {
			r := rules[0]
			if r.PC < loc {
				return fmt.Errorf("rule for register %d at %#x: before %#x (out of order or before the entry)", r.Reg, r.PC, loc)
			}
			if r.PC > loc {
				b = w.advance(b, r.PC-loc)
				loc = r.PC
			}
			var err error
			if b, err = appendRule(b, r); err != nil {
				return err
			}
		}
		return nil
	}
	end := f.Entry
	it := f.PCSP()
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		end = v.End
		if v.End == v.PC {
			continue // no PC has this row's value (Go's linker writes no such row)
		}
		if err := extras(v.PC, false); err != nil {
			return nil, 0, err
		}
		if v.PC > loc {
			b = w.advance(b, v.PC-loc)
			loc = v.PC
		}
		sp := int64(v.Value)
		if !w.m.hasLR {
			sp += int64(w.ptr) // the call pushed the return address
		}
		if w.m.hasLR && !top {
			if v.Value > 0 {
				b = append(b, cfaOffsetExtSF)
				b = leb128.AppendUleb(b, w.m.ra)
				b = leb128.AppendSleb(b, -sp/dataAlign)
			} else {
				b = append(b, cfaSameValue)
				b = leb128.AppendUleb(b, w.m.ra)
			}
		}
		b = append(b, cfaDefCFAOffsetSF)
		b = leb128.AppendSleb(b, sp/dataAlign)
		if err := extras(v.PC, true); err != nil {
			return nil, 0, err
		}
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	if end == f.Entry {
		return nil, 0, fmt.Errorf("empty pcsp table")
	}
	if err := extras(end, false); err != nil {
		return nil, 0, err
	}
	if len(rules) > 0 {
		return nil, 0, fmt.Errorf("rule for register %d at %#x: at or past the function's end %#x", rules[0].Reg, rules[0].PC, end)
	}
	// The linker's last advance: up to the byte before the end.
	b = w.advance(b, end-1-loc)
	return b, end, nil
}

// advance appends an advance of d bytes (AppendAdvance).
func (w *writer) advance(b []byte, d uint64) []byte { return AppendAdvance(b, w.order, d) }

// AppendAdvance appends to b a DW_CFA advance of d bytes, in the smallest
// form, as Go's linker does (it writes one even when d is 0).
func AppendAdvance(b []byte, order binary.AppendByteOrder, d uint64) []byte {
	switch {
	case d < 0x40:
		return append(b, cfaAdvanceLoc|byte(d))
	case d < 0x100:
		return append(b, cfaAdvanceLoc1, byte(d))
	case d < 0x10000:
		return order.AppendUint16(append(b, cfaAdvanceLoc2), uint16(d))
	default:
		return order.AppendUint32(append(b, cfaAdvanceLoc4), uint32(d))
	}
}

func appendRule(b []byte, r RegRule) ([]byte, error) {
	switch r.Kind {
	case SavedAt:
		if r.Offset%dataAlign != 0 {
			return nil, fmt.Errorf("rule for register %d at %#x: offset %d is not a multiple of 4", r.Reg, r.PC, r.Offset)
		}
		b = append(b, cfaOffsetExtSF)
		b = leb128.AppendUleb(b, r.Reg)
		return leb128.AppendSleb(b, r.Offset/dataAlign), nil
	case SameValue:
		return leb128.AppendUleb(append(b, cfaSameValue), r.Reg), nil
	case Undefined:
		return leb128.AppendUleb(append(b, cfaUndefined), r.Reg), nil
	}
	return nil, fmt.Errorf("rule for register %d at %#x: kind %d", r.Reg, r.PC, r.Kind)
}
