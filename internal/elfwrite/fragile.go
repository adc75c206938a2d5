package elfwrite

import "fmt"

// The fragile layout (Options.AppendSegment): the input byte for byte,
// then a new PT_LOAD holding the program header table when it cannot grow
// in place, and .sframe; a grown copy of the section name table and a new
// section header table follow.

// newFragilePlan lays out the output in the fragile layout.
func newFragilePlan(f *file, size uint64, secIdx, segIdx int, opts Options) (*Plan, error) {
	newPhnum := uint64(len(f.phs)) + 1 // the new PT_LOAD
	if segIdx < 0 {
		newPhnum++ // PT_GNU_SFRAME
	}
	if newPhnum >= pnXNum && f.shs == nil {
		return nil, &UnsupportedError{What: fmt.Sprintf("%d program headers need extended numbering, which needs section headers", newPhnum)}
	}
	newPhSize := newPhnum * phdrSize
	p := &Plan{f: f, Size: size, phoff: f.phoff, shoff: f.shoff, fragile: true}
	p.PHDRMoved = !f.canGrowPhdrsInPlace(newPhSize)
	if err := p.placeFragile(newPhSize, opts); err != nil {
		return nil, err
	}
	p.fragilePhdrs(newPhnum, segIdx)
	end := p.SegmentOffset + p.SegmentSize
	if f.shs != nil {
		var err error
		if end, err = p.fragileSections(secIdx, newPhnum, end); err != nil {
			return nil, err
		}
	}
	p.OutputSize = end
	p.pieces = append(p.pieces, piece{off: 0, src: 0, size: uint64(len(f.in))})
	p.sfPiece = len(p.pieces)
	p.pieces = append(p.pieces, piece{off: p.Offset, size: size})
	p.finishHeaders(newPhnum)
	return p, nil
}

// placeFragile places the new segment after the input: where its
// vaddr-offset difference equals the first PT_LOAD's when the table moves
// there and the padding allows (see the package comment), else right
// after the input.
func (p *Plan) placeFragile(newPhSize uint64, opts Options) error {
	f := p.f
	n := uint64(len(f.in))
	// Where existing segments end, the alignment to use, the first PT_LOAD.
	var maxEnd uint64
	align := uint64(minSegAlign)
	first := -1
	for i, ph := range f.phs {
		if ph.memsz > 0 && ph.vaddr+ph.memsz > maxEnd {
			if ph.vaddr+ph.memsz < ph.vaddr {
				return formatErr(f.phoff+uint64(i)*phdrSize, "segment %d wraps around the address space", i)
			}
			maxEnd = ph.vaddr + ph.memsz
		}
		if ph.typ != ptLoad {
			continue
		}
		align = max(align, ph.align)
		if first < 0 || ph.vaddr < f.phs[first].vaddr {
			first = i
		}
	}
	base, ok := alignUp(maxEnd, align)
	if !ok {
		return &UnsupportedError{What: "no address space left above the existing segments"}
	}
	start, ok := alignUp(n, 8)
	if !ok {
		return &UnsupportedError{What: "input too large"}
	}
	var off, vaddr uint64
	placed := false
	maxPad := opts.MaxPad
	if maxPad == 0 {
		maxPad = defaultMaxPad
	}
	if p.PHDRMoved && maxPad > 0 {
		fl := f.phs[first]
		if fl.vaddr >= fl.off && (fl.vaddr-fl.off)%align == 0 {
			delta := fl.vaddr - fl.off
			var cand uint64
			if base > delta {
				cand = base - delta
			}
			o := max(start, cand)
			if o-n <= uint64(maxPad) && o+delta >= o {
				off, vaddr, placed = o, o+delta, true
			}
		}
	}
	if !placed {
		off = start
		vaddr = base + off%align
		if vaddr < base {
			return &UnsupportedError{What: "no address space left above the existing segments"}
		}
	}
	var sfRel uint64
	if p.PHDRMoved {
		sfRel = newPhSize
		p.phoff = off
	}
	segSize := sfRel + p.Size
	if segSize < p.Size || off+segSize < off || vaddr+segSize < vaddr {
		return &UnsupportedError{What: fmt.Sprintf("section size %#x too large", p.Size)}
	}
	p.SegmentOffset, p.SegmentAddr, p.SegmentSize, p.SegmentAlign = off, vaddr, segSize, align
	p.Offset, p.Addr = off+sfRel, vaddr+sfRel
	return nil
}

