// Package benchfile names the file the benchmarks read: one place for the
// CFI2SFRAME_BENCH_FILE setting and its default.
package benchfile

import "os"

// Name returns CFI2SFRAME_BENCH_FILE, or the system libc when it is not
// set.
func Name() string {
	if name := os.Getenv("CFI2SFRAME_BENCH_FILE"); name != "" {
		return name
	}
	return "/lib/x86_64-linux-gnu/libc.so.6"
}
