//go:build !linux

package elfwrite

import "os"

// reserve does nothing here (see reserve_linux.go).
func reserve(f *os.File, off, size uint64) {}
