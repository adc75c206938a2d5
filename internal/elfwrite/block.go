package elfwrite

import (
	"slices"
	"sort"
)

// makeRoom decides how the table grows: into free bytes, or into a block
// of sections that then move (findBlock); and past the end of its PT_LOAD
// if that segment holds only headers and small sections, as a linker
// would have made it larger (extendLoad).
func (l *linker) makeRoom() error {
	f := l.f
	ld := l.phs[l.phLoad]
	l.bAddr = ld.vaddr - ld.off
	if l.newPhEnd <= l.oldPhEnd {
		return nil // the table does not grow
	}
	ldEnd := ld.off + ld.filesz
	l.extendLoad = l.newPhEnd > ldEnd
	l.inBlock = map[int]bool{}
	if !f.canGrowPhdrs(l.phs, l.newPhnum*phdrSize, l.extendLoad, true) && (!l.extendLoad || f.sectionsIn(l.oldPhEnd, ldEnd)) {
		var err error
		l.block, l.bStart, l.bEnd, err = f.findBlock(l.phs, l.oldPhEnd, min(l.newPhEnd, ldEnd), l.st.tables)
		if err != nil {
			return err
		}
		for _, i := range l.block {
			l.inBlock[i] = true
		}
		if l.bEnd > ldEnd {
			return layoutErr("the sections after the program header table run past the first PT_LOAD")
		}
	}
	if l.extendLoad && !f.canExtendLoad(l.phs, ld, l.newPhEnd, l.inBlock) {
		return layoutErr("the first PT_LOAD ends at %#x, too soon for %d program headers", ldEnd, l.newPhnum)
	}
	l.bAddr = ld.vaddr + (l.bStart - ld.off)
	l.bSize = l.bEnd - l.bStart
	return nil
}

// sectionsIn reports whether a section has file bytes in [lo, hi).
func (f *file) sectionsIn(lo, hi uint64) bool {
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ != shtNobits && s.size > 0 && s.off < hi && lo < s.off+s.size {
			return true
		}
	}
	return false
}

// canExtendLoad reports whether the PT_LOAD ld, which maps the program
// header table, may grow to end at file offset end: it has no .bss part,
// and the bytes and pages it would take belong to no other segment of phs
// and to no section but those in block (which move away).
func (f *file) canExtendLoad(phs []phdr, ld phdr, end uint64, block map[int]bool) bool {
	if ld.filesz != ld.memsz || end > uint64(len(f.in)) && f.shs != nil && f.shoff < end {
		return false
	}
	lo, newSize := ld.off+ld.filesz, end-ld.off
	vlo, vhi := ld.vaddr+ld.filesz, ld.vaddr+newSize
	for _, q := range phs {
		if q == ld || q.typ == ptPhdr || q.typ == ptNull {
			continue
		}
		if q.filesz > 0 && q.off < end && lo < q.off+q.filesz {
			return false // its bytes
		}
		if q.typ == ptLoad && q.memsz > 0 {
			qa := q.vaddr &^ (max(q.align, minSegAlign) - 1)
			if qa < vhi && vlo < q.vaddr+q.memsz {
				return false // its pages
			}
		}
	}
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if block[i] || s.size == 0 {
			continue
		}
		if s.typ != shtNobits && s.off < end && lo < s.off+s.size {
			return false
		}
		if s.flags&shfAlloc != 0 && s.addr < vhi && vlo < s.addr+s.size {
			return false
		}
	}
	if f.shs != nil && f.shoff < end && lo < f.shoff+uint64(len(f.shs))*shdrSize {
		return false
	}
	return true
}

// small reports whether section s is one the table may grow into under
// every strategy: .interp or a note, which only program headers name.
func (f *file) small(s shdr) bool {
	return s.typ == shtNote || s.typ == shtProgbits && f.sectionName(s) == ".interp"
}

