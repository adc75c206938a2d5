package trace

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// pageMem reads a process's memory with process_vm_readv, a page at a
// time, keeping the last few pages read; Reset forgets them (the process
// ran since).
type pageMem struct {
	pid   int
	pages [8]memPage
	next  int
	Reads int // system calls made
	Fails int // reads that failed
}

type memPage struct {
	addr  uint64 // page address; 0: empty slot
	n     int    // bytes read (a page, or less at the end of a mapping)
	bytes [pageSize]byte
}

const pageSize = 4096

func (m *pageMem) Reset() {
	for i := range m.pages {
		m.pages[i].addr = 0
	}
}

// ReadWord implements unwind.Memory (little-endian, x86-64).
func (m *pageMem) ReadWord(addr uint64) (uint64, bool) {
	if addr&7 != 0 || addr == 0 {
		// Unaligned stack slots do not occur on x86-64 stacks walked by
		// SFrame; read the bytes one page-safe piece at a time.
		var b [8]byte
		for i := range b {
			v, ok := m.byteAt(addr + uint64(i))
			if !ok {
				return 0, false
			}
			b[i] = v
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	p := m.page(addr &^ (pageSize - 1))
	off := int(addr & (pageSize - 1))
	if p == nil || off+8 > p.n {
		return 0, false
	}
	return binary.LittleEndian.Uint64(p.bytes[off:]), true
}

func (m *pageMem) byteAt(addr uint64) (byte, bool) {
	p := m.page(addr &^ (pageSize - 1))
	off := int(addr & (pageSize - 1))
	if p == nil || off >= p.n {
		return 0, false
	}
	return p.bytes[off], true
}

func (m *pageMem) page(base uint64) *memPage {
	if base == 0 {
		return nil
	}
	for i := range m.pages {
		if m.pages[i].addr == base {
			return &m.pages[i]
		}
	}
	p := &m.pages[m.next]
	m.next = (m.next + 1) % len(m.pages)
	p.addr = 0
	local := []unix.Iovec{{Base: &p.bytes[0], Len: pageSize}}
	remote := []unix.RemoteIovec{{Base: uintptr(base), Len: pageSize}}
	m.Reads++
	n, err := unix.ProcessVMReadv(m.pid, local, remote, 0)
	if err != nil || n <= 0 {
		m.Fails++
		return nil
	}
	p.addr, p.n = base, n
	return p
}
