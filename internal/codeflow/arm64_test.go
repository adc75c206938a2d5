package codeflow

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// testWalk is a stand-in for the walk (engine.go, Analyze), only for the
// tests of one instruction set: it follows every path of the function at
// entry, ending before end, one state per instruction, and gives the row
// of each instruction reached, or the first reason the function is left
// out. A path that leaves [entry, end) is a tail call.
func testWalk(a arch, c *Code, entry, end uint64) (map[uint64]Row, *failure) {
	type item struct {
		pc    uint64
		block []uint64
	}
	w := &walk{code: c}
	states := map[uint64]State{entry: a.entry()}
	rows := make(map[uint64]Row)
	work := []item{{pc: entry}}
	// reach records s at pc; a second, different state is a failure.
	reach := func(from, pc uint64, s State, block []uint64) *failure {
		if pc < entry || pc >= end {
			if !a.tail(&s) {
				return &failure{ReasonReturn, fmt.Sprintf("%#x leaves the function at %#x with its frame", from, pc)}
			}
			return nil
		}
		if old, ok := states[pc]; ok {
			if old != s {
				return &failure{ReasonStates, fmt.Sprintf("at %#x: %+v and %+v", pc, old, s)}
			}
			return nil
		}
		states[pc] = s
		work = append(work, item{pc, block})
		return nil
	}
	for len(work) > 0 {
		it := work[len(work)-1]
		work = work[:len(work)-1]
		s := states[it.pc]
		r, err := a.rule(&s)
		if err != nil {
			return rows, asFailure(err)
		}
		r.PC = it.pc
		rows[it.pc] = r
		b := codeAt(c, it.pc, 4)
		if b == nil {
			return rows, &failure{ReasonOutside, fmt.Sprintf("%#x", it.pc)}
		}
		w.block = it.block
		n, err := a.step(w, b, it.pc, &s)
		if err != nil {
			return rows, asFailure(err)
		}
		fall := it.pc + uint64(n.len)
		line := append(append([]uint64(nil), it.block...), it.pc)
		var f *failure
		switch n.flow {
		case flowNext:
			f = reach(it.pc, fall, s, line)
		case flowCall:
			if c.NoReturn == nil || !c.NoReturn(n.target) {
				f = reach(it.pc, fall, s, line)
			}
		case flowJump:
			f = reach(it.pc, n.target, s, nil)
		case flowBranch:
			if f = reach(it.pc, n.target, s, nil); f == nil {
				f = reach(it.pc, fall, s, nil)
			}
		case flowTable:
			for _, t := range n.targets {
				if t < entry || t >= end {
					f = &failure{ReasonIndirect, fmt.Sprintf("table target %#x outside", t)}
				} else if f == nil {
					f = reach(it.pc, t, s, nil)
				}
			}
		case flowIndirect:
			if !a.tail(&s) {
				f = &failure{ReasonIndirect, fmt.Sprintf("%#x", it.pc)}
			}
		case flowReturn:
			if !a.tail(&s) {
				f = &failure{ReasonReturn, fmt.Sprintf("%#x", it.pc)}
			}
		}
		if f != nil {
			return rows, f
		}
	}
	return rows, nil
}

func asFailure(err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	return &failure{"unexpected", err.Error()}
}

// rowText is a row in short: "sp+16 fp@-16 ra@-8 pacb".
func rowText(r Row) string {
	base := "sp"
	if r.Base == BaseFP {
		base = "fp"
	}
	where := func(name string, s Saved) string {
		switch s.Where {
		case InReg:
			return name + "=r"
		case OnStack:
			return fmt.Sprintf("%s@%d", name, s.Off)
		}
		return name + "=lost"
	}
	t := fmt.Sprintf("%s+%d %s %s", base, r.CFAOff, where("fp", r.FP), where("ra", r.RA))
	switch {
	case r.RASigned && r.BKey:
		t += " pacb"
	case r.RASigned:
		t += " paca"
	}
	return t
}

// needTool skips the test when a cross tool is missing.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}

// elfCode reads an AArch64 ELF file's executable sections and read-only
// data into a Code, and its function symbols.
func elfCode(t *testing.T, path string) (*Code, *elf.File, []elf.Symbol) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c := &Code{Machine: f.Machine, Order: f.ByteOrder}
	type sec struct {
		addr uint64
		data []byte
	}
	var ro []sec
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS {
			continue
		}
		d, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		if s.Flags&elf.SHF_EXECINSTR != 0 {
			c.Text = append(c.Text, Range{Addr: s.Addr, Data: d})
		}
		if s.Flags&elf.SHF_WRITE == 0 {
			ro = append(ro, sec{s.Addr, d})
		}
	}
	sort.Slice(c.Text, func(i, j int) bool { return c.Text[i].Addr < c.Text[j].Addr })
	c.Read = func(addr uint64, n int) []byte {
		for _, s := range ro {
			if addr >= s.addr && addr-s.addr+uint64(n) <= uint64(len(s.data)) {
				return s.data[addr-s.addr:][:n]
			}
		}
		return nil
	}
	syms, _ := f.Symbols()
	var funcs []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && s.Value != 0 {
			funcs = append(funcs, s)
		}
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].Value < funcs[j].Value })
	return c, f, funcs
}

