package convert

import (
	"syscall"
	"unsafe"
)

// mmap and munmap call the kernel directly. syscall.Mmap and
// syscall.Munmap hold one process-wide lock through the system call, and
// unmapping a large input whose file an in-place conversion has just
// replaced takes milliseconds: in tree mode the writers' unmaps held up
// every worker's next map (a tree of /usr/bin and /usr/lib kept one of
// two CPUs idle).
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
