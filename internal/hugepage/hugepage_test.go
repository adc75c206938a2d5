//go:build linux

package hugepage

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestAdvise: advice leaves the buffer's contents alone, and on Linux the
// aligned part of a large buffer lies in a mapping marked for huge pages
// (the "hg" flag of /proc/self/smaps) once enabled, not before (unless
// the kernel has no transparent huge pages and refuses the advice).
// Both buffers are mappings of their own: in Go's heap the probe's advice
// marked the arena that the test's buffer could then land in (seen in CI).
func TestAdvise(t *testing.T) {
	probe := mapped(t, 3*Size)
	if err := advise(probe); err != nil {
		t.Skipf("the kernel refuses MADV_HUGEPAGE: %v", err)
	}
	on.Store(false)
	t.Cleanup(func() { on.Store(false) })
	b := mapped(t, 3*Size)
	for i := range b {
		b[i] = byte(i)
	}
	Advise(b) // off: nothing
	if marked(t, b) {
		t.Fatal("advised before Enable")
	}
	Enable()
	Advise(b)
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d changed", i)
		}
	}
	if _, err := os.Stat("/proc/self/smaps"); err == nil && !marked(t, b) {
		t.Error("no mapping marked for huge pages after Advise")
	}
	Advise(make([]byte, 100)) // small: nothing to do
}

// mapped returns n bytes of a new anonymous mapping, unmapped when the
// test ends.
func mapped(t *testing.T, n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(b) })
	return b
}

// marked reports whether the mapping holding b's aligned middle has the
// "hg" VmFlag.
func marked(t *testing.T, b []byte) bool {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	mid := (p + Size - 1) &^ (Size - 1)
	var in bool
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			var lo, hi uintptr
			r := strings.SplitN(f[0], "-", 2)
			lo, hi = parseHex(r[0]), parseHex(r[1])
			in = lo <= mid && mid < hi
			continue
		}
		if in && len(f) > 0 && f[0] == "VmFlags:" {
			for _, fl := range f[1:] {
				if fl == "hg" {
					return true
				}
			}
			return false
		}
	}
	return false
}

func parseHex(s string) uintptr {
	var v uintptr
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uintptr(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uintptr(c-'a'+10)
		}
	}
	return v
}
