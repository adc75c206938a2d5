package translate

import (
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// translateFile is New, PLTs and Functions, for the tests.
func translateFile(in Input, src Source, o Options, emit func(*sframe.Function) error) (*Result, error) {
	t, err := New(in, o)
	if err != nil {
		return nil, err
	}
	return translateAllOf(t, src, emit)
}

// translateAllOf is t's PLTs, then its Functions over src, their Results
// added: a whole file on one goroutine.
func translateAllOf(t *Translator, src Source, emit func(*sframe.Function) error) (*Result, error) {
	res, err := t.PLTs(emit)
	if err != nil {
		return nil, err
	}
	fres, err := t.Functions(src, emit)
	if err != nil {
		return nil, err
	}
	res.Add(fres)
	return res, nil
}

// openCFI opens f's call-frame information as a conversion does.
func openCFI(t testing.TB, f *elfread.File) *cfi.File {
	t.Helper()
	cf, err := cfi.Open(f.ELF)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

// ehFrameELF is an ELF64 executable of in's machine and byte order whose
// only section is an .eh_frame at addr holding data: what the call-frame
// bytes of a fuzz input need to be opened as a file's.
func ehFrameELF(in Input, data []byte, addr uint64) []byte {
	o := in.Order
	const ehsize, shsize = 64, 64
	shstrtab := []byte("\x00.eh_frame\x00.shstrtab\x00")
	strOff := uint64(ehsize + len(data))
	shOff := (strOff + uint64(len(shstrtab)) + 7) &^ 7
	b := make([]byte, shOff+3*shsize)
	copy(b, "\x7fELF")
	b[elf.EI_CLASS], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.EV_CURRENT)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	if o == binary.BigEndian {
		b[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	o.PutUint16(b[16:], uint16(elf.ET_EXEC))
	o.PutUint16(b[18:], uint16(in.Machine))
	o.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	o.PutUint64(b[40:], shOff) // e_shoff
	o.PutUint16(b[52:], ehsize)
	o.PutUint16(b[58:], shsize)
	o.PutUint16(b[60:], 3) // e_shnum: null, .eh_frame, .shstrtab
	o.PutUint16(b[62:], 2) // e_shstrndx
	copy(b[ehsize:], data)
	copy(b[strOff:], shstrtab)
	sh := func(i int, name uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64) {
		h := b[shOff+uint64(i)*shsize:]
		o.PutUint32(h[0:], name)
		o.PutUint32(h[4:], uint32(typ))
		o.PutUint64(h[8:], uint64(flags))
		o.PutUint64(h[16:], addr)
		o.PutUint64(h[24:], off)
		o.PutUint64(h[32:], size)
		o.PutUint64(h[48:], 1) // sh_addralign
	}
	sh(1, 1, elf.SHT_PROGBITS, elf.SHF_ALLOC, addr, ehsize, uint64(len(data)))
	sh(2, 11, elf.SHT_STRTAB, 0, 0, strOff, uint64(len(shstrtab)))
	return b
}

// skippedCount is the number of functions r skipped: its diagnostics
// with Skipped set.
func skippedCount(r *Result) int {
	n := 0
	for _, d := range r.Diags {
		if d.Skipped {
			n++
		}
	}
	return n
}
