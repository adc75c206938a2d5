package translate_test

import (
	"debug/elf"
	"fmt"
	"log"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Translate a program's CFI into SFrame V2 functions for glibc's
// backtrace (no FRE where the return address is undefined), one FDE at a
// time from a cfi.Context, and look at what comes out and why a function
// does not: the PLT stubs first, described from their instructions, then
// the functions of the CFI.
func ExampleTranslator_Functions() {
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
	cfi.SortEntries(entries) // the order a Source gives functions in
	t, err := translate.New(translate.Input{Machine: f.Machine, Order: f.ByteOrder}, translate.Options{Version: sframe.Version2, OutermostGap: true})
	if err != nil {
		log.Fatal(err)
	}
	emit := func(fn *sframe.Function) error {
		fmt.Printf("%#x, %d bytes: %d rows\n", fn.Start, fn.Size, len(fn.Rows))
		return nil
	}
	res, err := t.PLTs(emit)
	if err != nil {
		log.Fatal(err)
	}
	fres, err := t.Functions(file.Context(entries), emit)
	if err != nil {
		log.Fatal(err)
	}
	res.Add(fres)
	fmt.Println(res.Summary())
	for _, d := range res.Diags {
		fmt.Printf("%#x: %s: %s\n", d.Start, d.Reason, d.Detail)
	}
	// Output:
	// 0x1020, 16 bytes: 2 rows
	// 0x1030, 32 bytes: 2 rows
	// 0x1050, 8 bytes: 1 rows
	// 0x1060, 59 bytes: 3 rows
	// 0x1190, 958 bytes: 16 rows
	// 3 functions converted (+2 PLT), 1 skipped (1 outermost)
	// 0x10a0: outermost: the return address is undefined at every PC (the outermost frame), and outermost PCs are left without an FRE
}
