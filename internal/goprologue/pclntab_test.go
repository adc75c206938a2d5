package goprologue

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// goFunc is one function of a Go binary as the tests need it: its code
// and its pcsp rows, read from .gopclntab.
type goFunc struct {
	name       string
	entry, end uint64
	code       []byte
	sp         []SPRange
	asm        bool // written in assembly (funcFlag ASM)
	spwrite    bool // writes SP other than by constants (funcFlag SPWRITE)
}

// The flags of a _func, the same from Go 1.18 to 1.26.
const (
	flagSPWrite = 1 << 1
	flagASM     = 1 << 2
)

// readGoFuncs reads every function of a little-endian 64-bit Go ELF
// binary built by Go 1.18 or later: the pclntab header, its function
// table, each _func's pcsp offset and flags, and the code from .text.
func readGoFuncs(f *elf.File) ([]goFunc, error) {
	sec, text := f.Section(".gopclntab"), f.Section(".text")
	if sec == nil || text == nil {
		return nil, errors.New("no .gopclntab or .text")
	}
	d, err := sec.Data()
	if err != nil {
		return nil, err
	}
	td, err := text.Data()
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	magic := le.Uint32(d)
	if (magic != 0xfffffff0 && magic != 0xfffffff1) || d[7] != 8 {
		return nil, fmt.Errorf("pclntab magic %#x, pointer size %d: not Go 1.18+ on 64 bits", magic, d[7])
	}
	quantum := uint64(d[6])
	word := func(i int) uint64 { return le.Uint64(d[8+8*i:]) }
	nfunc, textStart := int(word(0)), word(2)
	if textStart == 0 { // Go 1.26 no longer stores it
		textStart = runtimeText(f, text.Addr)
	}
	names, pctab, ftab := d[word(3):], d[word(6):], d[word(7):]
	// _func: entryOff, nameOff, args, deferreturn, pcsp, ... then funcID
	// and flag at 36 (1.18, 1.19: magic f0) or 40 (startLine added).
	flagAt := 41
	if magic == 0xfffffff0 {
		flagAt = 37
	}
	var out []goFunc
	for i := 0; i < nfunc; i++ {
		entry := textStart + uint64(le.Uint32(ftab[8*i:]))
		end := textStart + uint64(le.Uint32(ftab[8*i+8:]))
		fd := ftab[le.Uint32(ftab[8*i+4:]):]
		if entry < text.Addr || end > text.Addr+text.Size || end <= entry {
			continue
		}
		g := goFunc{
			name:    cString(names[le.Uint32(fd[4:]):]),
			entry:   entry,
			end:     end,
			code:    td[entry-text.Addr : end-text.Addr],
			sp:      pcValues(pctab[le.Uint32(fd[16:]):], entry, quantum),
			asm:     fd[flagAt]&flagASM != 0,
			spwrite: fd[flagAt]&flagSPWrite != 0,
		}
		out = append(out, g)
	}
	return out, nil
}

// runtimeText is the address of runtime.text, where Go's text starts.
func runtimeText(f *elf.File, fallback uint64) uint64 {
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == "runtime.text" {
			return s.Value
		}
	}
	return fallback
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// pcValues decodes a pc-value table: pairs of a zig-zag varint value
// delta (from -1) and a varint PC delta in quanta, ending with a zero
// value delta after the first pair.
func pcValues(b []byte, pc, quantum uint64) []SPRange {
	var out []SPRange
	val := int64(-1)
	for first := true; ; first = false {
		uv, n := binary.Uvarint(b)
		if n <= 0 || (uv == 0 && !first) {
			return out
		}
		b = b[n:]
		val += int64(uv>>1) ^ -int64(uv&1)
		dp, n := binary.Uvarint(b)
		if n <= 0 {
			return out
		}
		b = b[n:]
		end := pc + dp*quantum
		out = append(out, SPRange{Start: pc, End: end, Delta: val})
		pc = end
	}
}
