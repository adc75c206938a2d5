package sframe_test

import (
	"debug/elf"
	"fmt"
	"log"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Look up the rules of function entry (testdata/sframe/src/main.c) in a
// program that GNU as and ld gave SFrame: at its first instruction, and
// after its prologue (push %rbp; push %rbx; sub $8,%rsp), 8 bytes in. The
// rules print in the notation of Dump, registers by their DWARF numbers
// (r7 is %rsp): the CFA is r7 plus an offset, the return address at the
// header's fixed offset ("f", CFA-8 on AMD64), the frame pointer unsaved
// ("u") and then saved at CFA-16.
func ExampleOpenELF() {
	f, err := elf.Open("../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	t, err := sframe.OpenELF(f)
	if err != nil {
		log.Fatal(err)
	}
	syms, err := f.Symbols()
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range syms {
		if s.Name != "entry" {
			continue
		}
		for _, pc := range []uint64{s.Value, s.Value + 8} {
			r, err := t.Lookup(pc)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s+%d: CFA %v, RA %v, FP %v\n", s.Name, pc-s.Value, r.CFA, r.RA, r.FP)
		}
	}
	// Output:
	// entry+0: CFA r7+8, RA f, FP u
	// entry+8: CFA r7+32, RA f, FP c-16
}
