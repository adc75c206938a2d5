package elfwrite

import (
	"maps"
	"slices"
	"sort"
)

// outSection is one section of the output: its input index (-1 for a new
// .sframe) and its output header.
type outSection struct {
	old int
	h   shdr
}

// sectionHeaders lays out the sections of the output: those of the loaded
// image where they were (head), the block and .sframe in the new segment
// (mid), and the non-loaded ones after it (tail, in their order, with the
// grown name table); then the headers, sorted by offset, and the symbols.
func (l *linker) sectionHeaders(p *Plan) error {
	f := l.f
	head, tail, err := l.headAndTail()
	if err != nil {
		return err
	}
	var mid []outSection
	for _, i := range l.block {
		s := f.shs[i]
		s.off += l.dOff
		s.addr += l.dAddr
		mid = append(mid, outSection{i, s})
	}
	sfSec := shdr{typ: shtGNUSFrame, flags: shfAlloc, addr: l.sfAddr, off: l.sfOff, size: l.size, addralign: 8}
	if l.secIdx >= 0 {
		sfSec.name = f.shs[l.secIdx].name
		mid = append(mid, outSection{l.secIdx, sfSec})
	} else {
		mid = append(mid, outSection{-1, sfSec})
	}
	// The grown name table.
	old := f.shs[f.shstrndx]
	tab := append([]byte(nil), f.in[old.off:old.off+old.size]...)
	if l.secIdx < 0 {
		if len(tab) == 0 || tab[len(tab)-1] != 0 {
			tab = append(tab, 0)
		}
		if uint64(len(tab)) > 0xffffffff {
			return &UnsupportedError{What: "section name table too large"}
		}
		mid[len(mid)-1].h.name = uint32(len(tab))
		tab = append(tab, SectionName+"\x00"...)
	}
	cur := f.placeTail(p, tail, tab, l.segEnd)
	order := append(append(append([]outSection{{0, f.shs[0]}}, head...), mid...), tail...)
	if !slices.ContainsFunc(tail, func(s outSection) bool { return s.old == f.shstrndx }) {
		for k := range order {
			if order[k].old == f.shstrndx {
				order[k].h.off, order[k].h.size = cur, uint64(len(tab))
			}
		}
		p.pieces = append(p.pieces, piece{off: cur, size: uint64(len(tab)), data: tab})
		cur += uint64(len(tab))
	}
	newIdx, identity, err := l.renumber(p, order)
	if err != nil {
		return err
	}
	if err := l.symbols(p, order, newIdx, identity); err != nil {
		return err
	}
	p.shoff, _ = alignUp(cur, 8)
	p.OutputSize = p.shoff + uint64(len(p.shs))*shdrSize
	p.Moved = nil
	for _, i := range l.block {
		p.Moved = append(p.Moved, f.sectionName(f.shs[i]))
	}
	return nil
}

// headAndTail splits the sections that stay (all but the block and an old
// .sframe) into those of the loaded image, which keep their place, and
// the non-loaded ones after it, which follow the new segment. An
// allocated section of no size at the end of the loaded image (gold and
// mold end their data segment with an empty .tm_clone_table) belongs to
// the image.
func (l *linker) headAndTail() (head, tail []outSection, err error) {
	f := l.f
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if l.inBlock[i] || i == l.secIdx {
			continue
		}
		alloc := s.flags&shfAlloc != 0
		// A non-loaded section that starts inside the image but runs
		// past its end moves too: the new segment takes those bytes.
		past := s.off > l.loadEnd || s.off == l.loadEnd && (s.size > 0 || !alloc) ||
			!alloc && s.typ != shtNobits && s.off+s.size > l.loadEnd
		if s.typ != shtNobits && past || s.typ == shtNobits && !alloc && s.off >= l.loadEnd {
			if alloc {
				return nil, nil, layoutErr("allocated section %d (%s) lies outside every PT_LOAD", i, f.sectionName(s))
			}
			tail = append(tail, outSection{i, s})
			continue
		}
		head = append(head, outSection{i, s})
	}
	if len(tail) > maxTailSections {
		return nil, nil, &UnsupportedError{What: "too many sections"}
	}
	sort.SliceStable(tail, func(a, b int) bool { return tail[a].h.off < tail[b].h.off })
	return head, tail, nil
}

