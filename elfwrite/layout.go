package elfwrite

import (
	"fmt"
	"maps"
	"slices"
	"sort"
)

// The linker-like layout (the default).
//
// GNU strip/objcopy (BFD), elfutils' eu-strip and patchelf all assume what
// a linker writes: the program header table right after the ELF header,
// inside the first PT_LOAD; loaded sections sorted by address and offset
// and followed by the non-loaded ones; section headers sorted by offset.
// BFD re-lays out a file whose program header table sits anywhere else
// (and breaks it), eu-strip drops such a table, and patchelf walks the
// section headers in index order to find what follows the table.
//
// So the table stays at e_phoff and grows there by the new program headers
// (a PT_LOAD and PT_GNU_SFRAME). The sections it grows into (the run that
// follows it: .interp, the notes and, in libraries, .hash/.gnu.hash/.dynsym
// and the other dynamic tables) move, as one block with their internal
// layout kept, into the new read-only PT_LOAD above every existing segment,
// followed by .sframe; this is what patchelf does when it adds a segment.
// Everything that names the moved bytes is updated: the section headers,
// the program headers that describe them (PT_INTERP, PT_NOTE,
// PT_GNU_PROPERTY, ...), the address entries of .dynamic, and the values
// of symbols defined in them. No other loaded byte moves. The new segment
// starts right after the last loaded byte of the input; the non-loaded
// sections (.comment, .symtab, debug info, ...) follow it, and the section
// headers are re-sorted by offset (symbols' section indices and sh_link /
// sh_info are renumbered to match), as in a linker's output.

// Program header types used by the linker-like layout.
const (
	ptNull        = 0
	ptDynamic     = 2
	ptInterp      = 3
	ptNote        = 4
	ptGNUEHFrame  = 0x6474e550
	ptGNUProperty = 0x6474e553

	shtProgbits     = 1
	shtSymtab       = 2
	shtStrtab       = 3
	shtRela         = 4
	shtHash         = 5
	shtDynamic      = 6
	shtNote         = 7
	shtRel          = 9
	shtDynsym       = 11
	shtRelr         = 19
	shtSymtabShndx  = 18
	shtGNUHash      = 0x6ffffff6
	shtGNUVerdef    = 0x6ffffffd
	shtGNUVerneed   = 0x6ffffffe
	shtGNUVersym    = 0x6fffffff
	shfInfoLink     = 0x40
	maxBlockAlign   = 0x1000
	symSize         = 24
	dynSize         = 16
	maxTailSections = 1 << 20
)

// dtAddrTags are the .dynamic tags whose value is an address.
var dtAddrTags = map[uint64]bool{
	3: true, 4: true, 5: true, 6: true, 7: true, 12: true, 13: true, 17: true, 23: true,
	25: true, 26: true, 32: true, 36: true, // PLTGOT HASH STRTAB SYMTAB RELA INIT FINI REL JMPREL INIT/FINI/PREINIT_ARRAY RELR
	0x6ffffef5: true, // DT_GNU_HASH
	0x6ffffef6: true, // DT_TLSDESC_PLT
	0x6ffffef7: true, // DT_TLSDESC_GOT
	0x6ffffef8: true, // DT_GNU_CONFLICT
	0x6ffffef9: true, // DT_GNU_LIBLIST
	0x6ffffefa: true, // DT_CONFIG
	0x6ffffefb: true, // DT_DEPAUDIT
	0x6ffffefc: true, // DT_AUDIT
	0x6ffffefd: true, // DT_PLTPAD
	0x6ffffefe: true, // DT_MOVETAB
	0x6ffffeff: true, // DT_SYMINFO
	0x6ffffff0: true, // DT_VERSYM
	0x6ffffffc: true, // DT_VERDEF
	0x6ffffffe: true, // DT_VERNEED
}

// LayoutError reports an input for which no layout that the standard tools
// keep could be made. Options.AppendSegment still converts such a file,
// with the fragile layout.
type LayoutError struct{ Msg string }

func (e *LayoutError) Error() string {
	return "elfwrite: cannot keep the program header table in place: " + e.Msg
}

