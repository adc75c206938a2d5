package codeflow

import (
	"strings"
	"testing"
)

// tableFunc is a function f whose dispatch (the lines given) jumps
// through tab (32-bit offsets from tab), abs (64-bit addresses) or
// cls (a byte table of indices into tab) to c0, c1, c2, each reached
// only through the table, or to def.
func tableFunc(dispatch string) string {
	return `fn f
		push %rbx
		` + strings.TrimSpace(dispatch) + `
		c0: pop %rbx
		ret
		c1: pop %rbx
		ret
		c2: pop %rbx
		ret
		def: pop %rbx
		ret
		.section .rodata
		tab: .long c0-tab, c1-tab, c2-tab
		abs: .quad c0, c1, c2
		cls: .byte 0, 2, 1, 2`
}

// TestAMD64TableForms: each form of bounds check resolves its table (the
// cases, reached only through it, get rows), and each way the proof can
// break leaves f out.
func TestAMD64TableForms(t *testing.T) {
	resolved := map[string]string{"c0": "sp+16", "c1": "sp+16", "c2": "sp+16", "def": "sp+16"}
	left := map[string]Reason{"f": ReasonIndirect}
	pic := `lea tab(%rip),%rdx
		movslq (%rdx,%rcx,4),%rax
		add %rdx,%rax
		jmp *%rax`
	cases := []struct {
		name, dispatch string
		ok             bool
	}{
		// Copies of the index, before and after the check.
		{"copy before the check", "mov %edi,%ecx\n mov %esi,%eax\n cmp $2,%edi\n ja def\n" + pic, true},
		{"copy after the check", "mov %edi,%edi\n cmp $2,%edi\n ja def\n mov %edi,%ecx\n" + pic, true},
		{"copy of a copy, check on the first", "mov %edi,%r8d\n mov %r8d,%ecx\n cmp $2,%r8d\n ja def\n" + pic, true},
		// A check on a narrower part, then its zero-extension.
		{"byte check, movzbl", "lea -0x58(%rdi),%ecx\n cmp $2,%cl\n ja def\n movzbl %cl,%ecx\n" + pic, true},
		{"byte check, movzbl to another", "lea -0x58(%rdi),%eax\n cmp $2,%al\n ja def\n movzbl %al,%ecx\n" + pic, true},
		{"32-bit write, 32-bit check", "sub $3,%edi\n mov %edi,%ecx\n cmp $2,%ecx\n ja def\n" + pic, true},
		{"jbe to the table", "mov %edi,%ecx\n cmp $2,%ecx\n jbe go\n jmp def\n go: " + pic, true},
		{"jb to the table", "mov %edi,%ecx\n cmp $3,%ecx\n jb go\n jmp def\n go: " + pic, true},
		// A memory word compared then reloaded.
		{"memory check, 32-bit reload", "cmpl $2,8(%rsi)\n mov %rsi,%rbx\n ja def\n mov 8(%rsi),%eax\n jmp *abs(,%rax,8)", true},
		{"memory check, movzbl reload", "cmpb $2,8(%rsi)\n ja def\n movzbl 8(%rsi),%ecx\n" + pic, true},
		{"RIP-relative memory check", "cmpl $2,cls(%rip)\n ja def\n mov cls(%rip),%ecx\n" + pic, true},
		// A byte table of indices, itself indexed by a proven index.
		{"byte table", "mov %edi,%edi\n cmp $3,%rdi\n ja def\n lea cls(%rip),%rax\n movzbl (%rax,%rdi,1),%ecx\n" + pic, true},
		{"absolute entries loaded", "mov %edi,%edi\n cmp $2,%rdi\n ja def\n mov abs(,%rdi,8),%rax\n jmp *%rax", true},

		// The index changed between the check and the load.
		{"index changed after the check", "mov %edi,%ecx\n cmp $2,%ecx\n ja def\n add $1,%ecx\n" + pic, false},
		{"byte check, index changed before movzbl", "lea -0x58(%rdi),%ecx\n cmp $2,%cl\n ja def\n add $1,%ecx\n movzbl %cl,%ecx\n" + pic, false},
		{"copy source changed before the check", "mov %edi,%ecx\n add $7,%edi\n cmp $2,%edi\n ja def\n" + pic, false},
		{"memory stored between check and reload", "cmpl $2,8(%rsi)\n ja def\n mov %edi,(%rdx)\n mov 8(%rsi),%ecx\n" + pic, false},
		{"memory reloaded through a changed base", "cmpl $2,8(%rsi)\n ja def\n add $4,%rsi\n mov 8(%rsi),%ecx\n" + pic, false},
		{"memory reload wider than the check", "cmpb $2,8(%rsi)\n ja def\n mov 8(%rsi),%ecx\n" + pic, false},
		// A path that bypasses the check, or a copy made on one path only.
		{"a path bypassing the check", "mov %edi,%ecx\n test %esi,%esi\n jne in\n cmp $2,%ecx\n ja def\n in: " + pic, false},
		{"copy on one path only", "test %esi,%esi\n je skip\n mov %edi,%ecx\n skip: cmp $2,%edi\n ja def\n" + pic, false},
		// Compares that do not bound the index.
		{"signed compare", "mov %edi,%ecx\n cmp $2,%ecx\n jg def\n" + pic, false},
		{"jae kept on the wrong side", "mov %edi,%ecx\n cmp $2,%ecx\n jb def\n" + pic, false},
		{"32-bit check, 64-bit index of unknown upper half", "cmp $2,%edi\n ja def\n mov %rdi,%rcx\n" + pic, false},
		{"byte check, 32-bit index", "lea -0x58(%rdi),%ecx\n cmp $2,%cl\n ja def\n" + pic, false},
		{"check on ah", "mov %edi,%eax\n cmp $2,%ah\n ja def\n movzbl %al,%ecx\n" + pic, false},
		{"flags changed between check and branch", "mov %edi,%ecx\n cmp $2,%ecx\n test %esi,%esi\n ja def\n" + pic, false},
		{"no check", "mov %edi,%ecx\n" + pic, false},
	}
	var snips []snippet
	for _, c := range cases {
		s := snippet{name: c.name, src: tableFunc(c.dispatch)}
		if c.ok {
			s.rows = resolved
		} else {
			s.skips = left
		}
		snips = append(snips, s)
	}
	runSnippets(t, snips)
}

