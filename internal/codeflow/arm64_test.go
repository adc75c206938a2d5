package codeflow

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

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

// assembleARM64 assembles one snippet (ARMv8.5-A, PAC and BTI in) as
// the function f, followed by a function g that returns, and gives the
// code with f and g as its entries (FromSymbol, each ending where its
// symbol's size says).
func assembleARM64(t *testing.T, src string) (c *Code, f, g Entry) {
	t.Helper()
	as := needTool(t, "aarch64-linux-gnu-as")
	dir := t.TempDir()
	s := filepath.Join(dir, "s.s")
	o := filepath.Join(dir, "s.o")
	text := ".text\n.globl f\n.type f, %function\nf:\n" + src + "\n.size f, .-f\n" +
		".globl g\n.type g, %function\ng:\n.Lg:\n\tret\n.size g, .-g\n"
	if err := os.WriteFile(s, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "-march=armv8.5-a", "-o", o, s).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
	ef, err := elf.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	c = &Code{Machine: ef.Machine, Order: ef.ByteOrder}
	for _, sec := range ef.Sections {
		if sec.Flags&elf.SHF_EXECINSTR == 0 || sec.Type != elf.SHT_PROGBITS {
			continue
		}
		d, err := sec.Data()
		if err != nil {
			t.Fatal(err)
		}
		c.Text = append(c.Text, Range{Addr: sec.Addr, Data: d})
	}
	syms, _ := ef.Symbols()
	for _, sym := range syms {
		e := Entry{Addr: sym.Value, End: sym.Value + sym.Size, Source: FromSymbol}
		switch sym.Name {
		case "f":
			f = e
		case "g":
			g = e
		}
	}
	if len(c.Text) != 1 || f.End == 0 || g.Addr != f.End {
		t.Fatalf("f %+v, g %+v in %d executable sections", f, g, len(c.Text))
	}
	c.Entries = []Entry{f, g}
	return c, f, g
}

// walkRows are the rows the walk from e had reached when it ended (well
// or not): for the rows before the instruction a function is left out
// at, which Analyze does not give. "-" where a state gives no row.
func walkRows(c *Code, e Entry) map[uint64]string {
	w := newWalk(c, newARM64(), frameRegs[elf.EM_AARCH64], e)
	w.run()
	rows := map[uint64]string{}
	for i := range w.recs {
		r, err := w.arch.rule(&w.recs[i].s)
		if err != nil {
			rows[w.recs[i].pc] = "-"
			continue
		}
		rows[w.recs[i].pc] = rowText(r)
	}
	return rows
}

// a64Snippet is a hand-written function f: its rows, one per
// instruction ("-" for one reached without a row, or not reached), or
// the reason it is left out and the rows up to where it was.
type a64Snippet struct {
	name   string
	asm    string
	rows   []string
	reason Reason
}

func runARM64Snippets(t *testing.T, tests []a64Snippet) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f, _ := assembleARM64(t, tt.asm)
			checkARM64Snippet(t, c, f, tt.rows, tt.reason)
		})
	}
}

// TestARM64Frames follows hand-written frames, with and without PAC,
// and compares each instruction's row.
func TestARM64Frames(t *testing.T) {
	runARM64Snippets(t, []a64Snippet{
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
	})
}

// TestARM64LeftOut: what the rows cannot say (a jump out with the
// frame, mixed PAC keys, x29 or LR lost, the CFA lost, paths that
// disagree) leaves a function out, with its reason; the rows before are
// checked as the walk had them. And where a path ends well (a trap).
func TestARM64LeftOut(t *testing.T) {
	runARM64Snippets(t, []a64Snippet{
		{
			name:   "jump out with the frame in place",
			asm:    "\tstp x29, x30, [sp, #-16]!\n\tb .Lg",
			rows:   []string{"sp+0 fp=r ra=r", "sp+16 fp@-16 ra@-8"},
			reason: ReasonReturn,
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
	})
}

// checkARM64Snippet runs Analyze on c and holds f's outcome to reason
// ("" for described) and its rows to rows: when f is left out, the rows
// the walk had reached (walkRows), else those of the Funcs covering f.
func checkARM64Snippet(t *testing.T, c *Code, f Entry, rows []string, reason Reason) {
	t.Helper()
	res := analyze(c)
	checkNoOverlap(t, res.funcs)
	var skip *Skip
	for i := range res.skips {
		if res.skips[i].Entry == f.Addr {
			skip = &res.skips[i]
		}
	}
	switch {
	case skip == nil && reason != "":
		t.Errorf("described, want it left out: %s", reason)
	case skip != nil && skip.Reason != reason:
		t.Errorf("left out: %s at %#x: %s; want %q", skip.Reason, skip.At, skip.Detail, reason)
	}
	got := walkRows(c, f)
	if skip == nil {
		got = map[uint64]string{}
		for pc := f.Addr; pc < f.End; pc += 4 {
			if r := res.rowAt(pc); r != nil {
				got[pc] = rowText(*r)
			}
		}
	} else if r := res.rowAt(f.Addr); r != nil {
		t.Errorf("left out, yet a Func covers it")
	}
	for i, want := range rows {
		pc := f.Addr + 4*uint64(i)
		g, ok := got[pc]
		if !ok {
			g = "-"
		}
		if g != want {
			t.Errorf("%#x: %s, want %s", pc, g, want)
		}
	}
	if reason == "" && len(rows) != int(f.End-f.Addr)/4 {
		t.Errorf("%d rows listed for %d instructions", len(rows), (f.End-f.Addr)/4)
	}
}