func layoutErr(format string, args ...any) error {
	return &LayoutError{Msg: fmt.Sprintf(format, args...)}
}

// piece is one run of the output: a copy of input bytes or literal data.
type piece struct {
	off  uint64 // output offset
	src  uint64 // input offset when data is nil
	size uint64
	data []byte
}

// patch overwrites output bytes at off after the pieces are laid: with
// data, or with zeros bytes of zero when data is nil (a cleared range is
// not held in memory, and its input bytes are never read).
type patch struct {
	off   uint64
	data  []byte
	zeros uint64
}

// size is the number of bytes the patch writes.
func (pt *patch) size() uint64 {
	if pt.data == nil {
		return pt.zeros
	}
	return uint64(len(pt.data))
}

// movable reports whether section s may move with the block after the
// program header table: its address is only named by program headers,
// .dynamic and symbols, all of which are updated. A dynamic table (hash,
// symbols, versions, relocations) qualifies only when a .dynamic address
// entry names its start: that is how the loader finds it. Otherwise code
// may name it: a static executable's .rela.plt is found through
// __rela_iplt_start, an address linked into the startup code.
func (f *file) movable(s shdr, dynAddrs map[uint64]bool) bool {
	if s.flags&shfAlloc == 0 {
		return false
	}
	switch s.typ {
	case shtNote:
		return true
	case shtHash, shtGNUHash, shtDynsym, shtGNUVersym, shtGNUVerneed, shtGNUVerdef, shtRela, shtRel, shtRelr:
		return dynAddrs[s.addr]
	case shtProgbits:
		return f.sectionName(s) == ".interp"
	case shtStrtab:
		return f.sectionName(s) == ".dynstr" && dynAddrs[s.addr]
	}
	return false
}

// dynamicAddrs returns the values of the address entries of .dynamic.
func (f *file) dynamicAddrs() map[uint64]bool {
	out := map[uint64]bool{}
	dyn, ok := f.dynamicRange()
	if !ok {
		return out
	}
	for o := dyn.off; o+dynSize <= dyn.off+dyn.filesz; o += dynSize {
		tag, val := f.bo.Uint64(f.in[o:]), f.bo.Uint64(f.in[o+8:])
		if tag == 0 {
			break
		}
		if dtAddrTags[tag] {
			out[val] = true
		}
	}
	return out
}