// findBlock returns the sections the program header table grows into when
// it ends at newEnd instead of oldEnd, with everything that must move with
// them: every section a non-load segment of phs describes together with
// one of them and, when a dynamic table is among them (only with tables),
// the whole contiguous run of movable sections they start.
func (f *file) findBlock(phs []phdr, oldEnd, newEnd uint64, tables bool) ([]int, uint64, uint64, error) {
	if f.shs == nil {
		return f.findBlockNoSections(phs, oldEnd, newEnd)
	}
	bStart, bEnd := uint64(1<<63), uint64(0)
	grow := func(off, end uint64) bool {
		changed := false
		if off < bStart {
			bStart, changed = off, true
		}
		if end > bEnd {
			bEnd, changed = end, true
		}
		return changed
	}
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ == shtNobits || s.flags&shfAlloc == 0 && s.size == 0 {
			continue
		}
		if s.off < newEnd && s.off+s.size > oldEnd || s.size == 0 && s.off >= oldEnd && s.off < newEnd {
			if s.off < oldEnd {
				return nil, 0, 0, layoutErr("section %q overlaps the program header table", f.sectionName(s))
			}
			grow(s.off, s.off+s.size)
		}
	}
	if bEnd == 0 {
		// Nothing named follows; the bytes are simply not free (non-zero).
		return nil, 0, 0, layoutErr("the bytes after the program header table are in use but belong to no section")
	}
	dynAddrs := f.dynamicAddrs()
	if bEnd = f.takeTables(bStart, bEnd, tables, dynAddrs); bEnd == 0 {
		return nil, 0, 0, layoutErr("the program header table would grow into the dynamic tables")
	}
	for changed := true; changed; {
		changed = false
		for i := 1; i < len(f.shs); i++ {
			s := f.shs[i]
			if s.typ != shtNobits && s.off >= bStart && s.off < bEnd && s.off+s.size > bEnd {
				changed = grow(s.off, s.off+s.size) || changed
			}
		}
		for _, p := range phs {
			if p.typ == ptLoad || p.typ == ptPhdr || p.typ == ptNull || p.filesz == 0 {
				continue
			}
			if p.off < bEnd && bStart < p.off+p.filesz {
				changed = grow(max(p.off, oldEnd), p.off+p.filesz) || changed
			}
		}
	}
	return f.blockSections(bStart, bEnd, tables, dynAddrs)
}

// takeTables extends a block [bStart, bEnd) that holds a dynamic table by
// every movable section that follows it up to the first one that cannot
// move (the code, usually), and returns its new end; 0 when it holds one
// and tables is false. dynAddrs are the .dynamic address entries
// (movable needs them). The dynamic tables keep their order among
// themselves (.dynsym before .dynstr and the relocations that name it).
// BFD numbers the sections of a file it rewrites by following sh_link
// from the relocation and symbol tables, and leaves .dynsym's section
// indices as they were; a .dynsym that moved alone would come out of
// strip pointing at the wrong sections.
//
// Only when a dynamic table has to move at all: .interp and the notes
// alone leave the tables where patchelf expects them, right after the
// headers (patchelf 0.14 puts a grown .dynamic into the space it finds
// there, read-only, when the first page has room: the program then
// crashes as ld.so writes DT_DEBUG; patchelf's master makes that segment
// writable).
func (f *file) takeTables(bStart, bEnd uint64, tables bool, dynAddrs map[uint64]bool) uint64 {
	held := false
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ != shtNobits && s.off >= bStart && s.off < bEnd && !f.small(s) {
			held = true
		}
	}
	if !held {
		return bEnd
	}
	if !tables {
		return 0
	}
	var after []int
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ != shtNobits && s.size > 0 && s.off >= bEnd {
			after = append(after, i)
		}
	}
	sort.SliceStable(after, func(a, b int) bool { return f.shs[after[a]].off < f.shs[after[b]].off })
	for _, i := range after {
		s := f.shs[i]
		if !f.movable(s, dynAddrs) || s.off-bEnd >= maxBlockAlign {
			break
		}
		bEnd = max(bEnd, s.off+s.size)
	}
	return bEnd
}

// blockSections returns the sections in [bStart, bEnd), in offset order,
// once each is known to be movable (and, without tables, small).
func (f *file) blockSections(bStart, bEnd uint64, tables bool, dynAddrs map[uint64]bool) ([]int, uint64, uint64, error) {
	var block []int
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ == shtNobits || s.off < bStart || s.off >= bEnd {
			continue
		}
		if !f.movable(s, dynAddrs) {
			return nil, 0, 0, layoutErr("section %q at %#x follows the program header table and cannot move", f.sectionName(s), s.off)
		}
		if !tables && !f.small(s) {
			return nil, 0, 0, layoutErr("the program header table would grow into the dynamic tables")
		}
		block = append(block, i)
	}
	sort.SliceStable(block, func(a, b int) bool { return f.shs[block[a]].off < f.shs[block[b]].off })
	if len(block) == 0 || f.shs[block[0]].off != bStart {
		return nil, 0, 0, layoutErr("the bytes after the program header table belong to no movable section")
	}
	return block, bStart, bEnd, nil
}

