package elfwrite_test

import (
	"encoding/binary"
	"fmt"
	"log"
	"os"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// The conversion command learns where .sframe lands, encodes the section
// for that address, and writes the result atomically.
func ExampleInsert() {
	const in = "testdata/tiny-x86_64"
	data, err := os.ReadFile(in)
	if err != nil {
		log.Fatal(err)
	}
	out, err := elfwrite.Insert(data, elfwrite.Options{}, func(addr uint64) ([]byte, error) {
		// A real caller runs the SFrame encoder here; function start
		// addresses are encoded relative to addr. This is an SFrame V3
		// header with no FDEs.
		sf := make([]byte, 28)
		binary.LittleEndian.PutUint16(sf, 0xdee2)
		sf[2], sf[3], sf[4], sf[6] = 3, 5, 3, 0xf8
		return sf, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := elfwrite.NewPlan(data, 28, elfwrite.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf(".sframe at %#x (file offset %#x), program headers moved: %v, %d -> %d bytes\n",
		p.Addr, p.Offset, p.PHDRMoved, len(data), len(out))
	// The CLI would then do:
	// elfwrite.WriteFileAtomic(ctx, dst, inputMode, func(f *os.File) error { _, err := f.Write(out); return err })

	// Output: .sframe at 0x403008 (file offset 0x2008), program headers moved: false, 8944 -> 9048 bytes
}
