package unwind_test

import (
	"debug/elf"
	"fmt"
	"log"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// stack is a captured stack: its 8-byte words by address.
type stack map[uint64]uint64

func (s stack) ReadWord(addr uint64) (uint64, bool) {
	v, ok := s[addr]
	return v, ok
}

// Walk a stack of testdata/sframe/v3-x86_64-exe (sources in
// testdata/sframe/src) stopped in leaf, which entry called, which _start
// called. The stack is built as the program's instructions build it
// (objdump -d), so the walk, which reads GNU's SFrame rows, is checked
// against the code.
func ExampleUnwinder_Walk() {
	f, err := elf.Open("../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	table, err := sframe.OpenELF(f)
	if err != nil {
		log.Fatal(err)
	}
	// The executable segment, loaded where it was linked (bias 0: ET_EXEC).
	var space unwind.Space
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			space = append(space, unwind.Mapping{Lo: p.Vaddr, Hi: p.Vaddr + p.Memsz, Table: table})
		}
	}

	mem := stack{}
	sp := uint64(0x7ffd_5000_0000) // _start has aligned it to 16
	push := func(v uint64) { sp -= 8; mem[sp] = v }
	push(0x40039f) // _start: call entry (returns to the hlt after it)
	push(0)        // entry: push %rbp (_start zeroed it)
	push(7)        // push %rbx
	sp -= 8        // sub $0x8,%rsp
	push(0x4003eb) // call leaf (returns to entry+0x1b)
	// leaf has run one instruction (imul); %rbp holds argc, 1 (entry: mov %edi,%ebp).
	// The ABI of the file's machine: which registers are SP, FP and RA.
	a := arch.ForMachine(f.Machine)
	top := unwind.Topmost(a, 0x400403, sp, 1, 0)

	u := &unwind.Unwinder{Arch: a, Space: &space, Mem: mem}
	pcs := make([]uint64, 16)
	n, why := u.Walk(top, pcs)
	for i, pc := range pcs[:n] {
		at := pc
		if i > 0 {
			at-- // a return address: the call is before it
		}
		fmt.Printf("#%d %#x %s\n", i, pc, symbolize(f, at))
	}
	fmt.Println("stopped:", why)
	// Output:
	// #0 0x400403 leaf
	// #1 0x4003eb entry
	// #2 0x40039f _start
	// stopped: outermost
}

// symbolize names the function symbol holding addr.
func symbolize(f *elf.File, addr uint64) string {
	syms, _ := f.Symbols()
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && addr >= s.Value && addr < s.Value+s.Size {
			return s.Name
		}
	}
	return "?"
}