// fragilePhdrs builds the program headers: the input's in their order,
// the new PT_LOAD after the last PT_LOAD (they stay sorted by vaddr since
// the new one is the highest) and PT_GNU_SFRAME at the end.
func (p *Plan) fragilePhdrs(newPhnum uint64, segIdx int) {
	f := p.f
	newPhSize := newPhnum * phdrSize
	off, vaddr := p.SegmentOffset, p.SegmentAddr
	sfSeg := phdr{typ: ptGNUSFrame, flags: pfR, off: p.Offset, vaddr: p.Addr, paddr: p.Addr, filesz: p.Size, memsz: p.Size, align: 8}
	load := phdr{typ: ptLoad, flags: pfR, off: off, vaddr: vaddr, paddr: vaddr, filesz: p.SegmentSize, memsz: p.SegmentSize, align: p.SegmentAlign}
	lastLoad := 0
	for i, ph := range f.phs {
		if ph.typ == ptLoad {
			lastLoad = i
		}
	}
	p.phs = make([]phdr, 0, newPhnum)
	for i, ph := range f.phs {
		switch ph.typ {
		case ptPhdr:
			ph.filesz, ph.memsz = newPhSize, newPhSize
			if p.PHDRMoved {
				ph.off, ph.vaddr, ph.paddr, ph.align = off, vaddr, vaddr, 8
			}
		case ptGNUSFrame:
			ph = sfSeg
		}
		p.phs = append(p.phs, ph)
		if i == lastLoad {
			p.phs = append(p.phs, load)
		}
	}
	if segIdx < 0 {
		p.phs = append(p.phs, sfSeg)
	}
}

// fragileSections builds the section headers: the input's, with .sframe
// repointed or added at the end (then with a grown name table after the
// segment, at end), and returns where the output ends.
func (p *Plan) fragileSections(secIdx int, newPhnum, end uint64) (uint64, error) {
	f := p.f
	p.shs = append(make([]shdr, 0, len(f.shs)+1), f.shs...)
	sec := shdr{typ: shtGNUSFrame, flags: shfAlloc, addr: p.Addr, off: p.Offset, size: p.Size, addralign: 8}
	if secIdx >= 0 {
		sec.name = f.shs[secIdx].name
		p.shs[secIdx] = sec
	} else {
		old := f.shs[f.shstrndx]
		tab := append([]byte(nil), f.in[old.off:old.off+old.size]...)
		if len(tab) == 0 || tab[len(tab)-1] != 0 {
			tab = append(tab, 0)
		}
		sec.name = uint32(len(tab))
		if uint64(sec.name) != uint64(len(tab)) {
			return 0, &UnsupportedError{What: "section name table too large"}
		}
		tab = append(tab, SectionName+"\x00"...)
		p.pieces = append(p.pieces, piece{off: end, size: uint64(len(tab)), data: tab})
		p.shs[f.shstrndx].off, p.shs[f.shstrndx].size = end, uint64(len(tab))
		p.shs = append(p.shs, sec)
		p.shoff, _ = alignUp(end+uint64(len(tab)), 8)
		end = p.shoff + uint64(len(p.shs))*shdrSize
	}
	if len(p.shs) >= shnLoReserv {
		p.shs[0].size = uint64(len(p.shs))
	}
	if newPhnum >= pnXNum {
		p.shs[0].info = uint32(newPhnum)
	}
	p.shstrndx = f.shstrndx
	return end, nil
}
