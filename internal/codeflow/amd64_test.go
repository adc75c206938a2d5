package codeflow

import (
	"slices"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// snippet is a test program: the rows expected at its labels ("none":
// no Func covers it), the reasons its functions are left out with, and
// the functions whose calls do not return.
type snippet struct {
	name     string
	src      string
	noreturn []string
	rows     map[string]string
	skips    map[string]Reason
	// refs are the labels the file references (Code.Refs); nil leaves
	// Code.Refs nil.
	refs []string
}

func runSnippets(t *testing.T, cases []snippet) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			im := assemble(t, tc.src)
			nr := map[uint64]bool{}
			for _, n := range tc.noreturn {
				nr[im.syms[n]] = true
			}
			im.code.NoReturn = func(a uint64) bool { return nr[a] }
			if tc.refs != nil {
				im.code.Refs = []uint64{}
				for _, l := range tc.refs {
					im.code.Refs = append(im.code.Refs, im.syms[l])
				}
				slices.Sort(im.code.Refs)
			}
			res := analyze(im.code)
			got := map[uint64]Reason{}
			for _, s := range res.skips {
				got[s.Entry] = s.Reason
			}
			for fn, want := range tc.skips {
				if r := got[im.syms[fn]]; r != want {
					t.Errorf("%s: left out with %q, want %q", fn, r, want)
				}
				delete(got, im.syms[fn])
			}
			for _, s := range res.skips {
				if _, extra := got[s.Entry]; extra {
					t.Errorf("unexpected skip %+v", s)
				}
			}
			for label, want := range tc.rows {
				a, ok := im.syms[label]
				if !ok {
					t.Fatalf("no label %s", label)
				}
				if g := short(res.rowAt(a)); g != want {
					t.Errorf("at %s (%#x): %s, want %s", label, a, g, want)
				}
			}
			checkNoOverlap(t, res.funcs)
		})
	}
}

func checkNoOverlap(t *testing.T, fs []Func) {
	t.Helper()
	for i := range fs {
		for j := i + 1; j < len(fs); j++ {
			if fs[i].Start < fs[j].End && fs[j].Start < fs[i].End {
				t.Errorf("Funcs overlap: [%#x,%#x) and [%#x,%#x)", fs[i].Start, fs[i].End, fs[j].Start, fs[j].End)
			}
		}
		if len(fs[i].Rows) == 0 || fs[i].Rows[0].PC != fs[i].Start {
			t.Errorf("Func at %#x: first row not at its start", fs[i].Start)
		}
	}
}

func TestAMD64Frames(t *testing.T) {
	runSnippets(t, []snippet{{
		name: "frame pointer",
		src: `fn f
			a0: push %rbp
			a1: mov %rsp,%rbp
			a2: sub $16,%rsp
			call g
			a3: leave
			a4: ret
			fn g
			ret`,
		rows: map[string]string{"a0": "sp+8", "a1": "sp+16 fp@-16", "a2": "fp+16 fp@-16", "a3": "fp+16 fp@-16", "a4": "sp+8"},
	}, {
		name: "no frame pointer",
		src: `fn f
			push %rbx
			a1: sub $24,%rsp
			a2: call *%rax
			add $24,%rsp
			a3: pop %rbx
			a4: ret`,
		rows: map[string]string{"a1": "sp+16", "a2": "sp+40", "a3": "sp+16", "a4": "sp+8"},
	}, {
		name: "several epilogues",
		src: `fn f
			push %rbx
			test %edi,%edi
			je 1f
			pop %rbx
			a1: ret
			1: a2: mov %esi,%eax
			pop %rbx
			a3: ret`,
		rows: map[string]string{"a1": "sp+8", "a2": "sp+16", "a3": "sp+8"},
	}, {
		name: "shrink-wrapped prologue",
		src: `fn f
			test %edi,%edi
			je out
			push %rbp
			a1: mov %rsp,%rbp
			a2: call g
			pop %rbp
			out: ret
			fn g
			ret`,
		rows: map[string]string{"a1": "sp+16 fp@-16", "a2": "fp+16 fp@-16", "out": "sp+8"},
	}, {
		name: "enter and leave",
		src: `fn f
			enter $32,$0
			a1: mov %rdi,-8(%rbp)
			a2: leave
			a3: ret`,
		rows: map[string]string{"a1": "fp+16 fp@-16", "a2": "fp+16 fp@-16", "a3": "sp+8"},
	}, {
		name: "alloca under the frame pointer",
		src: `fn f
			push %rbp
			mov %rsp,%rbp
			push %rbx
			sub %rdi,%rsp
			a1: push %rax
			a2: mov %rsp,%rdi
			lea -8(%rbp),%rsp
			a5: pop %rbx
			a3: pop %rbp
			a4: ret`,
		rows: map[string]string{"a1": "fp+16 fp@-16", "a2": "fp+16 fp@-16", "a3": "fp+16 fp@-16", "a4": "sp+8", "a5": "fp+16 fp@-16"},
	}, {
		name: "realigned under the frame pointer",
		src: `fn f
			push %rbp
			mov %rsp,%rbp
			and $-64,%rsp
			a1: sub $128,%rsp
			a2: mov %rbp,%rsp
			a3: pop %rbp
			a4: ret`,
		rows: map[string]string{"a1": "fp+16 fp@-16", "a2": "fp+16 fp@-16", "a3": "fp+16 fp@-16", "a4": "sp+8"},
	}, {
		name: "realigned without a frame pointer",
		src: `fn f
			push %rbx
			mov %rsp,%rbx
			and $-64,%rsp
			mov %rbx,%rsp
			pop %rbx
			ret`,
		skips: map[string]Reason{"f": ReasonCFALost},
	}})
}

