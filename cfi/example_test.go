package cfi_test

import (
	"debug/elf"
	"fmt"
	"io"
	"log"

	"github.com/cfi2sframe/cfi2sframe/cfi"
)

// Open a program's call-frame information and pull each function's rows
// from one reused context, in address order: the FDE first, its table
// only when asked.
func ExampleOpen() {
	f, err := elf.Open("../testdata/example/hello")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	file, err := cfi.Open(f)
	if err != nil {
		log.Fatal(err)
	}
	entries := file.Entries()
	cfi.SortEntries(entries)
	ctx := file.Context(entries)
	for {
		fde, err := ctx.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		t := ctx.Table()
		if t == nil {
			continue // its error is in ctx.Errors
		}
		last := &t.Rows[len(t.Rows)-1]
		cfa := fmt.Sprintf("r%d%+d", last.CFA.Reg, last.CFA.Offset)
		if last.CFA.Kind == cfi.CFAExpression {
			cfa = "an expression"
		}
		ra := "elsewhere"
		switch r := last.Rule(fde.CIE.RAColumn); r.Kind {
		case cfi.Offset:
			ra = fmt.Sprintf("at CFA%+d", r.Offset)
		case cfi.Undefined:
			ra = "undefined (the outermost frame)"
		}
		fmt.Printf("%#x, %d bytes, %d rows; from %#x on, CFA %s, return address %s\n",
			fde.Start, fde.Size, len(t.Rows), last.Loc, cfa, ra)
	}
	fmt.Println(len(ctx.Errors()), "errors")
	// Output:
	// 0x1020, 48 bytes, 3 rows; from 0x1030 on, CFA an expression, return address at CFA-8
	// 0x1050, 8 bytes, 1 rows; from 0x1050 on, CFA r7+8, return address at CFA-8
	// 0x1060, 59 bytes, 3 rows; from 0x109a on, CFA r7+8, return address at CFA-8
	// 0x10a0, 34 bytes, 1 rows; from 0x10a0 on, CFA r7+8, return address undefined (the outermost frame)
	// 0x1190, 958 bytes, 16 rows; from 0x1523 on, CFA r7+176, return address at CFA-8
	// 0 errors
}
