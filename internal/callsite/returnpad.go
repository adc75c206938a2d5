package callsite

import (
	"debug/elf"
	"os"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// ReturnPad makes a function whose last instruction is a call, followed
// by padding, cover one byte more: the call's return address. A reader
// that looks a caller's return address up as it is, not minus one (the
// Linux kernel's user unwinder), finds no function there and falls back
// to the frame pointer; with the byte covered it finds the rule in effect
// at the call, the caller's. Compilers end a function with a call when
// the callee does not return (abort, exit, __stack_chk_fail): Debian 12's
// libc has 884 such functions followed by padding, libLLVM-14 33,785.
// Readers that look up the return address minus one never reach the
// byte, and nothing runs there. A function followed directly by another
// (a cold part, say) cannot be helped: verify --for kernel reports it.
type ReturnPad struct {
	code    *Code
	entries []cfi.Entry // sorted by start (cfi.SortEntries)
}

// NewReturnPad returns the ReturnPad of the ELF file ef whose contents
// are data and whose CFI functions are entries, sorted by start.
func NewReturnPad(ef *elf.File, data []byte, entries []cfi.Entry) *ReturnPad {
	return &ReturnPad{code: New(ef, data), entries: entries}
}

// Wrap returns emit with the rule applied first. Each Wrap may be used by
// its own goroutine; a nil ReturnPad returns emit as it is.
func (r *ReturnPad) Wrap(emit func(*sframe.Function) error) func(*sframe.Function) error {
	if r == nil {
		return emit
	}
	var passed uint64 // code below is released; 0 before the first function
	return func(fn *sframe.Function) error {
		if r.extend(fn) {
			fn.Size++
		}
		// The functions come in address order: the code below this one
		// has been read. It is released from page boundaries, which
		// Release rounds inward to, so that no page is left between two.
		at := fn.Start &^ (pageSize - 1)
		switch {
		case passed == 0:
			passed = at
		case at >= passed+releaseWindow:
			r.code.Release(passed, at)
			passed = at
		}
		return emit(fn)
	}
}

// releaseWindow is how much code a Wrap reads past before it gives those
// pages back (Code.Release). A variable for the tests.
var releaseWindow = uint64(1 << 20)

var pageSize = uint64(os.Getpagesize())

// Release gives back the pages of the code of entries' functions, sorted
// by start, and of the bytes after them that the check reads (Code.Release):
// called with the functions of a Wrap once it is done, it drops what that
// Wrap read last. Reading a mapped file's code would otherwise make all
// of its code pages count in the process's RSS (libLLVM-14: 86 MB
// instead of 37), though they are clean pages of the page cache. Release
// of a nil ReturnPad does nothing.
func (r *ReturnPad) Release(entries []cfi.Entry) {
	if r == nil || len(entries) == 0 {
		return
	}
	hi := uint64(0)
	for _, e := range entries {
		hi = max(hi, e.Start+e.Size)
	}
	r.code.Release(entries[0].Start, hi+16) // and the padding read after
}

// extend says whether fn ends with a call followed by padding that no
// function's CFI covers.
func (r *ReturnPad) extend(fn *sframe.Function) bool {
	if fn.PCType != sframe.PCInc || fn.Size == 0 || fn.Size == ^uint32(0) || len(fn.Rows) == 0 {
		return false
	}
	end := fn.Start + uint64(fn.Size)
	return r.code.EndsWithCall(fn.Start, end, fn.Start+uint64(fn.Rows[len(fn.Rows)-1].Start)) &&
		!r.covered(end) && r.code.PaddingAt(end)
}

// covered says whether some CFI entry covers pc (entries that start at
// or below it, the nearest few: CFI functions seldom nest).
func (r *ReturnPad) covered(pc uint64) bool {
	es := r.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].Start > pc })
	for j := i - 1; j >= 0 && j >= i-4; j-- {
		if pc-es[j].Start < es[j].Size {
			return true
		}
	}
	return false
}
