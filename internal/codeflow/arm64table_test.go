package codeflow

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// linkARM64 assembles f (src, then .size f) and a function g that
// returns, with rodata in .rodata, and links them (adrp needs it) into a
// static program: its code, read-only data and symbols (loadELF).
func linkARM64(t *testing.T, src, rodata string) *image {
	t.Helper()
	as := needTool(t, "aarch64-linux-gnu-as")
	ld := needTool(t, "aarch64-linux-gnu-ld")
	dir := t.TempDir()
	text := ".text\n.globl f\n.type f, %function\nf:\n" + src + "\n.size f, .-f\n" +
		".globl g\n.type g, %function\ng:\n\tret\n.size g, .-g\n" +
		".section .rodata\n" + rodata + "\n"
	s, o, out := filepath.Join(dir, "s.s"), filepath.Join(dir, "s.o"), filepath.Join(dir, "a.out")
	if err := os.WriteFile(s, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{as, "-march=armv8.5-a", "-o", o, s}, {ld, "-static", "-e", "f", "-o", out, o}} {
		if b, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s\n%s", cmd, err, b, text)
		}
	}
	return loadELF(t, out)
}

// The cases' common parts: the frame each target pops, GCC's table block
// after a check in the entry block (the index in w0), and targets.
const (
	a64Frame   = "\tstp x29, x30, [sp, #-16]!\n\tmov x29, sp\n"
	a64Targets = `c0:	mov w0, #1
	ldp x29, x30, [sp], #16
	ret
c1:	mov w0, #2
	ldp x29, x30, [sp], #16
	ret
c2:	bl g
	ldp x29, x30, [sp], #16
	ret
`
	a64GCCBlock = "tb:\n" + a64Frame + `	adrp x1, tab
	add x1, x1, :lo12:tab
	ldrb w1, [x1, w0, uxtw]
	adr x0, base
	add x1, x0, w1, sxtb #2
	br x1
base:
` + a64Targets
	// a64Bytes is a byte table of c0, c1, c2 from base; the entry after
	// it points past f, so that one entry too many is seen.
	a64Bytes = "tab:\t.byte (c0-base)/4, (c1-base)/4, (c2-base)/4\n\t.byte 0x7f, 0x7f"
)

