package codeflow

import (
	"debug/elf"
	"testing"
)

func TestEngine(t *testing.T) {
	runSnippets(t, []snippet{{
		name: "two paths, two frames",
		src: `fn f
			test %edi,%edi
			je 1f
			push %rbx
			1: ret`,
		skips: map[string]Reason{"f": ReasonStates},
	}, {
		name: "tail call to another function",
		src: `fn f
			push %rbx
			a1: pop %rbx
			jmp g
			fn g
			g1: push %rbp
			pop %rbp
			ret`,
		rows: map[string]string{"a1": "sp+16", "g1": "sp+8"},
	}, {
		name: "tail call to code without an entry",
		src: `fn f
			push %rbx
			a1: pop %rbx
			jmp helper
			endfn
			helper: h1: ret
			fn g
			push %rbx
			pop %rbx
			jmp helper`,
		// helper, tail-called by both, becomes an entry of its own
		// (FromTailCall), walked in a second round.
		rows: map[string]string{"a1": "sp+16", "h1": "sp+8"},
	}, {
		// dav1d's assembly: f jumps, frame gone, into a body g runs
		// into. The body becomes an entry (FromTailCall) after g was
		// walked; walked again, g stops there.
		name: "a tail-called body another function runs into",
		src: `fn f
			mov $1,%eax
			jmp body
			fn g
			g1: mov $2,%eax
			body: b1: add $1,%eax
			loop: dec %edi
			jne loop
			b2: ret`,
		rows: map[string]string{"g1": "sp+8", "b1": "sp+8", "loop": "sp+8", "b2": "sp+8"},
	}, {
		name: "a tail-called body another function branches back to",
		src: `fn f
			xor %eax,%eax
			jmp body
			fn g
			mov $2,%eax
			body: b1: add $1,%eax
			dec %edi
			jne body
			b2: ret`,
		rows: map[string]string{"b1": "sp+8", "b2": "sp+8"},
	}, {
		// g runs into the body with rbx pushed, f jumps to it with no
		// frame: no rows hold for both, so neither walk gives any.
		name: "a tail-called body another function runs into with a frame",
		src: `fn f
			xor %eax,%eax
			jmp body
			fn g
			push %rbx
			body: b1: call die
			fn die
			hlt`,
		noreturn: []string{"die"},
		rows:     map[string]string{"b1": "none"},
		skips:    map[string]Reason{"g": ReasonShared, "body": ReasonShared},
	}, {
		name: "a call that does not return, at the end",
		src: `fn f
			push %rbx
			a1: call die
			.byte 0x06
			fn die
			d1: push %rax
			hlt`,
		noreturn: []string{"die"},
		rows:     map[string]string{"a1": "sp+16", "d1": "sp+8"},
	}, {
		name: "a call that does not return, unknown",
		src: `fn f
			push %rbx
			a1: call die
			fn die
			d1: push %rax
			d2: hlt`,
		rows: map[string]string{"a1": "sp+16", "d1": "sp+8", "d2": "sp+16"},
	}, {
		name: "unreachable padding",
		src: `fn f
			a1: ret
			pad: int3
			int3
			nopw 0(%rax,%rax,1)
			endfn
			fn g
			ret`,
		rows: map[string]string{"a1": "sp+8", "pad": "none"},
	}, {
		name: "a cold part with its own symbol, before its function",
		src: `fn f_cold
			c1: xor %edi,%edi
			call die
			fn f
			push %rbx
			test %edi,%edi
			jne f_cold
			a1: pop %rbx
			ret
			fn die
			hlt`,
		noreturn: []string{"die"},
		rows:     map[string]string{"c1": "sp+16", "a1": "sp+16"},
	}, {
		// Both are left out: one of them entered code that is not its
		// own, and which one cannot be told.
		name: "a jump into code another walk reaches",
		src: `fn f
			push %rbx
			x: pop %rbx
			ret
			fn g
			push %rbx
			jmp x`,
		rows:  map[string]string{"x": "none"},
		skips: map[string]Reason{"f": ReasonShared, "g": ReasonShared},
	}, {
		// Entries found only after padding (pad_*) are kept only when a
		// path returns from the entry's state.
		name: "a padding entry that returns",
		src: `fn pad_f
			push %rbx
			x: pop %rbx
			ret`,
		rows: map[string]string{"x": "sp+16"},
	}, {
		name: "a padding entry that jumps back into its function",
		src: `fn f
			push %rbx
			jmp *%rax
			fn pad_case
			mov $1, %eax
			y: jmp f`,
		rows:  map[string]string{"y": "none"},
		skips: map[string]Reason{"pad_case": ReasonNotEntry, "f": ReasonIndirect},
	}, {
		// A pointer's entry (ptr_*) likewise: a case block of a
		// stripped PIE (libxul) pushes a call's argument, calls, pops
		// it and tail-calls: from an entry's state that looks like a
		// frame built and removed, and it is not a function.
		name: "a pointer entry that pushes an argument and jumps on",
		src: `fn ptr_case
			c: mov $1, %eax
			push $0xf
			call g
			add $8, %rsp
			jmp g
			fn ptr_ret
			push %rbx
			d: pop %rbx
			ret
			fn g
			ret`,
		rows:  map[string]string{"c": "none", "d": "sp+16"},
		skips: map[string]Reason{"ptr_case": ReasonNotEntry},
	}, {
		name: "a padding entry whose pops go above its entry",
		src: `fn pad_case
			mov $1, %eax
			z: pop %rbx
			ret`,
		rows:  map[string]string{"z": "none"},
		skips: map[string]Reason{"pad_case": ReasonStates},
	}, {
		name: "a path out of the code",
		src: `fn f
			push %rbx
			jmp 0x10`,
		skips: map[string]Reason{"f": ReasonOutside},
	}, {
		name: "undecodable",
		src: `fn f
			push %rbx
			.byte 0x06
			ret`,
		skips: map[string]Reason{"f": ReasonUndecodable},
	}})
}

