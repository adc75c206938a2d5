package hugepage

import (
	"syscall"
	"unsafe"
)

func advise(b []byte) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + Size - 1) &^ (Size - 1)
	hi := (p + uintptr(len(b))) &^ (Size - 1)
	if hi > lo {
		// An error (an old kernel, THP compiled out) leaves 4 KiB pages.
		_ = syscall.Madvise(b[lo-p:hi-p], syscall.MADV_HUGEPAGE)
	}
}