// TestAMD64TableOutside: a table entry outside the function is taken
// only as code of the jump's executable range, and walked as a direct
// jump there would be: a cold part gets rows, another function's entry
// is walked with the frame in place (and fails there), and an entry
// outside the code leaves f out.
func TestAMD64TableOutside(t *testing.T) {
	src := func(second string) string {
		return `fn f
			push %rbx
			mov %edi,%ecx
			cmp $1,%ecx
			ja def
			lea tab(%rip),%rdx
			movslq (%rdx,%rcx,4),%rax
			add %rdx,%rax
			jmp *%rax
			c0: pop %rbx
			ret
			def: pop %rbx
			ret
			endfn
			cold: pop %rbx
			ret
			fn g
			g0: ret
			.section .rodata
			tab: .long c0-tab, ` + second + `-tab`
	}
	runSnippets(t, []snippet{
		{name: "entry in a cold part", src: src("cold"), rows: map[string]string{"c0": "sp+16", "cold": "sp+16"}},
		{name: "entry in another function", src: src("g0"), skips: map[string]Reason{"f": ReasonReturn}},
		{name: "entry in read-only data", src: src("tab"), skips: map[string]Reason{"f": ReasonIndirect}},
	})
}

// TestAMD64TableWidth: an index zero-extended from a byte bounds a table
// of 256 entries with no check; a wider or a changed one does not.
func TestAMD64TableWidth(t *testing.T) {
	src := func(dispatch string) string {
		return `fn f
			push %rbx
			` + dispatch + `
			lea big(%rip),%rdx
			movslq (%rdx,%rcx,4),%rax
			add %rdx,%rax
			jmp *%rax
			c0: pop %rbx
			ret
			.section .rodata
			big: .rept 256
			.long c0-big
			.endr`
	}
	ok := map[string]string{"c0": "sp+16"}
	left := map[string]Reason{"f": ReasonIndirect}
	runSnippets(t, []snippet{
		{name: "movzbl from a register", src: src("movzbl %dil,%ecx"), rows: ok},
		{name: "movzbl from memory", src: src("movzbl (%rsi),%ecx"), rows: ok},
		{name: "movzbl then copied", src: src("movzbl %dil,%eax\n mov %eax,%ecx"), rows: ok},
		{name: "movzbl then movslq", src: src("movzbl %dil,%eax\n movslq %eax,%rcx"), rows: ok},
		{name: "movzwl", src: src("movzwl %di,%ecx"), skips: left},
		{name: "32-bit value movslq", src: src("mov %edi,%eax\n movslq %eax,%rcx"), skips: left},
		{name: "movzbl then changed", src: src("movzbl %dil,%ecx\n add $1,%ecx"), skips: left},
		{name: "movsbl", src: src("movsbl %dil,%ecx"), skips: left},
		{name: "movzbl on one path only", src: src("test %esi,%esi\n je skip\n movzbl %dil,%ecx\n skip:"), skips: left},
	})
}