// TestDescribed: entries CFI covers are not walked, and a path into
// described code ends there.
func TestDescribed(t *testing.T) {
	im := assemble(t, `fn f
		push %rbx
		pop %rbx
		jmp x
		fn g
		push %rbx
		x: pop %rbx
		ret`)
	g := im.syms["g"]
	im.code.Described = func(lo, hi uint64) bool { return lo >= g }
	res := analyze(im.code)
	if len(res.skips) != 0 || len(res.funcs) != 1 || res.funcs[0].Start != im.syms["f"] || res.funcs[0].End > g {
		t.Fatalf("funcs %+v skips %+v", res.funcs, res.skips)
	}
}

func TestNoArch(t *testing.T) {
	c := &Code{Machine: elf.EM_MIPS, Entries: []Entry{{Addr: 0x1000}}}
	res := analyze(c)
	if len(res.skips) != 1 || len(res.funcs) != 0 {
		t.Fatalf("%+v", res)
	}
}

func TestExtents(t *testing.T) {
	var x extents
	for _, r := range [][2]uint64{{10, 20}, {30, 40}, {20, 30}, {50, 60}, {5, 8}, {55, 70}} {
		x.add(r[0], r[1])
	}
	want := extents{{5, 8}, {10, 40}, {50, 70}}
	if len(x) != len(want) {
		t.Fatalf("%v, want %v", x, want)
	}
	for i := range want {
		if x[i] != want[i] {
			t.Fatalf("%v, want %v", x, want)
		}
	}
	for _, c := range []struct {
		lo, hi uint64
		want   bool
	}{{0, 5, false}, {0, 6, true}, {8, 10, false}, {39, 41, true}, {40, 50, false}, {69, 80, true}, {70, 80, false}} {
		if got := x.overlaps(c.lo, c.hi); got != c.want {
			t.Errorf("overlaps(%d,%d) = %v", c.lo, c.hi, got)
		}
	}
}
