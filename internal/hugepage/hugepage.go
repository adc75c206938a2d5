// Package hugepage asks the kernel to back large buffers that a program
// writes from end to end with transparent huge pages, when the program
// opted in (Enable). A first touch of a 4 KiB page costs about 4 us on
// the machines measured, and converting libLLVM-15 touched 4,200 of them;
// one 2 MiB page replaces 512 such touches. Advice is all it is: where the
// system leaves huge pages to programs that ask (transparent_hugepage
// "madvise", Debian's default) it takes effect, elsewhere nothing changes.
//
// It is off by default: a library's heap may be reused for small objects
// long after a conversion, and a huge page kept for them is memory the
// caller did not ask for. The cfi2sframe command, which exits after its
// work, turns it on.
package hugepage

import "sync/atomic"

var on atomic.Bool

// Enable turns the advice on for the rest of the process.
func Enable() { on.Store(true) }

// Size is the huge page size Advise assumes (x86-64, AArch64 with 4 KiB
// pages).
const Size = 2 << 20

// Advise asks for huge pages under the 2 MiB-aligned part of b's capacity
// (none for a buffer under 4 MiB that straddles no such range), if
// enabled.
func Advise(b []byte) {
	if on.Load() && cap(b) >= Size {
		_ = advise(b[:cap(b)]) // advice: an error changes nothing
	}
}