// assemble assembles one snippet (ARMv8.5-A, PAC and BTI in) after the
// label f, followed by a function g, and gives the code and f's extent.
func assemble(t *testing.T, src string) (*Code, uint64, uint64) {
	t.Helper()
	as := needTool(t, "aarch64-linux-gnu-as")
	dir := t.TempDir()
	s := filepath.Join(dir, "s.s")
	o := filepath.Join(dir, "s.o")
	text := ".text\n.globl f\n.type f, %function\nf:\n" + src + "\n.globl g\n.type g, %function\ng:\n.Lg:\n\tret\n"
	if err := os.WriteFile(s, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "-march=armv8.5-a", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	c, _, _ := elfCode(t, o)
	f, err := elf.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	var start, end uint64
	for _, sym := range syms {
		switch sym.Name {
		case "f":
			start = sym.Value
		case "g":
			end = sym.Value
		}
	}
	return c, start, end
}

// TestARM64Snippets follows hand-written functions and compares each
// instruction's row, or the reason the function is left out.
func TestARM64Snippets(t *testing.T) {
	tests := []struct {
		name string
		asm  string
		// rows: one per instruction of f, "-" for one not reached; when
		// reason is set, only the rows before the failure are checked.
		rows   []string
		reason Reason
	}{
		{
			name: "frame record",
			asm: `	stp x29, x30, [sp, #-32]!
	mov x29, sp
	str x19, [sp, #16]
	bl g
	ldr x19, [sp, #16]
	ldp x29, x30, [sp], #32
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+32 fp@-32 ra@-24",
				"fp+32 fp@-32 ra@-24",
				"fp+32 fp@-32 ra@-24",
				"fp+32 fp@-32 ra@-24",
				"fp+32 fp@-32 ra@-24",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name: "leaf without frame",
			asm: `	sub sp, sp, #0x10, lsl #12
	sub sp, sp, #32
	add x0, sp, #8
	add sp, sp, #32
	add sp, sp, #0x10, lsl #12
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+65536 fp=r ra=r",
				"sp+65568 fp=r ra=r",
				"sp+65568 fp=r ra=r",
				"sp+65536 fp=r ra=r",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name: "str x30 frame",
			asm: `	str x30, [sp, #-16]!
	bl g
	ldr x30, [sp], #16
	ret`,
			rows: []string{"sp+0 fp=r ra=r", "sp+16 fp=r ra@-16", "sp+16 fp=r ra@-16", "sp+0 fp=r ra=r"},
		},
		{
			name: "signed offset save, frame pointer above locals",
			asm: `	sub sp, sp, #64
	stp x29, x30, [sp, #48]
	add x29, sp, #48
	bl g
	ldp x29, x30, [sp, #48]
	add sp, sp, #64
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+64 fp=r ra=r",
				"sp+64 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"sp+64 fp=r ra=r",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name: "shrink-wrapped",
			asm: `	cbz x0, 1f
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	bl g
	ldp x29, x30, [sp], #16
1:	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+0 fp=r ra=r",
				"sp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name: "tail call",
			asm: `	stp x29, x30, [sp, #-16]!
	mov x29, sp
	bl g
	ldp x29, x30, [sp], #16
	b .Lg`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name:   "jump out with the frame in place",
			asm:    "\tstp x29, x30, [sp, #-16]!\n\tb .Lg",
			rows:   []string{"sp+0 fp=r ra=r", "sp+16 fp@-16 ra@-8"},
			reason: ReasonReturn,
		},
		{
			name: "paciasp autiasp",
			asm: `	paciasp
	stp x29, x30, [sp, #-16]!
	mov x29, sp
	bl g
	ldp x29, x30, [sp], #16
	autiasp
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+0 fp=r ra=r paca",
				"sp+16 fp@-16 ra@-8 paca",
				"fp+16 fp@-16 ra@-8 paca",
				"fp+16 fp@-16 ra@-8 paca",
				"sp+0 fp=r ra=r paca",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name: "pacibsp autibsp",
			asm: `	pacibsp
	str x30, [sp, #-16]!
	bl g
	ldr x30, [sp], #16
	autibsp
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+0 fp=r ra=r pacb",
				"sp+16 fp=r ra@-16 pacb",
				"sp+16 fp=r ra@-16 pacb",
				"sp+0 fp=r ra=r pacb",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name: "retaa",
			asm: `	paciasp
	stp x29, x30, [sp, #-16]!
	bl g
	ldp x29, x30, [sp], #16
	retaa`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+0 fp=r ra=r paca",
				"sp+16 fp@-16 ra@-8 paca",
				"sp+16 fp@-16 ra@-8 paca",
				"sp+0 fp=r ra=r paca",
			},
		},
		{
			name: "pacia x30, sp and retab mismatch",
			asm: `	pacia x30, sp
	retab`,
			rows:   []string{"sp+0 fp=r ra=r", "sp+0 fp=r ra=r paca"},
			reason: ReasonPACKeys,
		},
		{
			name: "mixed keys on two paths",
			asm: `	cbz x0, 1f
	paciasp
	autiasp
	ret
1:	pacibsp
	autibsp
	ret`,
			reason: ReasonPACKeys,
		},
		{
			name:   "ret with LR signed",
			asm:    "\tpaciasp\n\tret",
			rows:   []string{"sp+0 fp=r ra=r", "sp+0 fp=r ra=r paca"},
			reason: ReasonPAC,
		},
		{
			name:   "signed with SP away from the CFA",
			asm:    "\tsub sp, sp, #16\n\tpaciasp\n\tret",
			rows:   []string{"sp+0 fp=r ra=r", "sp+16 fp=r ra=r"},
			reason: ReasonPAC,
		},
		{
			name:   "bl in a leaf without saving LR",
			asm:    "\tbl g\n\tret",
			rows:   []string{"sp+0 fp=r ra=r"},
			reason: ReasonRALost,
		},
		{
			name:   "x29 used without a save",
			asm:    "\tmov x29, sp\n\tret",
			rows:   []string{"sp+0 fp=r ra=r"},
			reason: ReasonFPLost,
		},
		{
			name: "alloca under a frame record",
			asm: `	stp x29, x30, [sp, #-16]!
	mov x29, sp
	sub sp, sp, x0
	bl g
	mov sp, x29
	ldp x29, x30, [sp], #16
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"fp+16 fp@-16 ra@-8",
				"sp+0 fp=r ra=r",
			},
		},
		{
			name:   "alloca without a frame record",
			asm:    "\tsub sp, sp, x0\n\tadd sp, sp, x0\n\tret",
			rows:   []string{"sp+0 fp=r ra=r"},
			reason: ReasonCFALost,
		},
		{
			name: "frame address in another register",
			asm: `	stp x29, x30, [sp, #-32]!
	mov x9, sp
	sub sp, sp, x0
	mov sp, x9
	ldp x29, x30, [sp], #32
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+32 fp@-32 ra@-24",
				"sp+32 fp@-32 ra@-24",
				"-", // SP unknown and no frame pointer: left out here
			},
			reason: ReasonCFALost,
		},
		{
			name: "two paths with different states",
			asm: `	cbz x0, 1f
	sub sp, sp, #16
1:	ret`,
			reason: ReasonStates,
		},
		{
			name: "saved slot overwritten",
			asm: `	stp x29, x30, [sp, #-16]!
	str x0, [sp, #8]
	ldp x29, x30, [sp], #16
	ret`,
			rows:   []string{"sp+0 fp=r ra=r", "sp+16 fp@-16 ra@-8"},
			reason: ReasonRALost,
		},
		{
			name: "pre-index write-back through x29",
			asm: `	stp x29, x30, [sp, #-48]!
	mov x29, sp
	add x9, x29, #48
	stp x19, x20, [x9, #-16]!
	str x30, [x9, #-8]
	ldp x29, x30, [sp], #48
	ret`,
			rows: []string{
				"sp+0 fp=r ra=r",
				"sp+48 fp@-48 ra@-40",
				"fp+48 fp@-48 ra@-40",
				"fp+48 fp@-48 ra@-40",
				"fp+48 fp@-48 ra@-40",
				"fp+48 fp@-48 ra@-40", // x30 stored at CFA-24: not over a slot, RA already saved
				"sp+0 fp=r ra=r",
			},
		},
		{
			name:   "ret through another register",
			asm:    "\tmov x3, x30\n\tret x3",
			rows:   []string{"sp+0 fp=r ra=r", "sp+0 fp=r ra=r"},
			reason: ReasonReturn,
		},
		{
			name: "trap ends a path",
			asm:  "\tcbz x0, 1f\n\tret\n1:\tbrk #1",
			rows: []string{"sp+0 fp=r ra=r", "sp+0 fp=r ra=r", "sp+0 fp=r ra=r"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, start, end := assemble(t, tt.asm)
			rows, f := testWalk(newARM64(), c, start, end)
			switch {
			case f == nil && tt.reason != "":
				t.Errorf("walked through, want %s", tt.reason)
			case f != nil && f.reason != tt.reason:
				t.Errorf("left out: %v, want %q", f, tt.reason)
			}
			for i, want := range tt.rows {
				pc := start + 4*uint64(i)
				got := "-"
				if r, ok := rows[pc]; ok {
					got = rowText(r)
				}
				if got != want {
					t.Errorf("%#x: %s, want %s", pc, got, want)
				}
			}
			if tt.reason == "" && len(tt.rows) != int(end-start)/4 {
				t.Errorf("%d rows listed for %d instructions", len(tt.rows), (end-start)/4)
			}
		})
	}
}

var _ = bytes.Equal
var _ = strings.Cut
