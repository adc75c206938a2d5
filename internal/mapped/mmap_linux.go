package mapped

import (
	"syscall"
	"unsafe"
)

// mmap and munmap call the kernel directly. syscall.Mmap and
// syscall.Munmap hold one process-wide lock through the system call, and
// unmapping a large input whose file an in-place conversion has just
// replaced can take milliseconds (its blocks are freed then): in tree
// mode the writers' unmaps held up every worker's next map (an execution
// trace of an in-place run over /usr/bin and /usr/lib showed 17 s of
// goroutines waiting on that lock in an 11 s run).
func mmap(fd int, size int) ([]byte, error) {
	p, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, uintptr(size), syscall.PROT_READ, syscall.MAP_SHARED, uintptr(fd), 0)
	if errno != 0 {
		return nil, errno
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), size), nil
}

func munmap(b []byte) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MUNMAP, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), 0); errno != 0 {
		return errno
	}
	return nil
}

// dontneed unmaps the pages [p, p+n) of a file mapping, which stay in
// the page cache (MADV_DONTNEED on a shared file mapping discards
// nothing). An error leaves the pages mapped, which is no fault.
func dontneed(p, n uintptr) {
	syscall.Syscall(syscall.SYS_MADVISE, p, n, syscall.MADV_DONTNEED)
}
