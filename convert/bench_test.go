package convert

import (
	"os"
	"testing"
)

// BenchmarkSFrame builds the .sframe of a large library in memory, as a
// conversion does (CFI2SFRAME_BENCH_FILE, else libc): the CPU side of a
// conversion, without the copy.
func BenchmarkSFrame(b *testing.B) {
	name := os.Getenv("CFI2SFRAME_BENCH_FILE")
	if name == "" {
		name = "/lib/x86_64-linux-gnu/libc.so.6"
	}
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
		if _, err := SFrame(name, f, st.Size(), Options{Force: true}); err != nil {
			b.Fatal(err)
		}
	}
}
