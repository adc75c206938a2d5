package convert_test

import (
	"context"
	"debug/elf"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Convert a program built without --gsframe (testdata/example/hello.c) as
// the cfi2sframe command does, then look at the output: the segment a
// loader finds the section by, and the section itself.
func ExampleFile_WriteFile() {
	dir, err := os.MkdirTemp("", "cfi2sframe-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "hello")

	in, err := convert.Open("../testdata/example/hello")
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	res, err := in.WriteFile(context.Background(), convert.Options{}, out, 0o755)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Translate.Summary())

	f, err := elf.Open(out)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	const ptGNUSFrame = elf.ProgType(0x6474e554) // PT_GNU_SFRAME
	for _, p := range f.Progs {
		if p.Type == ptGNUSFrame {
			fmt.Printf("PT_GNU_SFRAME at %#x, %d bytes\n", p.Vaddr, p.Filesz)
		}
	}
	t, err := sframe.OpenELF(f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("SFrame version %d, %d functions\n", t.Header.Version, t.Header.NumFDEs)
	// Output:
	// 3 functions converted (+3 PLT), 0 skipped
	// PT_GNU_SFRAME at 0x5310, 259 bytes
	// SFrame version 3, 6 functions
}

// Build a program's .sframe in memory, writing nothing, as a profiler
// does for a file mapped without one: the section is the one the
// converted file would hold, encoded for the address it would have there.
func ExampleFile_Convert() {
	f, err := convert.Open("../testdata/example/hello")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	res, err := f.Convert(convert.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf(".sframe at %#x, %d bytes\n", res.Addr, len(res.SFrame))
	t, err := sframe.Open(res.SFrame, res.Addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("SFrame version %d, %d functions\n", t.Header.Version, t.Header.NumFDEs)
	// Output:
	// .sframe at 0x5310, 259 bytes
	// SFrame version 3, 6 functions
}
