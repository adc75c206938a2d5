//go:build linux

package trace

import (
	"encoding/binary"
	"os"
	"runtime"
	"testing"
	"unsafe"
)

func TestPageMem(t *testing.T) {
	buf := make([]byte, 3*chunkSize)
	for i := 0; i < len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], uint64(i)*3+1)
	}
	base := uint64(uintptr(unsafe.Pointer(&buf[0])))
	m := &pageMem{pid: os.Getpid()}
	for _, off := range []uint64{0, 8, 4096, chunkSize - 8, chunkSize, 2*chunkSize + 8, 8} {
		addr := (base + 7) &^ 7
		addr += off
		want := binary.LittleEndian.Uint64(buf[addr-base:])
		if v, ok := m.ReadWord(addr); !ok || v != want {
			t.Errorf("word at +%#x: %#x %v, want %#x", off, v, ok, want)
		}
	}
	// Unaligned reads go byte by byte.
	if v, ok := m.ReadWord(base + 3); !ok || v != binary.LittleEndian.Uint64(buf[3:]) {
		t.Errorf("unaligned word: %#x %v", v, ok)
	}
	if m.Reads > 4 {
		t.Errorf("%d reads for three chunks", m.Reads)
	}
	for _, addr := range []uint64{0, 8, 0x1000, 1 << 62} {
		if _, ok := m.ReadWord(addr); ok {
			t.Errorf("read at %#x succeeded", addr)
		}
	}
	m.Reset()
	r := m.Reads
	m.ReadWord((base + 7) &^ 7)
	if m.Reads != r+1 {
		t.Errorf("Reset kept the cache")
	}
	runtime.KeepAlive(buf)
}
