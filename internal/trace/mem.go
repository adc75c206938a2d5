package trace

import (
	"encoding/binary"
	"time"
)

// pageMem reads a process's memory with process_vm_readv, 16 KiB from the
// page of the address on (stacks are read upwards from the stack pointer;
// a read stops at the end of the mapping), keeping the last few chunks
// read; Reset forgets them (the process ran since). Each system call costs
// microseconds, far more than a step.
type pageMem struct {
	pid      int
	pages    [4]memPage
	next     int
	Reads    int           // system calls made
	Fails    int           // reads that failed
	ReadTime time.Duration // in those system calls
	// read, when set, replaces process_vm_readv (tests, benchmarks): it
	// fills dst from addr on and returns the bytes read, <= 0 on failure.
	read func(dst []byte, addr uint64) int
}

type memPage struct {
	addr  uint64 // page address; 0: empty slot
	n     int    // bytes read (a page, or less at the end of a mapping)
	bytes [chunkSize]byte
}

const (
	pageSize  = 4096
	chunkSize = 4 * pageSize
)

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
	p := m.page(addr)
	if p == nil {
		return 0, false
	}
	off := int(addr - p.addr)
	if off+8 > p.n {
		return 0, false
	}
	return binary.LittleEndian.Uint64(p.bytes[off:]), true
}

func (m *pageMem) byteAt(addr uint64) (byte, bool) {
	p := m.page(addr)
	if p == nil {
		return 0, false
	}
	off := int(addr - p.addr)
	if off >= p.n {
		return 0, false
	}
	return p.bytes[off], true
}

// page returns the chunk holding addr, reading it when no cached chunk
// does.
func (m *pageMem) page(addr uint64) *memPage {
	for i := range m.pages {
		p := &m.pages[i]
		if p.addr != 0 && addr >= p.addr && addr-p.addr < uint64(p.n) {
			return p
		}
	}
	base := addr &^ (pageSize - 1)
	if base == 0 {
		return nil
	}
	p := &m.pages[m.next]
	m.next = (m.next + 1) % len(m.pages)
	p.addr = 0
	m.Reads++
	t0 := time.Now()
	var n int
	var err error
	if m.read != nil {
		n = m.read(p.bytes[:], base)
	} else {
		n, err = processRead(m.pid, p.bytes[:], base)
	}
	m.ReadTime += time.Since(t0)
	if err != nil || n <= 0 {
		m.Fails++
		return nil
	}
	p.addr, p.n = base, n
	return p
}
