package codeflow

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
)

// testWalk is a stand-in for the walk (engine.go, Analyze), only for the
// tests of one instruction set: it follows every path of the function at
// entry, ending before end, one state per instruction, and gives the row
// of each instruction reached, or the first reason the function is left
// out. A path that leaves [entry, end) is a tail call.
// testTables counts the jump tables testWalk followed (resolved by step).
var testTables int

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
			j, ok := testJoin(old, s)
			if !ok {
				return &failure{ReasonStates, fmt.Sprintf("at %#x: %s and %s", pc, stateText(old), stateText(s))}
			}
			if j != old { // a register forgotten: follow the path again
				states[pc] = j
				work = append(work, item{pc, nil})
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
			testTables++
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

// testJoin is the state two paths leave at one instruction: a general
// register other than SP and x29 that holds different frame addresses
// holds none the rows need, so it becomes unknown; any other difference
// fails (ReasonStates). The engine may do the same.
func testJoin(a, b State) (State, bool) {
	for r := range a.Regs {
		if r != a64SP && r != a64FP && a.Regs[r] != b.Regs[r] {
			a.Regs[r], b.Regs[r] = Val{}, Val{}
		}
	}
	return a, a == b
}

func asFailure(err error) *failure {
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	return &failure{"unexpected", err.Error()}
}

// stateText is what a state knows: the frame addresses, x29, LR.
func stateText(s State) string {
	var b strings.Builder
	for r, v := range s.Regs {
		if v.Known {
			fmt.Fprintf(&b, "r%d=cfa%+d ", r, v.Off)
		}
	}
	fmt.Fprintf(&b, "fp %+v ra %+v signed %v", s.FP, s.RA, s.RASigned)
	return b.String()
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

// cfiSource is compiled at each level and compared with its CFI: frames
// of all sizes, alloca, switches (jump tables), calls that do not
// return, tail calls, recursion, varargs.
const cfiSource = `
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
extern int ext(int);
__attribute__((noinline)) int leaf(int a, int b) { return a * b + 3; }
__attribute__((noinline)) int big(int n) {
	volatile char buf[70000];
	buf[n] = 1;
	return buf[n / 2] + ext(n);
}
__attribute__((noinline)) int vla(int n) {
	char *p = __builtin_alloca(n);
	memset(p, 1, n);
	return ext(p[n / 2]);
}
__attribute__((noinline)) int sw(int x) {
	switch (x) {
	case 0: return ext(1);
	case 1: return ext(7) + 2;
	case 2: return ext(3) + 1;
	case 3: return ext(9) * 2;
	case 4: return ext(11);
	case 5: return ext(x + 3) - 1;
	case 6: return ext(13) - 4;
	case 8: return ext(x) + ext(x);
	case 9: return ext(99) ^ 3;
	case 10: return ext(1) * 7;
	case 7: return 5;
	}
	return 0;
}
__attribute__((noinline)) int sw2(unsigned x, int y) {
	switch (x) {
	case 0: y += ext(2); break;
	case 1: y -= ext(3); break;
	case 2: y *= ext(4); break;
	case 3: y ^= ext(5); break;
	case 4: y |= ext(6); break;
	case 5: y &= ext(7); break;
	case 6: y += 9; break;
	case 7: y = ext(y); break;
	case 8: y = ext(y + 1); break;
	case 9: return 0;
	default: abort();
	}
	return y + 1;
}
__attribute__((noinline)) int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__attribute__((noinline)) int sum(int n, ...) {
	va_list ap;
	int s = 0;
	va_start(ap, n);
	for (int i = 0; i < n; i++) s += va_arg(ap, int);
	va_end(ap);
	return s;
}
__attribute__((noinline)) int tail(int n) { return ext(n + 1); }
__attribute__((noinline)) int check(int n) {
	if (n < 0) abort();
	if (n > 100) exit(2);
	return ext(n) + leaf(n, n);
}
__attribute__((noinline)) int loop(int *v, int n) {
	int s = 0;
	for (int i = 0; i < n; i++) s += ext(v[i]) ? leaf(v[i], i) : 0;
	return s;
}
__attribute__((noipa)) int ext(int x) { return x + 1; }
int main(int argc, char **argv) {
	int v[4] = {argc, 2, 3, 4};
	return big(argc) + vla(argc + 8) + sw(argc) + sw2(argc, 3) + fact(argc) +
	       sum(3, 1, 2, argc) + tail(argc) + check(argc) + loop(v, 4);
}
`

// pltNoReturn says which PLT stubs of an AArch64 executable call
// functions that do not return: .plt's 32-byte header, then one 16-byte
// stub per .rela.plt entry, in its order.
func pltNoReturn(t *testing.T, f *elf.File) func(uint64) bool {
	plt, rela := f.Section(".plt"), f.Section(".rela.plt")
	dyn, _ := f.DynamicSymbols()
	if plt == nil || rela == nil {
		return func(uint64) bool { return false }
	}
	d, err := rela.Data()
	if err != nil {
		t.Fatal(err)
	}
	stops := make(map[uint64]bool)
	for i := 0; i+24 <= len(d); i += 24 {
		sym := f.ByteOrder.Uint64(d[i+8:]) >> 32
		if sym == 0 || int(sym) > len(dyn) {
			continue
		}
		switch dyn[sym-1].Name {
		case "abort", "exit", "_exit", "__stack_chk_fail", "__assert_fail", "__libc_start_main":
			stops[plt.Addr+32+uint64(i/24)*16] = true
		}
	}
	return func(addr uint64) bool { return stops[addr] }
}

// cfiCompare is how one build's rows compare with its CFI.
type cfiCompare struct {
	pcs, covered, wrong int
	early               int // covered where the walk has x29 or LR back in its register, the CFI still at its slot
	reasons             map[Reason]int
	funcs, left         int
}

// compareCFI walks each function symbol of path that has an FDE and
// compares its rows with the FDE's at every PC.
func compareCFI(t *testing.T, path string, only map[string]bool) cfiCompare {
	c, f, funcs := elfCode(t, path)
	c.NoReturn = pltNoReturn(t, f)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := cfi.OpenBytes(img)
	if err != nil {
		t.Fatal(err)
	}
	entries := cf.Entries()
	cfi.SortEntries(entries)
	ctx := cf.Context(entries)
	byStart := make(map[uint64]elf.Symbol)
	for _, s := range funcs {
		if only[s.Name] {
			byStart[s.Value] = s
		}
	}
	res := cfiCompare{reasons: make(map[Reason]int)}
	for {
		fde, err := ctx.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		sym, ok := byStart[fde.Start]
		if !ok {
			continue
		}
		tab := ctx.Table()
		if tab == nil {
			continue
		}
		bkey := fde.CIE.BKey
		res.funcs++
		rows, fail := testWalk(newARM64(), c, fde.Start, fde.End())
		res.pcs += int(fde.Size / 4)
		if fail != nil {
			res.left++
			res.reasons[fail.reason]++
			t.Logf("%s: %s left out: %s: %s", filepath.Base(path), sym.Name, fail.reason, fail.detail)
			continue
		}
		slots := make(map[Saved]bool)
		for _, r := range rows {
			slots[r.FP], slots[r.RA] = true, true
		}
		for pc := fde.Start; pc < fde.End(); pc += 4 {
			r, ok := rows[pc]
			if !ok {
				continue
			}
			i := tab.RowAt(pc)
			if i < 0 {
				continue
			}
			if restoredEarly(slots, r, &tab.Rows[i], bkey) {
				res.early++
				res.covered++
				continue
			}
			if why := judgeRow(r, &tab.Rows[i], bkey); why != "" {
				res.wrong++
				t.Errorf("%s: %s %#x: %s: %s", filepath.Base(path), sym.Name, pc, rowText(r), why)
				continue
			}
			res.covered++
		}
	}
	return res
}

// restoredEarly says the walk has x29 or LR back in its register at r,
// where the CFI still has it at a slot the walk saw it saved to (GCC
// moves the rule at the last restore, or not before the return): both
// hold. The rest of r is judged as usual.
func restoredEarly(slots map[Saved]bool, r Row, c *cfi.Row, bkey bool) bool {
	back := func(s *Saved, rule cfi.Rule) bool {
		saved := Saved{Where: OnStack, Off: rule.Offset}
		if s.Where != InReg || rule.Kind != cfi.Offset || !slots[saved] {
			return false
		}
		*s = saved
		return true
	}
	fp := back(&r.FP, c.Rule(a64FP))
	ra := back(&r.RA, c.Rule(a64LR))
	return (fp || ra) && judgeRow(r, c, bkey) == ""
}

// judgeRow says how r differs from the CFI's row c ("" when it does not):
// the CFA (a different base judged by what r knew of that register),
// where x29 and LR are, the signing state and key.
func judgeRow(r Row, c *cfi.Row, bkey bool) string {
	if c.CFA.Kind != cfi.CFARegOffset {
		return "CFI CFA is an expression"
	}
	var known Val
	switch c.CFA.Reg {
	case a64SP:
		known = r.SP
	case a64FP:
		known = r.FPVal
	default:
		return fmt.Sprintf("CFI CFA from r%d", c.CFA.Reg)
	}
	if !known.Known || -known.Off != c.CFA.Offset {
		return fmt.Sprintf("CFI CFA r%d%+d, the walk knew that register as %+v", c.CFA.Reg, c.CFA.Offset, known)
	}
	same := func(s Saved, rule cfi.Rule) bool {
		switch rule.Kind {
		case cfi.SameValue:
			return s.Where == InReg
		case cfi.Offset:
			return s.Where == OnStack && s.Off == rule.Offset
		}
		return false
	}
	if !same(r.FP, c.Rule(a64FP)) {
		return fmt.Sprintf("CFI x29 rule %+v", c.Rule(a64FP))
	}
	if !same(r.RA, c.Rule(a64LR)) {
		return fmt.Sprintf("CFI x30 rule %+v", c.Rule(a64LR))
	}
	if r.RASigned != c.MangledRA || r.RASigned && r.BKey != bkey {
		return fmt.Sprintf("CFI signed %v (B key %v)", c.MangledRA, bkey)
	}
	return ""
}

// TestARM64AgainstGCC compiles cfiSource with aarch64-linux-gnu-gcc at
// each level, with and without frame pointers and with both PAC keys,
// and holds every row the walk gives to the CFI GCC wrote: none may
// differ. Coverage and the reasons for what is left out are logged.
func TestARM64AgainstGCC(t *testing.T) {
	gcc := needTool(t, "aarch64-linux-gnu-gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "t.c")
	if err := os.WriteFile(src, []byte(cfiSource), 0o644); err != nil {
		t.Fatal(err)
	}
	only := map[string]bool{}
	for _, n := range []string{"leaf", "big", "vla", "sw", "sw2", "fact", "sum", "tail", "check", "loop", "ext", "main"} {
		only[n] = true
	}
	total := cfiCompare{reasons: make(map[Reason]int)}
	tables := testTables
	for _, opt := range []string{"-O0", "-O2", "-O3", "-Os"} {
		for _, fp := range []string{"-fno-omit-frame-pointer", "-fomit-frame-pointer"} {
			for _, pac := range []string{"", "-mbranch-protection=pac-ret", "-mbranch-protection=pac-ret+b-key"} {
				name := strings.Join(strings.Fields(opt+" "+fp+" "+pac), "_")
				out := filepath.Join(dir, name)
				args := []string{opt, fp, "-fasynchronous-unwind-tables", "-o", out, src}
				if pac != "" {
					args = append(args, pac)
				}
				if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
					t.Fatalf("gcc %v: %v\n%s", args, err, b)
				}
				r := compareCFI(t, out, only)
				t.Logf("%s: %d functions, %d left out; %d of %d PCs match the CFI (%d restored a load early), %d wrong", name, r.funcs, r.left, r.covered, r.pcs, r.early, r.wrong)
				total.pcs += r.pcs
				total.covered += r.covered
				total.wrong += r.wrong
				total.funcs += r.funcs
				total.left += r.left
				for k, v := range r.reasons {
					total.reasons[k] += v
				}
			}
		}
	}
	t.Logf("all: %d functions, %d left out %v; %d of %d PCs (%.1f%%) match, %d wrong",
		total.funcs, total.left, total.reasons, total.covered, total.pcs, 100*float64(total.covered)/float64(max(total.pcs, 1)), total.wrong)
	t.Logf("jump tables followed: %d", testTables-tables)
	if total.covered == 0 {
		t.Error("no row matched: the comparison compares nothing")
	}
}
