package sframe_test

import (
	"debug/elf"
	"fmt"
	"log"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Look up the rules of function entry (testdata/sframe/src/main.c) in a
// program that GNU as and ld gave SFrame: at its first instruction, and
// after its prologue (push %rbp; push %rbx; sub $8,%rsp), 8 bytes in.
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
	// The ABI's registers: which the CFA rules name as SP and FP.
	a := arch.ForSFrameABI(t.Header.ABI)
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
			fmt.Printf("%s+%d: CFA %s, RA %s, FP %s\n", s.Name, pc-s.Value,
				loc(a, r.CFA), loc(a, r.RA), loc(a, r.FP))
		}
	}
	// Output:
	// entry+0: CFA sp+8, RA at CFA-8, FP unchanged
	// entry+8: CFA sp+32, RA at CFA-8, FP at CFA-16
}

// loc says how an unwinder recovers a value with the rule l: the CFA from
// a register, the RA and FP from the stack or unchanged. (Flexible FDEs
// have other kinds too; Table.Dump prints them all.)
func loc(a *arch.Arch, l sframe.Loc) string {
	switch l.Kind {
	case sframe.LocReg:
		reg := fmt.Sprintf("r%d", l.Reg)
		switch l.Reg {
		case a.SP():
			reg = "sp"
		case a.FP():
			reg = "fp"
		}
		return fmt.Sprintf("%s%+d", reg, l.Offset)
	case sframe.LocFixed, sframe.LocCFA:
		return fmt.Sprintf("at CFA%+d", l.Offset)
	case sframe.LocUnsaved:
		return "unchanged"
	}
	return fmt.Sprintf("kind %d", l.Kind)
}
