package callsite

import (
	"bytes"
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestReleaseKeepsAnswers: a ReturnPad over a mapped file, which gives
// the code's pages back as it passes them (here every page, and each
// part's at its end, as a conversion does), extends the same functions
// as one over a copy of the file in memory, which releases nothing.
func TestReleaseKeepsAnswers(t *testing.T) {
	defer func(old uint64) { releaseWindow = old }(releaseWindow)
	releaseWindow = pageSize
	n := 0
	for _, name := range []string{filepath.Join("..", "..", "testdata", "example", "hello"), "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		in, err := mapped.Open(name)
		if err != nil {
			continue // a system file that is not there
		}
		defer in.Close()
		ef, err := elf.NewFile(bytes.NewReader(in.Data))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := cfi.OpenBytes(in.Data)
		if err != nil {
			t.Fatal(err)
		}
		entries := cf.Entries()
		cfi.SortEntries(entries)
		run := func(data []byte) []uint32 {
			pad := NewReturnPad(ef, data, entries)
			var sizes []uint32
			keep := func(fn *sframe.Function) error {
				sizes = append(sizes, fn.Size)
				return nil
			}
			for _, part := range [][]cfi.Entry{entries[:len(entries)/2], entries[len(entries)/2:]} {
				wrap := pad.Wrap(keep)
				for _, e := range part {
					fn := &sframe.Function{Start: e.Start, Size: uint32(e.Size), PCType: sframe.PCInc, Rows: []sframe.Row{{}}}
					if err := wrap(fn); err != nil {
						t.Fatal(err)
					}
				}
				pad.Release(part)
			}
			return sizes
		}
		want := run(bytes.Clone(in.Data))
		got := run(in.Data)
		extended := 0
		for i, e := range entries {
			if got[i] != want[i] {
				t.Errorf("%s: function at %#x: size %d released, %d not", name, e.Start, got[i], want[i])
			}
			if uint64(want[i]) != e.Size {
				extended++
			}
		}
		t.Logf("%s: %d functions, %d extended", name, len(entries), extended)
		if len(entries) > 1000 && extended == 0 {
			t.Errorf("%s: no function extended: nothing compared", name)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no file")
	}
}