// TestAMD64Slots: rbp and the return address, and registers holding
// frame addresses.
func TestAMD64Slots(t *testing.T) {
	runSnippets(t, []snippet{{
		name: "rbp as a general register",
		src: `fn f
			push %rbp
			a1: mov %rdi,%rbp
			a2: call g
			pop %rbp
			a3: ret
			fn g
			ret`,
		rows: map[string]string{"a1": "sp+16 fp@-16", "a2": "sp+16 fp@-16", "a3": "sp+8"},
	}, {
		name: "rbp overwritten unsaved",
		src: `fn f
			mov %rdi,%rbp
			ret`,
		skips: map[string]Reason{"f": ReasonFPLost},
	}, {
		name: "return address overwritten",
		src: `fn f
			push %rbx
			movq $0,8(%rsp)
			pop %rbx
			ret`,
		skips: map[string]Reason{"f": ReasonRALost},
	}, {
		name: "return with a frame",
		src: `fn f
			push %rbx
			ret`,
		skips: map[string]Reason{"f": ReasonReturn},
	}, {
		name: "endbr64 and pushes of other sizes",
		src: `fn f
			endbr64
			a1: pushw $1
			a2: pushq $2
			a3: pushfq
			a4: popfq
			add $10,%rsp
			a5: ret`,
		rows: map[string]string{"a1": "sp+8", "a2": "sp+10", "a3": "sp+18", "a4": "sp+26", "a5": "sp+8"},
	}, {
		name: "frame address through another register",
		src: `fn f
			push %rbx
			mov %rsp,%rbx
			sub %rdi,%rsp
			lea 0(%rbx),%rsp
			a1: pop %rbx
			a2: ret`,
		skips: map[string]Reason{"f": ReasonCFALost},
	}, {
		name: "frame address kept across a copy",
		src: `fn f
			push %r12
			mov %rsp,%r12
			sub $64,%rsp
			a1: lea 0(%r12),%rsp
			a2: pop %r12
			a3: ret`,
		rows: map[string]string{"a1": "sp+80", "a2": "sp+16", "a3": "sp+8"},
	}, {
		// OpenBLAS's kernels: callee-saved registers moved below a sub,
		// rbp then a loop's general register.
		name: "rbp saved and restored with movs",
		src: `fn f
			sub $0x60,%rsp
			mov %rbx,(%rsp)
			a1: mov %rbp,8(%rsp)
			a2: xor %ebp,%ebp
			1: a3: add $1,%rbp
			cmp %rdi,%rbp
			jne 1b
			mov (%rsp),%rbx
			a4: mov 8(%rsp),%rbp
			a5: add $0x60,%rsp
			a6: ret`,
		rows: map[string]string{"a1": "sp+104", "a2": "sp+104 fp@-96", "a3": "sp+104 fp@-96",
			"a4": "sp+104 fp@-96", "a5": "sp+104", "a6": "sp+8"},
	}, {
		name: "a pushed rbp restored with a mov",
		src: `fn f
			push %rbp
			mov %rdi,%rbp
			a1: mov (%rsp),%rbp
			a2: add $8,%rsp
			a3: ret`,
		rows: map[string]string{"a1": "sp+16 fp@-16", "a2": "sp+16", "a3": "sp+8"},
	}, {
		name: "rbp moved elsewhere than the frame",
		src: `fn f
			mov %rbp,(%rdi)
			xor %ebp,%ebp
			ret`,
		skips: map[string]Reason{"f": ReasonFPLost},
	}, {
		name: "a mov-saved rbp's slot overwritten",
		src: `fn f
			sub $16,%rsp
			mov %rbp,8(%rsp)
			xor %ebp,%ebp
			movq $0,8(%rsp)
			add $16,%rsp
			ret`,
		skips: map[string]Reason{"f": ReasonFPLost},
	}, {
		name: "rbp reloaded from another slot",
		src: `fn f
			sub $16,%rsp
			mov %rbp,8(%rsp)
			mov (%rsp),%rbp
			add $16,%rsp
			ret`,
		skips: map[string]Reason{"f": ReasonReturn},
	}, {
		name: "a 32-bit store of ebp is no save",
		src: `fn f
			sub $16,%rsp
			mov %ebp,8(%rsp)
			xor %ebp,%ebp
			add $16,%rsp
			ret`,
		skips: map[string]Reason{"f": ReasonFPLost},
	}})
}

