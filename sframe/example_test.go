package sframe_test

import (
	"debug/elf"
	"fmt"
	"log"

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
				loc(t.Header.ABI, r.CFA), loc(t.Header.ABI, r.RA), loc(t.Header.ABI, r.FP))
		}
	}
	// Output:
	// entry+0: CFA sp+8, RA at CFA-8, FP unchanged
	// entry+8: CFA sp+32, RA at CFA-8, FP at CFA-16
}

// loc says how an unwinder recovers a value with the rule l: the CFA from
// a register, the RA and FP from the stack or unchanged. (Flexible FDEs
// have other kinds too; Table.Dump prints them all.)
func loc(abi sframe.ABI, l sframe.Loc) string {
	switch l.Kind {
	case sframe.LocReg:
		reg := fmt.Sprintf("r%d", l.Reg)
		switch l.Reg {
		case sframe.SPReg(abi):
			reg = "sp"
		case sframe.FPReg(abi):
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