// placeTail lays the non-loaded sections from cur on, each at its
// alignment, the name table as tab; it updates their headers and returns
// where they end.
func (f *file) placeTail(p *Plan, tail []outSection, tab []byte, cur uint64) uint64 {
	for k := range tail {
		s := &tail[k].h
		a := max(s.addralign, 1)
		if a&(a-1) != 0 || a > maxBlockAlign {
			a = 8
		}
		cur, _ = alignUp(cur, a)
		if tail[k].old == f.shstrndx {
			s.off, s.size = cur, uint64(len(tab))
			p.pieces = append(p.pieces, piece{off: cur, size: s.size, data: tab})
		} else if s.typ != shtNobits {
			p.pieces = append(p.pieces, piece{off: cur, src: s.off, size: s.size})
			s.off = cur
		} else {
			s.off = cur
			continue
		}
		cur += s.size
	}
	return cur
}

// renumber sets p.shs to the headers in order, with sh_link and sh_info
// renumbered; newIdx maps input indices to output ones, identity says
// whether any but an old .sframe moved.
func (l *linker) renumber(p *Plan, order []outSection) (newIdx []uint32, identity bool, err error) {
	f := l.f
	newIdx = make([]uint32, len(f.shs))
	for k, s := range order {
		if s.old >= 0 {
			newIdx[s.old] = uint32(k)
		}
	}
	identity = true
	for i := range f.shs {
		if newIdx[i] != uint32(i) && i != l.secIdx {
			identity = false
		}
	}
	if !identity && len(order) >= shnLoReserv {
		return nil, false, &UnsupportedError{What: "reordering more than 65279 sections"}
	}
	remap := func(x uint32) uint32 {
		if x == 0 || uint64(x) >= uint64(len(f.shs)) {
			return x
		}
		return newIdx[x]
	}
	p.shs = make([]shdr, len(order))
	for k, s := range order {
		h := s.h
		if k > 0 {
			h.link = remap(h.link)
			if h.typ == shtRela || h.typ == shtRel || h.flags&shfInfoLink != 0 {
				h.info = remap(h.info)
			}
		}
		p.shs[k] = h
		if s.old == f.shstrndx {
			p.shstrndx = k
		}
	}
	if len(p.shs) >= shnLoReserv {
		p.shs[0].size = uint64(len(p.shs))
	}
	return newIdx, identity, nil
}

// symbols patches the symbol tables: section indices renumbered, the
// values of symbols in the block moved with it.
func (l *linker) symbols(p *Plan, order []outSection, newIdx []uint32, identity bool) error {
	f := l.f
	for _, s := range order[1:] {
		if (s.h.typ != shtSymtab && s.h.typ != shtDynsym) || s.old < 0 {
			continue
		}
		if f.hasSymtabShndx() && !identity {
			return &UnsupportedError{What: "extended symbol section indices (SHT_SYMTAB_SHNDX)"}
		}
		in := f.shs[s.old]
		if in.entsize != 0 && in.entsize != symSize {
			return formatErr(f.shoff+uint64(s.old)*shdrSize, "symbol table entry size %d, want %d", in.entsize, symSize)
		}
		data, changed := f.rewriteSymbols(f.in[in.off:in.off+in.size], newIdx, l.inBlock, l.dAddr)
		if changed {
			p.patches = append(p.patches, patch{off: s.h.off, data: data})
		}
	}
	return nil
}

func (f *file) dynamicRange() (phdr, bool) {
	for _, p := range f.phs {
		if p.typ == ptDynamic && p.filesz > 0 {
			return p, true
		}
	}
	return phdr{}, false
}

// addrToOff maps a virtual address to a file offset through the PT_LOADs
// (^0 when no segment holds it in the file).
func (f *file) addrToOff(a uint64) uint64 {
	for _, p := range f.phs {
		if p.typ == ptLoad && a >= p.vaddr && a-p.vaddr < p.filesz {
			return p.off + (a - p.vaddr)
		}
	}
	return ^uint64(0)
}

// patchDynamic moves the address entries of .dynamic that point into the
// block.
func (f *file) patchDynamic(p *Plan, moved func(uint64) (uint64, bool), outOff func(uint64) uint64) {
	dyn, ok := f.dynamicRange()
	if !ok {
		return
	}
	for o := dyn.off; o+dynSize <= dyn.off+dyn.filesz; o += dynSize {
		tag, val := f.bo.Uint64(f.in[o:]), f.bo.Uint64(f.in[o+8:])
		if tag == 0 {
			break
		}
		if !dtAddrTags[tag] {
			continue
		}
		if nv, ok := moved(val); ok {
			b := make([]byte, 8)
			f.bo.PutUint64(b, nv)
			p.patches = append(p.patches, patch{off: outOff(o + 8), data: b})
		}
	}
}