// newLinkerPlan lays out the output as described at the top of this file.
// secIdx and segIdx are the existing .sframe section and PT_GNU_SFRAME
// (-1 when absent).
func newLinkerPlan(f *file, size uint64, secIdx, segIdx int) (*Plan, error) {
	n := uint64(len(f.in))
	if f.shs != nil && f.shstrndx < 0 {
		return nil, &UnsupportedError{What: "section headers without a section name table (e_shstrndx is 0)"}
	}
	oldPhEnd := f.phoff + uint64(len(f.phs))*phdrSize
	newPhnum := uint64(len(f.phs)) + 1
	if segIdx < 0 {
		newPhnum++
	}
	if newPhnum >= pnXNum {
		return nil, &UnsupportedError{What: fmt.Sprintf("%d program headers", newPhnum)}
	}
	newPhSize := newPhnum * phdrSize
	newPhEnd := f.phoff + newPhSize

	// The PT_LOAD that maps the table, and the layout facts.
	var phLoad *phdr
	var loadEnd, maxEnd uint64
	segAlign := uint64(minSegAlign)
	for i := range f.phs {
		p := &f.phs[i]
		if p.memsz > 0 && p.vaddr+p.memsz > maxEnd {
			maxEnd = p.vaddr + p.memsz
		}
		if p.typ != ptLoad {
			continue
		}
		segAlign = max(segAlign, p.align)
		loadEnd = max(loadEnd, p.off+p.filesz)
		if p.off <= f.phoff && oldPhEnd <= p.off+p.filesz {
			phLoad = p
		}
	}
	if phLoad == nil {
		return nil, layoutErr("the program header table at %#x is not inside a PT_LOAD", f.phoff)
	}
	// The table grows into free bytes, or into a block of sections that
	// then move (findBlock); and past the end of its PT_LOAD if that
	// segment holds only headers and small sections, as a linker would
	// have made it larger (extendLoad).
	phLoadEnd := phLoad.off + phLoad.filesz
	extendLoad := newPhEnd > phLoadEnd
	var block []int // section indices, in offset order
	var bStart, bEnd uint64
	inBlock := map[int]bool{}
	if !f.canGrowPhdrs(newPhSize, extendLoad, true) && (!extendLoad || f.sectionsIn(oldPhEnd, phLoadEnd)) {
		var err error
		block, bStart, bEnd, err = f.findBlock(oldPhEnd, min(newPhEnd, phLoadEnd))
		if err != nil {
			return nil, err
		}
		for _, i := range block {
			inBlock[i] = true
		}
		if bEnd > phLoadEnd {
			return nil, layoutErr("the sections after the program header table run past the first PT_LOAD")
		}
	}
	if extendLoad {
		if !f.canExtendLoad(phLoad, newPhEnd, inBlock) {
			return nil, layoutErr("the first PT_LOAD ends at %#x, too soon for %d program headers", phLoadEnd, newPhnum)
		}
	}
	for i, s := range f.shs {
		if i > 0 && s.flags&shfAlloc != 0 && s.typ != shtNobits {
			loadEnd = max(loadEnd, s.off+s.size)
		}
	}
	loadEnd = max(loadEnd, newPhEnd)
	bAddr := phLoad.vaddr + (bStart - phLoad.off)
	bSize := bEnd - bStart

	// Non-loaded bytes after the loaded image move behind the new segment;
	// nothing but section headers may name them.
	for i, p := range f.phs {
		if p.typ != ptLoad && p.typ != ptNull && p.filesz > 0 && p.off+p.filesz > loadEnd {
			return nil, layoutErr("segment %d (type %#x) lies outside every PT_LOAD", i, p.typ)
		}
	}

	// Where the new segment goes.
	bAlign := uint64(8)
	for _, i := range block {
		bAlign = max(bAlign, f.shs[i].addralign)
	}
	for _, p := range f.phs {
		if p.typ != ptLoad && p.filesz > 0 && p.off >= bStart && p.off+p.filesz <= bEnd {
			bAlign = max(bAlign, p.align)
		}
	}
	if bAlign > maxBlockAlign || bAlign&(bAlign-1) != 0 {
		return nil, layoutErr("a section after the program header table is aligned to %#x", bAlign)
	}
	var segOff uint64
	if bSize > 0 {
		// The block keeps its offset modulo its alignment.
		segOff = loadEnd + (bStart%bAlign+bAlign-loadEnd%bAlign)%bAlign
	} else {
		segOff, _ = alignUp(loadEnd, 8)
	}
	base, ok := alignUp(maxEnd, segAlign)
	if !ok || base+segOff%segAlign < base {
		return nil, &UnsupportedError{What: "no address space left above the existing segments"}
	}
	segAddr := base + segOff%segAlign
	sfOff, _ := alignUp(segOff+bSize, 8)
	sfAddr := segAddr + (sfOff - segOff)
	segEnd := sfOff + size
	if segEnd < sfOff || segAddr+(segEnd-segOff) < segAddr {
		return nil, &UnsupportedError{What: fmt.Sprintf("section size %#x too large", size)}
	}
	dOff, dAddr := segOff-bStart, segAddr-bAddr // modular arithmetic; only used when bSize > 0

	p := &Plan{
		f: f, Size: size, Addr: sfAddr, Offset: sfOff,
		SegmentAddr: segAddr, SegmentOffset: segOff, SegmentSize: segEnd - segOff, SegmentAlign: segAlign,
		phoff: f.phoff,
	}
	movedAddr := func(a uint64) (uint64, bool) {
		if bSize > 0 && a >= bAddr && a < bAddr+bSize {
			return a + dAddr, true
		}
		return a, false
	}
	// outOff maps an input offset of the loaded image to the output.
	outOff := func(o uint64) uint64 {
		if bSize > 0 && o >= bStart && o < bEnd {
			return o + dOff
		}
		return o
	}

	// Program headers.
	sfSeg := phdr{typ: ptGNUSFrame, flags: pfR, off: sfOff, vaddr: sfAddr, paddr: sfAddr, filesz: size, memsz: size, align: 8}
	load := phdr{typ: ptLoad, flags: pfR, off: segOff, vaddr: segAddr, paddr: segAddr, filesz: segEnd - segOff, memsz: segEnd - segOff, align: segAlign}
	lastLoad, ehFrame := -1, -1
	for i, ph := range f.phs {
		switch ph.typ {
		case ptLoad:
			lastLoad = i
		case ptGNUEHFrame:
			ehFrame = i
		}
	}
	p.phs = make([]phdr, 0, newPhnum)
	for i, ph := range f.phs {
		switch {
		case ph.typ == ptPhdr:
			ph.filesz, ph.memsz = newPhSize, newPhSize
		case ph.typ == ptGNUSFrame:
			ph = sfSeg
		case ph.typ == ptLoad && extendLoad && ph == *phLoad:
			ph.filesz, ph.memsz = newPhEnd-ph.off, newPhEnd-ph.off
		case ph.typ == ptLoad || ph.typ == ptNull:
		case bSize > 0 && ph.filesz > 0 && ph.off >= bStart && ph.off+ph.filesz <= bEnd:
			ph.off += dOff
			ph.vaddr += dAddr
			ph.paddr += dAddr
		case bSize > 0 && ph.filesz > 0 && ph.off < bEnd && bStart < ph.off+ph.filesz:
			return nil, layoutErr("segment %d (type %#x) covers part of the sections to move", i, ph.typ)
		}
		p.phs = append(p.phs, ph)
		if i == lastLoad {
			p.phs = append(p.phs, load)
		}
		if segIdx < 0 && (i == ehFrame || ehFrame < 0 && i == len(f.phs)-1) {
			p.phs = append(p.phs, sfSeg)
		}
	}

	// Pieces of the output: the loaded image, the new segment, the tail.
	p.pieces = append(p.pieces, piece{off: 0, src: 0, size: min(loadEnd, n)})
	if bSize > 0 {
		p.pieces = append(p.pieces, piece{off: segOff, src: bStart, size: bSize})
		// The old place of the block, beyond the grown table, is cleared.
		if bEnd > newPhEnd {
			p.patches = append(p.patches, patch{off: newPhEnd, zeros: bEnd - newPhEnd})
		}
	}
	p.sfPiece = len(p.pieces)
	p.pieces = append(p.pieces, piece{off: sfOff, size: size})
	// A section header table inside the loaded image (Go's linker puts it
	// right after the program headers) is cleared there: the output has
	// it at the end, as other linkers do.
	if f.shs != nil && f.shoff < loadEnd {
		shEnd := min(f.shoff+uint64(len(f.shs))*shdrSize, loadEnd)
		p.patches = append(p.patches, patch{off: f.shoff, zeros: shEnd - f.shoff})
	}

	// .dynamic address entries that point into the block.
	if bSize > 0 {
		if err := f.patchDynamic(p, movedAddr, outOff); err != nil {
			return nil, err
		}
	}

	if f.shs == nil {
		// No section headers: copy whatever follows the loaded image as it is.
		if loadEnd < n {
			tail, _ := alignUp(segEnd, segAlign)
			tail += loadEnd % segAlign
			p.pieces = append(p.pieces, piece{off: tail, src: loadEnd, size: n - loadEnd})
			p.OutputSize = tail + n - loadEnd
		} else {
			p.OutputSize = segEnd
		}
		p.finishHeaders(newPhnum)
		return p, nil
	}

	// Sections: the block and .sframe move before the tail, whose sections
	// follow in their order; headers sorted by offset.
	type sec struct {
		old int // input index, or -1 for a new .sframe
		h   shdr
	}
	var head, tail []sec
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if inBlock[i] || i == secIdx {
			continue
		}
		if s.typ != shtNobits && s.off >= loadEnd || s.typ == shtNobits && s.flags&shfAlloc == 0 && s.off >= loadEnd {
			if s.flags&shfAlloc != 0 {
				return nil, layoutErr("allocated section %d lies outside every PT_LOAD", i)
			}
			tail = append(tail, sec{i, s})
			continue
		}
		head = append(head, sec{i, s})
	}
	if len(tail) > maxTailSections {
		return nil, &UnsupportedError{What: "too many sections"}
	}
	sort.SliceStable(tail, func(a, b int) bool { return tail[a].h.off < tail[b].h.off })
	var mid []sec
	for _, i := range block {
		s := f.shs[i]
		s.off += dOff
		s.addr += dAddr
		mid = append(mid, sec{i, s})
	}
	sfSec := shdr{typ: shtGNUSFrame, flags: shfAlloc, addr: sfAddr, off: sfOff, size: size, addralign: 8}
	if secIdx >= 0 {
		sfSec.name = f.shs[secIdx].name
		mid = append(mid, sec{secIdx, sfSec})
	} else {
		mid = append(mid, sec{-1, sfSec})
	}
	// The grown name table.
	old := f.shs[f.shstrndx]
	tab := append([]byte(nil), f.in[old.off:old.off+old.size]...)
	if secIdx < 0 {
		if len(tab) == 0 || tab[len(tab)-1] != 0 {
			tab = append(tab, 0)
		}
		if uint64(len(tab)) > 0xffffffff {
			return nil, &UnsupportedError{What: "section name table too large"}
		}
		mid[len(mid)-1].h.name = uint32(len(tab))
		tab = append(tab, SectionName+"\x00"...)
	}
	cur := segEnd
	shstrPlaced := false
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
			shstrPlaced = true
		} else if s.typ != shtNobits {
			p.pieces = append(p.pieces, piece{off: cur, src: s.off, size: s.size})
			s.off = cur
		} else {
			s.off = cur
			continue
		}
		cur += s.size
	}
	order := append(append(append([]sec{{0, f.shs[0]}}, head...), mid...), tail...)
	if !shstrPlaced {
		for k := range order {
			if order[k].old == f.shstrndx {
				order[k].h.off, order[k].h.size = cur, uint64(len(tab))
			}
		}
		p.pieces = append(p.pieces, piece{off: cur, size: uint64(len(tab)), data: tab})
		cur += uint64(len(tab))
	}
	newIdx := make([]uint32, len(f.shs))
	for k, s := range order {
		if s.old >= 0 {
			newIdx[s.old] = uint32(k)
		}
	}
	identity := true
	for i := range f.shs {
		if newIdx[i] != uint32(i) && i != secIdx {
			identity = false
		}
	}
	if !identity && len(order) >= shnLoReserv {
		return nil, &UnsupportedError{What: "reordering more than 65279 sections"}
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

	// Symbols: renumber section indices, move the values of symbols in the
	// block.
	for _, s := range order[1:] {
		if (s.h.typ != shtSymtab && s.h.typ != shtDynsym) || s.old < 0 {
			continue
		}
		if f.hasSymtabShndx() && !identity {
			return nil, &UnsupportedError{What: "extended symbol section indices (SHT_SYMTAB_SHNDX)"}
		}
		in := f.shs[s.old]
		if in.entsize != 0 && in.entsize != symSize {
			return nil, formatErr(f.shoff+uint64(s.old)*shdrSize, "symbol table entry size %d, want %d", in.entsize, symSize)
		}
		data, changed := f.rewriteSymbols(f.in[in.off:in.off+in.size], newIdx, inBlock, dAddr)
		if changed {
			p.patches = append(p.patches, patch{off: s.h.off, data: data})
		}
	}

	p.shoff, _ = alignUp(cur, 8)
	p.OutputSize = p.shoff + uint64(len(p.shs))*shdrSize
	p.Moved = nil
	for _, i := range block {
		p.Moved = append(p.Moved, f.sectionName(f.shs[i]))
	}
	p.finishHeaders(newPhnum)
	return p, nil
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
// and the bytes and pages it would take belong to no other segment and to
// no section but those in block (which move away).
func (f *file) canExtendLoad(ld *phdr, end uint64, block map[int]bool) bool {
	if ld.filesz != ld.memsz || end > uint64(len(f.in)) && f.shs != nil && f.shoff < end {
		return false
	}
	lo, newSize := ld.off+ld.filesz, end-ld.off
	vlo, vhi := ld.vaddr+ld.filesz, ld.vaddr+newSize
	for _, q := range f.phs {
		if q == *ld || q.typ == ptPhdr || q.typ == ptNull {
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

// findBlock returns the sections the program header table grows into when
// it ends at newEnd instead of oldEnd, with everything that must move with
// them: the whole contiguous run they start, and every section a non-load
// segment describes together with one of them.
func (f *file) findBlock(oldEnd, newEnd uint64) ([]int, uint64, uint64, error) {
	if f.shs == nil {
		return f.findBlockNoSections(oldEnd, newEnd)
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
	// The block then takes every movable section that follows it up to
	// the first one that cannot move (the code, usually): the dynamic
	// tables keep their order among themselves (.dynsym before .dynstr and
	// the relocations that name it). BFD numbers the sections of a file it
	// rewrites by following sh_link from the relocation and symbol tables,
	// and leaves .dynsym's section indices as they were; a .dynsym that
	// moved alone would come out of strip pointing at the wrong sections.
	//
	// Only when a dynamic table has to move at all: .interp and the notes
	// alone leave the tables where patchelf expects them, right after the
	// headers (patchelf 0.14 puts a grown .dynamic into the space it finds
	// there, read-only, when the first page has room: the program then
	// crashes as ld.so writes DT_DEBUG; patchelf's master makes that
	// segment writable).
	dynAddrs := f.dynamicAddrs()
	var after []int
	tables := false
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ != shtNobits && s.size > 0 && s.off >= bEnd {
			after = append(after, i)
		}
		if s.typ != shtNobits && s.off >= bStart && s.off < bEnd && s.typ != shtNote && f.sectionName(s) != ".interp" {
			tables = true
		}
	}
	if !tables {
		after = nil
	}
	sort.SliceStable(after, func(a, b int) bool { return f.shs[after[a]].off < f.shs[after[b]].off })
	for _, i := range after {
		s := f.shs[i]
		if !f.movable(s, dynAddrs) || s.off-bEnd >= maxBlockAlign {
			break
		}
		bEnd = max(bEnd, s.off+s.size)
	}
	for changed := true; changed; {
		changed = false
		for i := 1; i < len(f.shs); i++ {
			s := f.shs[i]
			if s.typ != shtNobits && s.off >= bStart && s.off < bEnd && s.off+s.size > bEnd {
				changed = grow(s.off, s.off+s.size) || changed
			}
		}
		for _, p := range f.phs {
			if p.typ == ptLoad || p.typ == ptPhdr || p.typ == ptNull || p.filesz == 0 {
				continue
			}
			if p.off < bEnd && bStart < p.off+p.filesz {
				changed = grow(max(p.off, oldEnd), p.off+p.filesz) || changed
			}
		}
	}
	var block []int
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ == shtNobits || s.off < bStart || s.off >= bEnd {
			continue
		}
		if !f.movable(s, dynAddrs) {
			return nil, 0, 0, layoutErr("section %q at %#x follows the program header table and cannot move", f.sectionName(s), s.off)
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
func (f *file) findBlockNoSections(oldEnd, newEnd uint64) ([]int, uint64, uint64, error) {
	bStart, bEnd := uint64(0), uint64(0)
	for changed := true; changed; {
		changed = false
		for _, p := range f.phs {
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
	for _, p := range f.phs {
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
func (f *file) patchDynamic(p *Plan, moved func(uint64) (uint64, bool), outOff func(uint64) uint64) error {
	dyn, ok := f.dynamicRange()
	if !ok {
		return nil
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
	return nil
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
	out := append([]byte(nil), b...)
	changed := false
	bo := f.bo
	for o := 0; o+symSize <= len(out); o += symSize {
		e := out[o : o+symSize]
		shndx := uint32(bo.Uint16(e[6:]))
		if shndx == 0 || shndx >= shnLoReserv || int(shndx) >= len(newIdx) {
			continue
		}
		if ni := newIdx[shndx]; ni != shndx {
			bo.PutUint16(e[6:], uint16(ni))
			changed = true
		}
		if moved[int(shndx)] {
			bo.PutUint64(e[8:], bo.Uint64(e[8:])+d)
			changed = true
		}
	}
	return out, changed
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
