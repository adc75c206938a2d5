package elfwrite

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// synth describes a small synthetic linked ELF64 file.
type synth struct {
	be        bool
	machine   uint16
	typ       uint16
	ptPhdr    bool // emit PT_PHDR
	sections  bool // emit section headers
	sfSection bool // emit an old .sframe section
	sfSegment bool // emit an old PT_GNU_SFRAME
	slack     int  // zero bytes left after the program header table
	align     uint64
	bss       uint64 // memory size of the data segment (default 0x100)
}

// build lays out: ELF header, program headers, slack, code (0xcc), then at
// the next page data (0xdd) with a bss tail, an old sframe blob, the
// section name table and the section headers.
func (s synth) build() []byte {
	var bo binary.ByteOrder = binary.LittleEndian
	if s.be {
		bo = binary.BigEndian
	}
	if s.machine == 0 {
		s.machine = emX86_64
	}
	if s.typ == 0 {
		s.typ = etExec
	}
	if s.align == 0 {
		s.align = 0x1000
	}
	if s.bss == 0 {
		s.bss = 0x100
	}
	base := uint64(0x400000)
	nph := 3 // two PT_LOADs and PT_GNU_STACK
	if s.ptPhdr {
		nph++
	}
	if s.sfSegment {
		nph++
	}
	phEnd := uint64(ehdrSize + nph*phdrSize)
	codeOff := phEnd + uint64(s.slack)
	codeSize := uint64(0x40)
	dataOff := s.align
	dataSize := uint64(0x10)
	sfOff := dataOff + dataSize
	sfSize := uint64(8)
	strOff := sfOff + sfSize
	names := "\x00.text\x00.data\x00.shstrtab\x00"
	if s.sfSection {
		names += ".sframe\x00"
	}
	shOff := (strOff + uint64(len(names)) + 7) &^ 7
	nsh := 4
	if s.sfSection {
		nsh++
	}
	size := strOff + uint64(len(names))
	if s.sections {
		size = shOff + uint64(nsh*shdrSize)
	}
	b := make([]byte, size)
	copy(b, "\x7fELF")
	b[4], b[5], b[6] = 2, 1, 1
	if s.be {
		b[5] = 2
	}
	bo.PutUint16(b[16:], s.typ)
	bo.PutUint16(b[18:], s.machine)
	bo.PutUint32(b[20:], 1)
	bo.PutUint64(b[24:], base+codeOff)
	bo.PutUint64(b[32:], ehdrSize)
	bo.PutUint16(b[52:], ehdrSize)
	bo.PutUint16(b[54:], phdrSize)
	bo.PutUint16(b[56:], uint16(nph))
	if s.sections {
		bo.PutUint64(b[40:], shOff)
		bo.PutUint16(b[58:], shdrSize)
		bo.PutUint16(b[60:], uint16(nsh))
		bo.PutUint16(b[62:], 3)
	}
	var phs []phdr
	if s.ptPhdr {
		phs = append(phs, phdr{typ: ptPhdr, flags: pfR, off: ehdrSize, vaddr: base + ehdrSize, paddr: base + ehdrSize, filesz: phEnd - ehdrSize, memsz: phEnd - ehdrSize, align: 8})
	}
	phs = append(phs,
		phdr{typ: ptLoad, flags: pfR | 1, off: 0, vaddr: base, paddr: base, filesz: codeOff + codeSize, memsz: codeOff + codeSize, align: s.align},
		phdr{typ: ptLoad, flags: pfR | 2, off: dataOff, vaddr: base + 2*s.align, paddr: base + 2*s.align, filesz: dataSize + sfSize, memsz: s.bss, align: s.align},
		phdr{typ: 0x6474e551, flags: pfR | 2, align: 16})
	if s.sfSegment {
		phs = append(phs, phdr{typ: ptGNUSFrame, flags: pfR, off: sfOff, vaddr: base + 2*s.align + dataSize, paddr: base + 2*s.align + dataSize, filesz: sfSize, memsz: sfSize, align: 8})
	}
	for i, p := range phs {
		putPhdr(bo, b[ehdrSize+i*phdrSize:], p)
	}
	fill(b[codeOff:codeOff+codeSize], 0xcc)
	fill(b[dataOff:dataOff+dataSize], 0xdd)
	fill(b[sfOff:sfOff+sfSize], 0xee)
	copy(b[strOff:], names)
	if s.sections {
		shs := []shdr{{},
			{name: 1, typ: 1, flags: 6, addr: base + codeOff, off: codeOff, size: codeSize, addralign: 16},
			{name: 7, typ: 1, flags: 3, addr: base + 2*s.align, off: dataOff, size: dataSize, addralign: 8},
			{name: 13, typ: 3, off: strOff, size: uint64(len(names)), addralign: 1}}
		if s.sfSection {
			shs = append(shs, shdr{name: 23, typ: 1, flags: shfAlloc, addr: base + 2*s.align + dataSize, off: sfOff, size: sfSize, addralign: 8})
		}
		for i, sh := range shs {
			putShdr(bo, b[shOff+uint64(i)*shdrSize:], sh)
		}
	}
	return b
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

func TestInsertSynthetic(t *testing.T) {
	tests := []struct {
		name        string
		s           synth
		opts        Options
		wantMoved   bool
		wantCompact bool // segment right after the input
		wantErr     error
	}{
		{name: "exec/phdr/sections/LE", s: synth{ptPhdr: true, sections: true}, wantMoved: true},
		{name: "exec/phdr/sections/BE", s: synth{be: true, ptPhdr: true, sections: true}, wantMoved: true},
		{name: "dyn/nophdr/sections", s: synth{typ: etDyn, sections: true}, wantMoved: true},
		{name: "exec/phdr/nosections", s: synth{ptPhdr: true}, wantMoved: true},
		{name: "BE/nophdr/nosections/aarch64", s: synth{be: true, machine: emAArch64, align: 0x10000}, wantMoved: true},
		{name: "slack but no sections: cannot prove it unused", s: synth{ptPhdr: true, slack: 2 * phdrSize}, wantMoved: true},
		{name: "slack with sections: grows in place", s: synth{ptPhdr: true, sections: true, slack: 2 * phdrSize}},
		{name: "slack too small", s: synth{ptPhdr: true, sections: true, slack: 2*phdrSize - 8}, wantMoved: true},
		{name: "old section refused", s: synth{sections: true, sfSection: true}, wantErr: ErrHasSFrame},
		{name: "old segment refused", s: synth{sfSegment: true}, wantErr: ErrHasSFrame},
		{name: "old section replaced", s: synth{ptPhdr: true, sections: true, sfSection: true}, opts: Options{Replace: true}, wantMoved: true},
		{name: "old section+segment replaced BE", s: synth{be: true, ptPhdr: true, sections: true, sfSection: true, sfSegment: true}, opts: Options{Replace: true}, wantMoved: true},
		{name: "old segment replaced, no sections", s: synth{sfSegment: true}, opts: Options{Replace: true}, wantMoved: true},
		{name: "compact placement", s: synth{ptPhdr: true, sections: true}, opts: Options{MaxPad: -1}, wantMoved: true},
		{name: "huge bss: padding over MaxPad, compact", s: synth{ptPhdr: true, sections: true, bss: 8 << 20}, wantMoved: true, wantCompact: true},
		{name: "huge bss within a larger MaxPad", s: synth{ptPhdr: true, sections: true, bss: 8 << 20}, opts: Options{MaxPad: 9 << 20}, wantMoved: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// These inputs have code right after the program header
			// table: only the fragile layout converts them.
			tc.opts.AppendSegment = true
			in := tc.s.build()
			orig := bytes.Clone(in)
			data := []byte("\xe2\xde\x03\x00sframe-bytes-for-test!!")
			p, err := NewPlan(in, uint64(len(data)), tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("NewPlan error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewPlan: %v", err)
			}
			if p.PHDRMoved != tc.wantMoved {
				t.Errorf("PHDRMoved = %v, want %v", p.PHDRMoved, tc.wantMoved)
			}
			out, err := p.Bytes(data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(in, orig) {
				t.Fatal("input modified")
			}
			checkOutput(t, in, out, p, data)
			if tc.wantMoved && (tc.opts.MaxPad < 0 || tc.wantCompact) != (p.SegmentOffset == (uint64(len(in))+7)&^7) {
				t.Errorf("segment at %#x, input ends at %#x; want compact placement: %v", p.SegmentOffset, len(in), tc.opts.MaxPad < 0 || tc.wantCompact)
			}
			if tc.wantMoved && tc.opts.MaxPad >= 0 && !tc.wantCompact {
				// Default placement keeps "first load base + e_phoff" == PT_PHDR vaddr.
				fl := p.phs[0]
				for _, ph := range p.phs {
					if ph.typ == ptLoad {
						fl = ph
						break
					}
				}
				if got := fl.vaddr - fl.off + p.phoff; got != p.SegmentAddr {
					t.Errorf("first-load base + e_phoff = %#x, table mapped at %#x", got, p.SegmentAddr)
				}
			}
			// Replacing again must work and converge on the same layout.
			p2, err := NewPlan(out, uint64(len(data)), Options{Replace: true, AppendSegment: true})
			if err != nil {
				t.Fatalf("re-plan on output: %v", err)
			}
			out2, err := p2.Bytes(data)
			if err != nil {
				t.Fatal(err)
			}
			checkOutput(t, out, out2, p2, data)
		})
	}
}

func TestSizeMismatch(t *testing.T) {
	p, err := NewPlan(synth{sections: true}.build(), 16, Options{AppendSegment: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Bytes(make([]byte, 15)); !errors.Is(err, ErrSizeMismatch) {
		t.Errorf("Bytes with 15 bytes for a 16-byte plan: %v, want ErrSizeMismatch", err)
	}
}

func TestInsertCallback(t *testing.T) {
	in := synth{ptPhdr: true, sections: true}.build()
	var addrs []uint64
	out, err := Insert(in, Options{AppendSegment: true}, func(addr uint64) ([]byte, error) {
		addrs = append(addrs, addr)
		b := make([]byte, 40)
		binary.LittleEndian.PutUint64(b, addr)
		return b, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(in, 40, Options{AppendSegment: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0] != p.Addr {
		t.Errorf("encode called with %#x, want once with %#x", addrs, p.Addr)
	}
	if got := binary.LittleEndian.Uint64(out[p.Offset:]); got != p.Addr {
		t.Errorf("encoded address %#x at the section, want %#x", got, p.Addr)
	}
	wantErr := errors.New("encoder failed")
	if _, err := Insert(in, Options{AppendSegment: true}, func(uint64) ([]byte, error) { return nil, wantErr }); !errors.Is(err, wantErr) {
		t.Errorf("encoder error not passed on: %v", err)
	}
}

func TestRejects(t *testing.T) {
	good := synth{ptPhdr: true, sections: true}.build()
	le := binary.LittleEndian
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	var fe *FormatError
	var ue *UnsupportedError
	tests := []struct {
		name string
		in   []byte
		want any // pointer to the error type expected
	}{
		{"empty", nil, &fe},
		{"not ELF", []byte("#!/bin/sh\necho hi\n"), &fe},
		{"truncated ident", []byte("\x7fELF\x02\x01"), &fe},
		{"ELF32", mod(func(b []byte) []byte { b[4] = 1; return b }), &ue},
		{"bad class", mod(func(b []byte) []byte { b[4] = 3; return b }), &fe},
		{"bad data", mod(func(b []byte) []byte { b[5] = 0; return b }), &fe},
		{"truncated header", good[:40], &fe},
		{"ET_REL", mod(func(b []byte) []byte { le.PutUint16(b[16:], 1); return b }), &ue},
		{"ET_CORE", mod(func(b []byte) []byte { le.PutUint16(b[16:], 4); return b }), &ue},
		{"riscv", mod(func(b []byte) []byte { le.PutUint16(b[18:], 243); return b }), &ue},
		{"phoff past EOF", mod(func(b []byte) []byte { le.PutUint64(b[32:], uint64(len(b))-10); return b }), &fe},
		{"phoff huge", mod(func(b []byte) []byte { le.PutUint64(b[32:], ^uint64(0)-3); return b }), &fe},
		{"phoff in ELF header", mod(func(b []byte) []byte { le.PutUint64(b[32:], 8); return b }), &fe},
		{"shoff in ELF header", mod(func(b []byte) []byte { le.PutUint64(b[40:], 8); return b }), &fe},
		{"phnum huge", mod(func(b []byte) []byte { le.PutUint16(b[56:], 0xfffe); return b }), &fe},
		{"no phdrs", mod(func(b []byte) []byte { le.PutUint16(b[56:], 0); return b }), &fe},
		{"bad phentsize", mod(func(b []byte) []byte { le.PutUint16(b[54:], 32); return b }), &fe},
		{"shoff past EOF", mod(func(b []byte) []byte { le.PutUint64(b[40:], uint64(len(b))); return b }), &fe},
		{"shnum huge", mod(func(b []byte) []byte { le.PutUint16(b[60:], 0xfeff); return b }), &fe},
		{"shstrndx out of range", mod(func(b []byte) []byte { le.PutUint16(b[62:], 9); return b }), &fe},
		{"segment past EOF", mod(func(b []byte) []byte { le.PutUint64(b[ehdrSize+phdrSize+32:], 1<<40); return b }), &fe},
		{"filesz > memsz", mod(func(b []byte) []byte { le.PutUint64(b[ehdrSize+2*phdrSize+40:], 1); return b }), &fe},
		{"section past EOF", mod(func(b []byte) []byte {
			shoff := le.Uint64(b[40:])
			le.PutUint64(b[shoff+shdrSize+32:], 1<<40)
			return b
		}), &fe},
		{"truncated file", good[:len(good)-1], &fe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPlan(tc.in, 8, Options{})
			if err == nil {
				t.Fatal("NewPlan accepted bad input")
			}
			if !errors.As(err, tc.want) {
				t.Errorf("error %q (%T) is not of the expected type %T", err, err, tc.want)
			}
		})
	}
}

// TestExtendedSectionNumbering adds the section that makes e_shnum
// overflow into section 0's sh_size (SHN_LORESERVE rule), and checks an
// input already using that form.
func TestExtendedSectionNumbering(t *testing.T) {
	base := synth{ptPhdr: true, sections: true}.build()
	le := binary.LittleEndian
	oldShoff := le.Uint64(base[40:])
	for _, nsec := range []int{shnLoReserv - 1, shnLoReserv + 5} {
		in := bytes.Clone(base)
		shoff := uint64(len(in))
		in = append(in, make([]byte, nsec*shdrSize)...)
		copy(in[shoff:], base[oldShoff:oldShoff+4*shdrSize])
		le.PutUint64(in[40:], shoff)
		if nsec >= shnLoReserv {
			le.PutUint16(in[60:], 0)
			le.PutUint64(in[shoff+32:], uint64(nsec))
		} else {
			le.PutUint16(in[60:], uint16(nsec))
		}
		data := make([]byte, 28)
		p, err := NewPlan(in, uint64(len(data)), Options{AppendSegment: true})
		if err != nil {
			t.Fatalf("%d sections: %v", nsec, err)
		}
		out, err := p.Bytes(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := le.Uint16(out[60:]); got != 0 {
			t.Errorf("%d+1 sections: e_shnum %d, want 0 (extended)", nsec, got)
		}
		if got := le.Uint64(out[le.Uint64(out[40:])+32:]); got != uint64(nsec+1) {
			t.Errorf("%d+1 sections: section 0 sh_size %d", nsec, got)
		}
		checkOutput(t, in, out, p, data)
	}
}
