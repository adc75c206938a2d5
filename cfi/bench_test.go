package cfi

import (
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/benchfile"
)

// BenchmarkParseExecute parses and executes every FDE of a large library:
// CFI2SFRAME_BENCH_FILE, else the system libc.
func BenchmarkParseExecute(b *testing.B) {
	name := benchfile.Name()
	f, err := elfread.Open(name)
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	secs, err := sections(f, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var in interpreter
	var t Table
	for i := 0; i < b.N; i++ {
		fdes := 0
		for _, s := range secs {
			list, _ := Parse(s)
			for _, fd := range list {
				if err := in.execute(fd, &t); err != nil {
					b.Fatal(err)
				}
				fdes++
			}
		}
		b.ReportMetric(float64(fdes), "FDEs")
	}
}