// TestARM64Tables resolves the jump tables GCC and clang emit, whose
// bounds check is in the block before the table's, and leaves out what
// the check does not prove: an index changed after it, a path around it,
// a signed or reversed check, targets outside the function, one entry
// too many.
func TestARM64Tables(t *testing.T) {
	framed := "fp+16 fp@-16 ra@-8"
	all := map[string]string{"c0": framed, "c1": framed, "c2": framed, "def": "sp+0 fp=r ra=r"}
	tests := []struct {
		name, src, rodata string
		rows              map[string]string // label → its row when f is described
		reason            Reason            // "": described
		detail            string            // in the Skip's detail, when set
	}{{
		name:   "gcc: b.ls to the table's block",
		src:    "\tcmp w0, #2\n\tb.ls tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		rows:   all,
	}, {
		name:   "gcc: b.hi past it, falling into it",
		src:    "\tcmp w0, #2\n\tb.hi def\n" + a64GCCBlock + "def:\tmov w0, #0\n\tret\n",
		rodata: a64Bytes,
		rows:   all,
	}, {
		name:   "b.hs: three entries below 3",
		src:    "\tcmp w0, #3\n\tb.hs def\n" + a64GCCBlock + "def:\tmov w0, #0\n\tret\n",
		rodata: a64Bytes,
		rows:   all,
	}, {
		name:   "b.lo to the table's block",
		src:    "\tcmp w0, #3\n\tb.lo tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		rows:   all,
	}, {
		name: "clang: the index copied to a 64-bit register after the check",
		src: "\tcmp w0, #2\n\tb.hi def\n" + a64Frame + `	mov w8, w0
	adrp x9, tab
	mov w8, w8
	add x9, x9, :lo12:tab
	mov w0, wzr
	adr x10, base
	ldrb w11, [x9, x8]
	add x10, x10, x11, lsl #2
	br x10
base:
` + a64Targets + "def:\tmov w0, #0\n\tret\n",
		rodata: a64Bytes,
		rows:   all,
	}, {
		name: "64-bit check, word offsets from the table",
		src: "\tcmp x0, #2\n\tb.hi def\n" + a64Frame + `	adrp x2, tab
	add x2, x2, :lo12:tab
	ldrsw x1, [x2, x0, lsl #2]
	add x1, x2, x1
	br x1
` + a64Targets + "def:\tmov w0, #0\n\tret\n",
		rodata: "\t.balign 4\ntab:\t.word c0-tab, c1-tab, c2-tab, 0x7ffff",
		rows:   all,
	}, {
		name:   "one entry too many: b.ls of 3 reads the 0x7f entry",
		src:    "\tcmp w0, #3\n\tb.ls tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name: "32-bit check, 64-bit index",
		src: "\tcmp w0, #2\n\tb.hi def\n" + a64Frame + `	adrp x2, tab
	add x2, x2, :lo12:tab
	ldrsw x1, [x2, x0, lsl #2]
	add x1, x2, x1
	br x1
` + a64Targets + "def:\tmov w0, #0\n\tret\n",
		rodata: "\t.balign 4\ntab:\t.word c0-tab, c1-tab, c2-tab",
		reason: ReasonIndirect,
	}, {
		name:   "index changed after the check",
		src:    "\tcmp w0, #2\n\tb.ls tb0\ndef:\tmov w0, #0\n\tret\ntb0:\tadd w0, w0, #1\n" + a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name:   "another path bypasses the check",
		src:    "\tcbnz x1, tb\n\tcmp w0, #2\n\tb.ls tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name:   "a path around the check, reached after the checked one",
		src:    "\tcmp w0, #2\n\tb.ls tb\ndef:\tcbnz x1, tb\n\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
		detail: "bypassing the bounds check",
	}, {
		name:   "signed check (b.le)",
		src:    "\tcmp w0, #2\n\tb.le tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name:   "the check's other way (b.ls falls into the table)",
		src:    "\tcmp w0, #2\n\tb.ls def\n" + a64GCCBlock + "def:\tmov w0, #0\n\tret\n",
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name:   "another register checked",
		src:    "\tcmp w2, #2\n\tb.ls tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name:   "no check",
		src:    a64GCCBlock,
		rodata: a64Bytes,
		reason: ReasonIndirect,
	}, {
		name:   "a target outside the function",
		src:    "\tcmp w0, #2\n\tb.ls tb\ndef:\tmov w0, #0\n\tret\n" + a64GCCBlock,
		rodata: "tab:\t.byte (c0-base)/4, (c1-base)/4, (g-base)/4",
		reason: ReasonIndirect,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im := linkARM64(t, tt.src, tt.rodata)
			res := analyze(im.code)
			checkNoOverlap(t, res.funcs)
			f := im.syms["f"]
			var skip *Skip
			for i := range res.skips {
				if res.skips[i].Entry == f {
					skip = &res.skips[i]
				}
			}
			switch {
			case skip == nil && tt.reason != "":
				t.Fatalf("described, want it left out: %s", tt.reason)
			case skip != nil && skip.Reason != tt.reason:
				t.Fatalf("left out: %s at %#x: %s; want %q", skip.Reason, skip.At, skip.Detail, tt.reason)
			case skip != nil:
				t.Logf("left out at %#x: %s", skip.At, skip.Detail)
				if !strings.Contains(skip.Detail, tt.detail) {
					t.Errorf("left out: %s; want %q in it", skip.Detail, tt.detail)
				}
				if r := res.rowAt(f); r != nil {
					t.Errorf("left out, yet a Func covers it")
				}
				return
			}
			for label, want := range tt.rows {
				got := "none"
				if r := res.rowAt(im.syms[label]); r != nil {
					got = rowText(*r)
				}
				if got != want {
					t.Errorf("%s: %s, want %s", label, got, want)
				}
			}
		})
	}
}