func (f *file) hasSymtabShndx() bool {
	for _, s := range f.shs {
		if s.typ == shtSymtabShndx {
			return true
		}
	}
	return false
}

// rewriteSymbols returns a copy of the symbol table b with section indices
// renumbered and the values of symbols in moved sections shifted by d.
func (f *file) rewriteSymbols(b []byte, newIdx []uint32, moved map[int]bool, d uint64) ([]byte, bool) {
	for _, r := range f.syms {
		if len(r.in) == len(b) && (len(b) == 0 || &r.in[0] == &b[0]) && r.d == d && slices.Equal(r.newIdx, newIdx) && maps.Equal(r.moved, moved) {
			return r.out, r.changed
		}
	}
	out, changed := f.rewriteSymbolsOnce(b, newIdx, moved, d)
	f.syms = append(f.syms, symRewrite{in: b, newIdx: slices.Clone(newIdx), moved: maps.Clone(moved), d: d, out: out, changed: changed})
	return out, changed
}

// symRewrite is one remembered rewriteSymbols call: its arguments and
// results. The output is only read by the plans that share it.
type symRewrite struct {
	in      []byte
	newIdx  []uint32
	moved   map[int]bool
	d       uint64
	out     []byte
	changed bool
}

func (f *file) rewriteSymbolsOnce(b []byte, newIdx []uint32, moved map[int]bool, d uint64) ([]byte, bool) {
	var out []byte // a copy of b, made at the first symbol that changes
	bo := f.bo
	mv := make([]bool, len(newIdx)) // moved, by index: a map lookup a symbol cost a millisecond here
	for i := range moved {
		if i >= 0 && i < len(mv) {
			mv[i] = moved[i]
		}
	}
	for o := 0; o+symSize <= len(b); o += symSize {
		shndx := uint32(bo.Uint16(b[o+6:]))
		if shndx == 0 || shndx >= shnLoReserv || int(shndx) >= len(newIdx) {
			continue
		}
		ni := newIdx[shndx]
		if ni == shndx && !mv[shndx] {
			continue
		}
		if out == nil {
			out = append([]byte(nil), b...)
		}
		e := out[o : o+symSize]
		bo.PutUint16(e[6:], uint16(ni))
		if mv[shndx] {
			bo.PutUint64(e[8:], bo.Uint64(e[8:])+d)
		}
	}
	if out == nil {
		return b, false
	}
	return out, true
}

// finishHeaders adds the patches for the ELF header and the program and
// section header tables.
func (p *Plan) finishHeaders(phnum uint64) {
	bo := p.f.bo
	ph := make([]byte, phnum*phdrSize)
	for i, h := range p.phs {
		putPhdr(bo, ph[uint64(i)*phdrSize:], h)
	}
	p.patches = append(p.patches, patch{off: p.phoff, data: ph})
	eh := make([]byte, ehdrSize)
	copy(eh, p.f.in[:ehdrSize])
	bo.PutUint64(eh[32:], p.phoff)
	if len(p.phs) >= pnXNum {
		bo.PutUint16(eh[56:], pnXNum)
	} else {
		bo.PutUint16(eh[56:], uint16(len(p.phs)))
	}
	if p.shs != nil {
		sh := make([]byte, uint64(len(p.shs))*shdrSize)
		for i, s := range p.shs {
			putShdr(bo, sh[uint64(i)*shdrSize:], s)
		}
		var covered uint64
		for _, pc := range p.pieces {
			covered = max(covered, pc.off+pc.size)
		}
		if p.shoff >= covered {
			p.pieces = append(p.pieces, piece{off: p.shoff, size: uint64(len(sh)), data: sh})
		} else {
			p.patches = append(p.patches, patch{off: p.shoff, data: sh})
		}
		bo.PutUint64(eh[40:], p.shoff)
		if len(p.shs) >= shnLoReserv {
			bo.PutUint16(eh[60:], 0)
		} else {
			bo.PutUint16(eh[60:], uint16(len(p.shs)))
		}
		if p.shstrndx < 0 {
			p.shstrndx = 0
		}
		if p.shstrndx >= shnLoReserv {
			bo.PutUint16(eh[62:], shnXIndex)
			p.shs[0].link = uint32(p.shstrndx)
			putShdr(bo, sh, p.shs[0]) // sh is the slice the piece or patch holds
		} else {
			bo.PutUint16(eh[62:], uint16(p.shstrndx))
		}
	}
	p.patches = append(p.patches, patch{off: 0, data: eh})
}
