package codeflow

import (
	"debug/elf"
	"encoding/binary"
	"testing"
)

// FuzzAnalyze: any bytes, as x86-64 or AArch64 code with entries at a
// few offsets, and any bytes as their read-only data (jump tables), are
// walked without a panic, and what is emitted is sound in its shape:
// Funcs inside the code, not overlapping, rows in order from Start; the
// rule check runs over each without a panic.
func FuzzAnalyze(f *testing.F) {
	f.Add(false, []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, []byte{}, uint8(0))
	f.Add(false, []byte{0x53, 0xff, 0x24, 0xc5, 0, 0x20, 0, 0, 0x5b, 0xc3}, []byte{0, 0x10, 0, 0, 0, 0, 0, 0}, uint8(3))
	f.Add(true, []byte{0xfd, 0x7b, 0xbf, 0xa9, 0xfd, 0x03, 0x00, 0x91, 0xfd, 0x7b, 0xc1, 0xa8, 0xc0, 0x03, 0x5f, 0xd6}, []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, arm bool, code, data []byte, entries uint8) {
		if len(code) > 1<<12 {
			return
		}
		const text, ro = 0x1000, 0x2000
		c := &Code{Machine: elf.EM_X86_64, Order: binary.LittleEndian, Text: []Range{{text, code}}}
		if arm {
			c.Machine = elf.EM_AARCH64
		}
		c.Read = func(addr uint64, n int) []byte {
			if addr >= ro && n >= 0 && addr-ro <= uint64(len(data)) && uint64(n) <= uint64(len(data))-(addr-ro) {
				return data[addr-ro : addr-ro+uint64(n)]
			}
			return nil
		}
		c.Entries = []Entry{{Addr: text, Source: FromSymbol}}
		for i := 1; i <= int(entries%8) && len(code) > 0; i++ {
			at := uint64(i*7) % uint64(len(code))
			if at > c.Entries[len(c.Entries)-1].Addr-text {
				c.Entries = append(c.Entries, Entry{Addr: text + at, Source: Source(i % 7)})
			}
		}
		var funcs []Func
		Analyze(c, func(fn Func) { funcs = append(funcs, fn) }, func(Skip) {})
		for i, fn := range funcs {
			if fn.Start < text || fn.End > text+uint64(len(code)) || fn.End <= fn.Start {
				t.Fatalf("func [%#x,%#x) outside the code", fn.Start, fn.End)
			}
			if len(fn.Rows) == 0 || fn.Rows[0].PC != fn.Start {
				t.Fatalf("func [%#x,%#x): no row at its start", fn.Start, fn.End)
			}
			for j := 1; j < len(fn.Rows); j++ {
				if fn.Rows[j].PC <= fn.Rows[j-1].PC || fn.Rows[j].PC >= fn.End {
					t.Fatalf("func [%#x,%#x): rows out of order", fn.Start, fn.End)
				}
			}
			for _, g := range funcs[:i] {
				if fn.Start < g.End && g.Start < fn.End {
					t.Fatalf("funcs [%#x,%#x) and [%#x,%#x) overlap", fn.Start, fn.End, g.Start, g.End)
				}
			}
			rows := fn.Rows
			CheckRules(c, fn.Start, fn.End, func(pc uint64) (Row, bool) {
				for j := len(rows) - 1; j >= 0; j-- {
					if rows[j].PC <= pc {
						return rows[j], pc < fn.End
					}
				}
				return Row{}, false
			})
		}
	})
}
