package codeflow

import "testing"

// TestPaddingJoin: padding between two runs of one walk's code is joined
// into one Func, with the row of the instruction after it, only when no
// path runs it and no return address points at it.
func TestPaddingJoin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src      string
		noreturn []string
		funcs    int    // Funcs of f
		pad      string // the row at the padding's first byte (label p1)
	}{{
		name: "nops and int3 after a return",
		src: `fn f
			push %rbx
			test %edi,%edi
			jne 2f
			pop %rbx
			ret
			p1: .nops 6
			int3
			2: pop %rbx
			ret`,
		funcs: 1, pad: "sp+16",
	}, {
		name: "nops after a jump",
		src: `fn f
			sub $24,%rsp
			test %edi,%edi
			je 2f
			jmp 3f
			p1: .nops 9
			2: add $24,%rsp
			ret
			3: add $24,%rsp
			ret`,
		funcs: 1, pad: "sp+32",
	}, {
		name: "nops after a call that does not return: a return address",
		src: `fn f
			push %rbx
			test %edi,%edi
			jne 2f
			call die
			p1: .nops 5
			2: pop %rbx
			ret
			fn die
			hlt`,
		noreturn: []string{"die"},
		funcs:    2, pad: "none",
	}, {
		name: "not only padding between",
		src: `fn f
			push %rbx
			test %edi,%edi
			jne 2f
			pop %rbx
			ret
			p1: .nops 3
			ud2
			2: pop %rbx
			ret`,
		funcs: 2, pad: "none",
	}, {
		name: "more padding than an alignment",
		src: `fn f
			push %rbx
			test %edi,%edi
			jne 2f
			pop %rbx
			ret
			p1: .nops 80
			2: pop %rbx
			ret`,
		funcs: 2, pad: "none",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			im := assemble(t, tc.src)
			nr := map[uint64]bool{}
			for _, n := range tc.noreturn {
				nr[im.syms[n]] = true
			}
			im.code.NoReturn = func(a uint64) bool { return nr[a] }
			res := analyze(im.code)
			if len(res.skips) > 0 {
				t.Fatalf("skips: %+v", res.skips)
			}
			n := 0
			for _, f := range res.funcs {
				if f.Entry == im.syms["f"] {
					n++
				}
			}
			if n != tc.funcs {
				t.Errorf("f gives %d Funcs, want %d: %+v", n, tc.funcs, res.funcs)
			}
			if g := short(res.rowAt(im.syms["p1"])); g != tc.pad {
				t.Errorf("row at the padding: %s, want %s", g, tc.pad)
			}
			checkNoOverlap(t, res.funcs)
		})
	}
}

// TestCheckRulesPadding: padding between two runs of one function, joined
// into its Func with the next instruction's row, is no way into that
// instruction for the rule check (gcc's deregister_tm_clones: the CFA from
// rbp in the padding, from rsp on the paths that run).
func TestCheckRulesPadding(t *testing.T) {
	im := assemble(t, `fn f
		push %rbp
		mov %rsp, %rbp
		cmp $1, %rdi
		jbe 1f
		pop %rbp
		jmp *%rax
		.p2align 4
		1: pop %rbp
		ret`)
	r := analyze(im.code)
	if len(r.skips) > 0 || len(r.funcs) != 1 {
		t.Fatalf("funcs %v, skips %v: want one Func", r.funcs, r.skips)
	}
	fn := r.funcs[0]
	probs := CheckRules(im.code, fn.Start, fn.End, func(pc uint64) (Row, bool) {
		if row := r.rowAt(pc); row != nil {
			return *row, true
		}
		return Row{}, false
	})
	if len(probs) > 0 {
		t.Errorf("rule check: %v", probs)
	}
}
