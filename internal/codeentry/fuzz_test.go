package codeentry

import (
	"os"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// FuzzLoad: any bytes that open as an ELF file are read into a Code (or
// refused with an error) without a panic, and its entries are sorted,
// one per address, each inside the executable code.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"../../testdata/fromcode/x86_64-nocfi", "../../testdata/fromcode/aarch64-nocfi"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ef, err := elfread.NewFileBytes(b, "fuzz")
		if err != nil {
			return
		}
		c, _, err := Load(ef, Options{DebugDirs: []string{t.TempDir()}})
		if err != nil {
			return
		}
		for i, e := range c.Entries {
			if i > 0 && e.Addr <= c.Entries[i-1].Addr {
				t.Fatalf("entries out of order at %#x", e.Addr)
			}
			in := false
			for _, r := range c.Text {
				in = in || e.Addr >= r.Addr && e.Addr-r.Addr < uint64(len(r.Data))
			}
			if !in {
				t.Fatalf("entry %#x outside the code", e.Addr)
			}
		}
	})
}
