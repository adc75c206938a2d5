package convert

import (
	"os"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/benchfile"
)

// BenchmarkSFrame converts a large library in memory (NewFile, Convert),
// writing nothing (CFI2SFRAME_BENCH_FILE, else libc): the CPU side of a
// conversion, without the copy.
func BenchmarkSFrame(b *testing.B) {
	name := benchfile.Name()
	f, err := os.Open(name)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sframeOf(name, f, st.Size(), Options{Force: true}); err != nil {
			b.Fatal(err)
		}
	}
}
