// goprog: a Go call chain whose innermost function spins, for
// scripts/kernel-acceptance.sh. Built with CGO_ENABLED=0 and
// -ldflags='-s -w': static and stripped, so its only call-frame
// information is the function table (.gopclntab) that cfi2sframe
// converts. Every function is kept out of line (//go:noinline) and does
// work after its call, and the frames differ: leaf has none (it saves no
// frame pointer, so the kernel's frame-pointer walk skips its caller),
// a has a small one, b one of over 255 bytes and c one of over 65535
// (the runtime grows the goroutine's stack for it first).
//
// The true chain of a sample in leaf, innermost first:
//
//	main.leaf main.c main.b main.a main.main runtime.main runtime.goexit
//
// runtime.goexit is where the main goroutine's stack starts: cfi2sframe
// marks it outermost (its FRE has the return address undefined), so the
// kernel's walk ends there.
//
// Usage: goprog ITERATIONS
package main

import (
	"os"
	"strconv"
)

var sink uint64

//go:noinline
func leaf(n uint64) uint64 {
	s := sink
	for i := uint64(0); i < n; i++ {
		s += i ^ s>>3
	}
	return s
}

//go:noinline
func c(n uint64) uint64 {
	var big [10000]uint64 // 80000 bytes: a 4-byte CFA offset
	big[n&4095] = n
	r := leaf(n + big[n&4095]&1)
	return r + big[11]
}

//go:noinline
func b(n uint64) uint64 {
	var mid [375]uint64 // 3000 bytes: a 2-byte CFA offset
	mid[n&255] = n
	r := c(n + mid[n&255]&1)
	return r + mid[7]
}

//go:noinline
func a(n uint64) uint64 {
	var small [5]uint64
	small[n%5] = n
	r := b(n + small[n%5]&1)
	return r + small[0]
}

func main() {
	n := uint64(400000000)
	if len(os.Args) > 1 {
		v, err := strconv.ParseUint(os.Args[1], 10, 64)
		if err != nil {
			os.Stderr.WriteString("usage: goprog ITERATIONS\n")
			os.Exit(2)
		}
		n = v
	}
	sink = a(n)
}