func TestAMD64Tables(t *testing.T) {
	cases := []snippet{{
		name: "PIC table",
		src: `fn f
			push %rbx
			cmp $2,%edi
			ja def
			mov %edi,%edi
			lea tab(%rip),%rdx
			movslq (%rdx,%rdi,4),%rax
			add %rdx,%rax
			jmp *%rax
			c0: pop %rbx
			ret
			c1: mov $1,%eax
			pop %rbx
			ret
			c2: mov $2,%eax
			jmp def
			def: pop %rbx
			ret
			.section .rodata
			tab: .long c0-tab, c1-tab, c2-tab`,
		rows: map[string]string{"c0": "sp+16", "c1": "sp+16", "c2": "sp+16", "def": "sp+16"},
	}, {
		name: "PIC table, add reversed, index copied",
		src: `fn f
			push %rbx
			cmp $1,%edi
			jae def
			mov %edi,%eax
			lea tab(%rip),%rcx
			movslq (%rcx,%rax,4),%rax
			add %rax,%rcx
			jmp *%rcx
			c0: pop %rbx
			ret
			def: pop %rbx
			ret
			.section .rodata
			tab: .long c0-tab`,
		rows: map[string]string{"c0": "sp+16", "def": "sp+16"},
	}, {
		name: "absolute table",
		src: `fn f
			push %rbx
			cmp $1,%rdi
			ja def
			jmp *tab(,%rdi,8)
			c0: pop %rbx
			ret
			c1: pop %rbx
			ret
			def: pop %rbx
			ret
			.section .rodata
			tab: .quad c0, c1`,
		rows: map[string]string{"c0": "sp+16", "c1": "sp+16", "def": "sp+16"},
	}, {
		name: "no bounds check",
		src: `fn f
			push %rbx
			jmp *tab(,%rdi,8)
			c0: pop %rbx
			ret
			.section .rodata
			tab: .quad c0`,
		skips: map[string]Reason{"f": ReasonIndirect},
	}, {
		name: "bounds check bypassed",
		src: `fn f
			push %rbx
			test %esi,%esi
			jne in
			cmp $1,%rdi
			ja def
			in: jmp *tab(,%rdi,8)
			c0: pop %rbx
			ret
			def: pop %rbx
			ret
			.section .rodata
			tab: .quad c0, c0`,
		skips: map[string]Reason{"f": ReasonIndirect},
	}, {
		name: "index changed after the check",
		src: `fn f
			push %rbx
			cmp $1,%rdi
			ja def
			add $5,%rdi
			jmp *tab(,%rdi,8)
			c0: pop %rbx
			ret
			def: pop %rbx
			ret
			.section .rodata
			tab: .quad c0, c0`,
		skips: map[string]Reason{"f": ReasonIndirect},
	}, {
		name: "unresolved jump with a frame",
		src: `fn f
			push %rbx
			jmp *%rax
			pop %rbx
			ret`,
		skips: map[string]Reason{"f": ReasonIndirect},
	}, {
		name: "indirect tail call",
		src: `fn f
			push %rbx
			pop %rbx
			a1: jmp *%rax`,
		rows: map[string]string{"a1": "sp+8"},
	}}
	runSnippets(t, cases)
}

// TestGPRBytes: every byte register x86asm names maps to its 64-bit
// register (x86asm has 20 byte names for 16 registers: a crash in libc).
func TestGPRBytes(t *testing.T) {
	for _, tc := range []struct {
		r    x86asm.Reg
		want int
	}{{x86asm.AL, amdRAX}, {x86asm.BH, amdRBX}, {x86asm.SPB, amdRSP}, {x86asm.BPB, amdRBP}, {x86asm.DIB, amdRDI}, {x86asm.R8B, amdR8}, {x86asm.R15B, 15}} {
		if n, w, ok := gpr(tc.r); !ok || w != 8 || n != tc.want {
			t.Errorf("%v: %d (%d bits, %v), want %d", tc.r, n, w, ok, tc.want)
		}
	}
}
