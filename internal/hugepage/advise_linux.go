package hugepage

import (
	"syscall"
	"unsafe"
)

// advise marks the 2 MiB-aligned middle of b; an error (a kernel without
// transparent huge pages) leaves it on 4 KiB pages.
func advise(b []byte) error {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := (p + Size - 1) &^ (Size - 1)
	hi := (p + uintptr(len(b))) &^ (Size - 1)
	if hi <= lo {
		return nil
	}
	return syscall.Madvise(b[lo-p:hi-p], syscall.MADV_HUGEPAGE)
}
