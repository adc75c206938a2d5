// Command genfdes writes an x86-64 ELF executable with N tiny functions,
// each with its own FDE (three rows: CFA rsp+8, rsp+16 with rbp saved,
// rbp+16), to measure conversion, verify, report and dump on a file with
// millions of FDEs. The file is never run; it only has to be well formed.
//
//	go run ./bench/genfdes -n 2100000 -o /tmp/many-fdes
//
// With -empty-sframe the file also gets a .sframe section (and
// PT_GNU_SFRAME) that describes no function, placed as cfi2sframe places
// one: the input on which verify finds every CFI function missing.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

const (
	base     = 0x400000
	textOff  = 0x1000
	funcSize = 16
)

func main() {
	n := flag.Int("n", 2100000, "number of functions (FDEs)")
	out := flag.String("o", "many-fdes", "output file")
	empty := flag.Bool("empty-sframe", false, "add a .sframe section without functions")
	flag.Parse()
	if *n <= 0 || *n > 1<<26 {
		fmt.Fprintln(os.Stderr, "genfdes: -n must be in 1..67108864")
		os.Exit(2)
	}
	b := build(*n)
	if *empty {
		var err error
		if b, err = emptySFrame(b); err != nil {
			fmt.Fprintln(os.Stderr, "genfdes:", err)
			os.Exit(1)
		}
	}
	if err := os.WriteFile(*out, b, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "genfdes:", err)
		os.Exit(1)
	}
}

// emptySFrame adds to the file an SFrame V3 section with no function.
func emptySFrame(in []byte) ([]byte, error) {
	ra := int8(arch.AMD64.FixedRAOffset())
	o := sframe.Options{Version: sframe.Version3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, PCRel: true, Sort: true, CFAFixedRA: ra}
	return elfwrite.Insert(in, elfwrite.Options{}, func(addr uint64) ([]byte, error) {
		o.Addr = addr
		return sframe.Encode(nil, o)
	})
}

func align(x, a int) int { return (x + a - 1) / a * a }

func build(n int) []byte {
	le := binary.LittleEndian
	// push %rbp; mov %rsp,%rbp; pop %rbp; ret; then int3 padding.
	fn := []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}
	textLen := n * funcSize
	ehOff := align(textOff+textLen, 8)

	var eh []byte
	// CIE: "zR", code align 1, data align -8, RA r16, FDE pointers
	// pcrel|sdata4; CFA rsp+8, rip at CFA-8.
	cie := []byte{0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b, 0x0c, 7, 8, 0x90, 1}
	for (len(cie)+4)%8 != 0 {
		cie = append(cie, 0) // DW_CFA_nop
	}
	eh = le.AppendUint32(eh, uint32(len(cie)))
	eh = append(eh, cie...)
	// FDE program: advance 1; CFA offset 16; rbp at CFA-16; advance 3;
	// CFA register rbp.
	prog := []byte{0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06}
	body := 4 + 4 + 4 + 1 + len(prog)
	pad := align(4+body, 4) - 4 - body
	for i := 0; i < n; i++ {
		at := len(eh)
		eh = le.AppendUint32(eh, uint32(body+pad))
		eh = le.AppendUint32(eh, uint32(at+4)) // CIE pointer: back to offset 0
		field := base + ehOff + len(eh)
		eh = le.AppendUint32(eh, uint32(int32(base+textOff+i*funcSize-field)))
		eh = le.AppendUint32(eh, funcSize)
		eh = append(eh, 0) // augmentation data length
		eh = append(eh, prog...)
		eh = append(eh, make([]byte, pad)...)
	}
	eh = append(eh, 0, 0, 0, 0) // terminator

	shstr := []byte("\x00.text\x00.eh_frame\x00.shstrtab\x00")
	strOff := ehOff + len(eh)
	shOff := align(strOff+len(shstr), 8)
	size := shOff + 4*64
	b := make([]byte, size)

	// ELF header.
	copy(b, []byte{0x7f, 'E', 'L', 'F', 2, 1, 1})
	le.PutUint16(b[16:], 2)  // ET_EXEC
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[24:], base+textOff)
	le.PutUint64(b[32:], 64)
	le.PutUint64(b[40:], uint64(shOff))
	le.PutUint16(b[52:], 64)
	le.PutUint16(b[54:], 56)
	le.PutUint16(b[56:], 1)
	le.PutUint16(b[58:], 64)
	le.PutUint16(b[60:], 4)
	le.PutUint16(b[62:], 3)

	// PT_LOAD over everything up to the end of .eh_frame, R+X.
	p := b[64:]
	le.PutUint32(p[0:], 1)
	le.PutUint32(p[4:], 5)
	le.PutUint64(p[16:], base)
	le.PutUint64(p[24:], base)
	le.PutUint64(p[32:], uint64(strOff))
	le.PutUint64(p[40:], uint64(strOff))
	le.PutUint64(p[48:], 0x1000)

	for i := 0; i < n; i++ {
		f := b[textOff+i*funcSize : textOff+(i+1)*funcSize]
		copy(f, fn)
		for k := len(fn); k < funcSize; k++ {
			f[k] = 0xcc
		}
	}
	copy(b[ehOff:], eh)
	copy(b[strOff:], shstr)

	sh := func(i int, name, typ uint32, flags, addr, off, size, align uint64) {
		s := b[shOff+i*64:]
		le.PutUint32(s[0:], name)
		le.PutUint32(s[4:], typ)
		le.PutUint64(s[8:], flags)
		le.PutUint64(s[16:], addr)
		le.PutUint64(s[24:], off)
		le.PutUint64(s[32:], size)
		le.PutUint64(s[48:], align)
	}
	const alloc, exec = 2, 4
	sh(1, 1, 1, alloc|exec, base+textOff, textOff, uint64(textLen), 16)
	sh(2, 7, 1, alloc, uint64(base+ehOff), uint64(ehOff), uint64(len(eh)), 8)
	sh(3, 17, 3, 0, 0, uint64(strOff), uint64(len(shstr)), 1)
	return b
}