// findBlockNoSections is findBlock for a file without section headers: the
// run after the table must consist of PT_INTERP, PT_NOTE and
// PT_GNU_PROPERTY contents, and no .dynamic address may point into it.
func (f *file) findBlockNoSections(phs []phdr, oldEnd, newEnd uint64) ([]int, uint64, uint64, error) {
	bStart, bEnd := uint64(0), uint64(0)
	for changed := true; changed; {
		changed = false
		for _, p := range phs {
			switch p.typ {
			case ptInterp, ptNote, ptGNUProperty:
			default:
				continue
			}
			if p.filesz == 0 || p.off < oldEnd {
				continue
			}
			lo, hi := bStart, bEnd
			if bEnd == 0 {
				lo, hi = oldEnd, newEnd
			}
			// Contiguous with the run so far (allowing alignment padding).
			if p.off <= hi+8 && p.off+p.filesz >= lo {
				if bEnd == 0 || p.off < bStart {
					bStart, changed = p.off, true
				}
				if p.off+p.filesz > bEnd {
					bEnd, changed = p.off+p.filesz, true
				}
			}
		}
	}
	if bEnd < newEnd || bStart > oldEnd+8 {
		return nil, 0, 0, layoutErr("without section headers, only PT_INTERP and note contents may follow the program header table")
	}
	for _, p := range phs {
		if p.typ == ptLoad || p.typ == ptPhdr || p.filesz == 0 {
			continue
		}
		switch p.typ {
		case ptInterp, ptNote, ptGNUProperty:
			continue
		}
		if p.off < bEnd && bStart < p.off+p.filesz {
			return nil, 0, 0, layoutErr("segment type %#x follows the program header table and cannot move", p.typ)
		}
	}
	// No dynamic table may start inside the run.
	if dyn, ok := f.dynamicRange(); ok {
		for o := dyn.off; o+dynSize <= dyn.off+dyn.filesz; o += dynSize {
			tag, val := f.bo.Uint64(f.in[o:]), f.bo.Uint64(f.in[o+8:])
			if tag == 0 {
				break
			}
			if dtAddrTags[tag] && f.addrToOff(val) >= bStart && f.addrToOff(val) < bEnd {
				return nil, 0, 0, layoutErr("a dynamic table (tag %#x) follows the program header table", tag)
			}
		}
	}
	return nil, bStart, bEnd, nil
}

// noteRef is where one note lies: its header, name and descriptor, and
// where the next note may start.
type noteRef struct{ hdr, desc, descEnd, next uint64 }

// parseNotes reads the notes in [off, off+size) as a loader or readelf
// would with alignment align (4 or 8), padding relative to off; ok is false
// when they do not fill the range.
func (f *file) parseNotes(off, size, align uint64) ([]noteRef, bool) {
	end := off + size
	pad := func(x uint64) uint64 { return off + (x-off+align-1)&^(align-1) }
	var out []noteRef
	for o := off; o < end; {
		if end-o < 12 {
			return nil, false
		}
		namesz, descsz := uint64(f.bo.Uint32(f.in[o:])), uint64(f.bo.Uint32(f.in[o+4:]))
		if namesz > end-o-12 {
			return nil, false
		}
		desc := pad(o + 12 + namesz)
		if desc > end || descsz > end-desc {
			return nil, false
		}
		r := noteRef{hdr: o, desc: desc, descEnd: desc + descsz, next: min(pad(desc+descsz), end)}
		out = append(out, r)
		o = r.next
	}
	return out, true
}

// noteAlign is the alignment readers use for a PT_NOTE: 8 when it says 8,
// else 4.
func noteAlign(p phdr) uint64 {
	if p.align == 8 {
		return 8
	}
	return 4
}

// mergeNotes returns phs with its PT_NOTEs merged into one, in the place
// of the first: they must lie back to back in the file and in memory, and
// the notes must read the same with the smallest alignment among them
// (an 8-aligned GNU property note followed by 4-aligned build-id and ABI
// notes does). ok is false when there are fewer than two or they cannot
// be merged.
func (f *file) mergeNotes(phs []phdr) ([]phdr, bool) {
	var idx []int
	for i, p := range phs {
		if p.typ == ptNote && p.filesz > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return nil, false
	}
	byOff := slices.Clone(idx)
	sort.SliceStable(byOff, func(a, b int) bool { return phs[byOff[a]].off < phs[byOff[b]].off })
	m := phs[byOff[0]]
	m.align = noteAlign(m)
	var want []noteRef
	for k, i := range byOff {
		p := phs[i]
		if p.filesz != p.memsz || k > 0 && (p.off != m.off+m.filesz || p.vaddr != m.vaddr+m.filesz) {
			return nil, false
		}
		notes, ok := f.parseNotes(p.off, p.filesz, noteAlign(p))
		if !ok {
			return nil, false
		}
		want = append(want, notes...)
		if k > 0 {
			m.filesz += p.filesz
			m.memsz += p.filesz
		}
		m.align = min(m.align, noteAlign(p))
	}
	got, ok := f.parseNotes(m.off, m.filesz, m.align)
	if !ok || !slices.Equal(got, want) {
		return nil, false
	}
	m.flags = phs[idx[0]].flags
	var out []phdr
	for i, p := range phs {
		switch {
		case i == idx[0]:
			out = append(out, m)
		case !slices.Contains(idx, i):
			out = append(out, p)
		}
	}
	return out, true
}