// TestAMD64TableTwoPaths: a dispatch block reached from two paths, each
// with its own bounds check (clang's switch reached from two places), is
// resolved when every path proves the bound within the table.
func TestAMD64TableTwoPaths(t *testing.T) {
	src := func(second string) string {
		return tableFunc(`test %esi,%esi
			jne other
			mov %edi,%ecx
			cmp $2,%ecx
			ja def
			jmp go
			other: mov %edx,%ecx
			` + second + `
			go: lea tab(%rip),%rdx
			movslq (%rdx,%rcx,4),%rax
			add %rdx,%rax
			jmp *%rax`)
	}
	resolved := map[string]string{"c0": "sp+16", "c1": "sp+16", "c2": "sp+16", "def": "sp+16"}
	left := map[string]Reason{"f": ReasonIndirect}
	runSnippets(t, []snippet{
		{name: "both checked", src: src("cmp $2,%ecx\n ja def"), rows: resolved},
		{name: "second checked tighter", src: src("cmp $1,%ecx\n ja def"), rows: resolved},
		{name: "second checked looser", src: src("cmp $3,%ecx\n ja def"), skips: left},
		{name: "second unchecked", src: src(""), skips: left},
		{name: "second checks another register", src: src("cmp $2,%edx\n ja def\n add $1,%ecx"), skips: left},
	})
}

// TestAMD64TableO0: GCC -O0's table (the index scaled by a lea with no
// base, the entry loaded through base+index into a 32-bit register, then
// cltq) is resolved from the bound on the register or on the stack slot
// the index is reloaded from; each way the proof can break leaves f out.
func TestAMD64TableO0(t *testing.T) {
	o0 := func(load string) string {
		return `mov %eax,%eax
			lea 0(,%rax,4),%rdx
			lea tab(%rip),%rax
			` + load + `
			cltq
			lea tab(%rip),%rdx
			add %rdx,%rax
			jmp *%rax`
	}
	resolved := map[string]string{"c0": "sp+16", "c1": "sp+16", "c2": "sp+16", "def": "sp+16"}
	left := map[string]Reason{"f": ReasonIndirect}
	cases := []struct {
		name, dispatch string
		ok             bool
	}{
		{"register check", "mov %edi,%eax\n cmp $2,%eax\n ja def\n" + o0("mov (%rdx,%rax,1),%eax"), true},
		{"registers the other way round", "mov %edi,%eax\n cmp $2,%eax\n ja def\n" + o0("mov (%rax,%rdx,1),%eax"), true},
		{"stack slot checked, reloaded", "mov %edi,-8(%rsp)\n cmpl $2,-8(%rsp)\n ja def\n mov -8(%rsp),%eax\n" + o0("mov (%rdx,%rax,1),%eax"), true},
		{"cltq of a bounded index", "mov %edi,%ecx\n cmp $2,%ecx\n ja def\n mov %ecx,%eax\n cltq\n lea tab(%rip),%rdx\n movslq (%rdx,%rax,4),%rax\n add %rdx,%rax\n jmp *%rax", true},

		{"no cltq", "mov %edi,%eax\n cmp $2,%eax\n ja def\n" + strings.Replace(o0("mov (%rdx,%rax,1),%eax"), "cltq", "", 1), false},
		{"scaled by 8", "mov %edi,%eax\n cmp $2,%eax\n ja def\n" + strings.Replace(o0("mov (%rdx,%rax,1),%eax"), "(,%rax,4)", "(,%rax,8)", 1), false},
		{"scaled index changed", "mov %edi,%eax\n cmp $2,%eax\n ja def\n" + strings.Replace(o0("mov (%rdx,%rax,1),%eax"), "lea tab(%rip),%rax", "add $4,%rdx\n lea tab(%rip),%rax", 1), false},
		{"stack slot stored after the check", "mov %edi,-8(%rsp)\n cmpl $2,-8(%rsp)\n ja def\n mov %esi,-8(%rsp)\n mov -8(%rsp),%eax\n" + o0("mov (%rdx,%rax,1),%eax"), false},
		{"unchecked", "mov %edi,%eax\n" + o0("mov (%rdx,%rax,1),%eax"), false},
		{"cltq of an unbounded index", "mov %edi,%ecx\n cmp $2,%ecx\n ja def\n mov %esi,%eax\n cltq\n lea tab(%rip),%rdx\n movslq (%rdx,%rax,4),%rax\n add %rdx,%rax\n jmp *%rax", false},
		{"cltq of a 32-bit check above 1<<31", "mov %edi,%ecx\n cmp $2,%ecx\n ja def\n mov %ecx,%eax\n not %eax\n cltq\n lea tab(%rip),%rdx\n movslq (%rdx,%rax,4),%rax\n add %rdx,%rax\n jmp *%rax", false},
	}
	var snips []snippet
	for _, c := range cases {
		s := snippet{name: c.name, src: tableFunc(c.dispatch)}
		if c.ok {
			s.rows = resolved
		} else {
			s.skips = left
		}
		snips = append(snips, s)
	}
	runSnippets(t, snips)
}

