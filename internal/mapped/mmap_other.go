//go:build !linux

package mapped

import "syscall"

// mmap and munmap are the syscall package's here (see mmap_linux.go).
func mmap(fd int, size int) ([]byte, error) {
	return syscall.Mmap(fd, 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

func munmap(b []byte) error { return syscall.Munmap(b) }

// dontneed does nothing here: the pages stay mapped (see mmap_linux.go).
func dontneed(p, n uintptr) {}