// TestAMD64TableContent: a table no check bounds (clang's switch with no
// default) is read while its entries are code of the function, up to an
// address the file references, a word that cannot be an entry or the
// end of read-only data; each rule that refuses it leaves f out, and a
// scan that went wrong fails f when the walk ends.
func TestAMD64TableContent(t *testing.T) {
	src := func(dispatch, cases, data string) string {
		return `fn f
			push %rbx
			movsbl (%rsi),%ecx
			add $-0x41,%ecx
			` + dispatch + `
			c0: pop %rbx
			ret
			c1: pop %rbx
			ret
			c2: pop %rbx
			ret
			` + cases + `
			endfn
			fn g
			g0: ret
			` + data
	}
	pic := `lea tab(%rip),%rdx
		movslq (%rdx,%rcx,4),%rcx
		add %rdx,%rcx
		jmp *%rcx`
	tab := `tab: .long c0-tab, c1-tab, c2-tab`
	three := map[string]string{"c0": "sp+16", "c1": "sp+16", "c2": "sp+16"}
	left := map[string]Reason{"f": ReasonIndirect}
	ro := func(s string) string { return ".section .rodata\n" + s }
	runSnippets(t, []snippet{
		{name: "ends at a referenced address", refs: []string{"tab", "next"},
			src: src(pic, "", ro(tab+"\n next: .long c0-tab")), rows: three},
		{name: "ends at a word outside the code", refs: []string{"tab"},
			src: src(pic, "", ro(tab+"\n .long 0x10000000")), rows: three},
		{name: "ends with the read-only data", refs: []string{"tab"},
			src: src(pic, "", ro(tab)), rows: three},
		{name: "a second table of f, referenced, not read", refs: []string{"tab", "tab2"},
			src:  src(pic, "d0: pop %rbx\n ret\n lea tab2(%rip),%rax", ro(tab+"\n tab2: .long d0-tab2")),
			rows: map[string]string{"c0": "sp+16", "c2": "sp+16", "d0": "none"}},
		{name: "byte index, fewer entries than 256", refs: []string{"tab"},
			src: src("movzbl %cl,%ecx\n"+pic, "", ro(tab)), rows: three},
		{name: "absolute entries", refs: []string{"abs"},
			src: src("jmp *abs(,%rcx,8)", "", ro("abs: .quad c0, c1, c2")), rows: three},

		{name: "no references known", src: src(pic, "", ro(tab)), skips: left},
		{name: "a word into another function", refs: []string{"tab"},
			src: src(pic, "", ro(tab+"\n .long g0-tab")), skips: left},
		{name: "table in writable data", refs: []string{"tab"},
			src: src(pic, "", ".section .data\n"+tab), skips: left},
		{name: "table in the code", refs: []string{"tab"},
			src: src(pic, "tab: .long c0-tab, c1-tab, c2-tab", ""), skips: left},
		{name: "unreferenced second table read on, into an instruction", refs: []string{"tab"},
			src:   src(pic, "d0: mov $1,%eax\n pop %rbx\n ret", ro(tab+"\n .long d0-tab, d0-tab+1")),
			skips: map[string]Reason{"f": ReasonData}},
		{name: "a target another path reaches with another frame", refs: []string{"tab"},
			src: `fn f
				test %edi,%edi
				je c1
				push %rbx
				movsbl (%rsi),%ecx
				lea tab(%rip),%rdx
				movslq (%rdx,%rcx,4),%rcx
				add %rdx,%rcx
				jmp *%rcx
				c0: pop %rbx
				ret
				c1: pop %rbx
				ret
				.section .rodata
				tab: .long c0-tab, c1-tab`,
			skips: map[string]Reason{"f": ReasonStates}},
		{name: "cases join with another frame than the jump's", refs: []string{"tab"},
			src: src(pic, "x0: push %rax\n jmp join\n x1: push %rax\n jmp join\n join: pop %rax\n pop %rbx\n ret",
				ro("tab: .long c0-tab, x0-tab, x1-tab")), skips: left},
	})
}
