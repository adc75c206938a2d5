package elfwrite

import (
	"errors"
	"fmt"
	"slices"
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
// (a PT_LOAD and PT_GNU_SFRAME). The sections it grows into move, as one
// block with their internal layout kept, into the new read-only PT_LOAD
// above every existing segment, followed by .sframe; this is what
// patchelf does when it adds a segment. Everything that names the moved
// bytes is updated: the section headers, the program headers that
// describe them (PT_INTERP, PT_NOTE, PT_GNU_PROPERTY, ...), the address
// entries of .dynamic, and the values of symbols defined in them. No other
// loaded byte moves. The new segment starts right after the last loaded
// byte of the input; the non-loaded sections (.comment, .symtab, debug
// info, ...) follow it, and the section headers are re-sorted by offset
// (symbols' section indices and sh_link / sh_info are renumbered to
// match), as in a linker's output.
//
// What moves is kept as small as the file allows: the strategies below
// are tried in order, and the first whose block holds only .interp and
// notes wins. Only when none does may the dynamic tables move (the last
// strategy), since patchelf mishandles a file whose .dynsym and .dynstr
// no longer follow the notes. The file is refused when that fails too: a
// static executable's IRELATIVE relocations, which startup code finds
// through __rela_iplt_start, can never move.
//
// The steps, each a method of linker: editHeaders (the strategy's edits
// to the input's program headers), measure (the PT_LOAD that maps the
// table, where the loaded image ends), makeRoom (the block that moves, or
// growth of that PT_LOAD), placeSegment (where the new PT_LOAD goes),
// programHeaders, and sectionHeaders with the symbols (sections.go).

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
	return "cannot keep the program header table in place: " + e.Msg
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

// strategy is one way to make room for the grown program header table.
type strategy struct {
	name string
	// mergeNotes: PT_NOTEs whose contents lie back to back become one
	// (GNU ld, gold and lld write one per note alignment; a note parsed
	// with the smaller alignment must read the same, which is checked),
	// freeing headers so fewer bytes after the table must move.
	mergeNotes bool
	// dropPhdr: an ET_EXEC's PT_PHDR goes. GNU ld and gold write none
	// for static executables, lld and mold do. The kernel finds the table
	// through e_phoff (AT_PHDR); the startup code and ld.so of glibc and
	// musl read PT_PHDR only to learn the load base (AT_PHDR - p_vaddr),
	// which is 0 without it: right for a file that is not relocated.
	// Position-independent files keep theirs.
	dropPhdr bool
	// tables: the dynamic tables that follow the notes may move too.
	tables bool
}

// strategies are tried in order; the first that yields a layout wins.
var strategies = []strategy{
	{name: "grow the table, moving .interp and notes"},
	{name: "merge PT_NOTEs", mergeNotes: true},
	{name: "drop an executable's PT_PHDR", dropPhdr: true},
	{name: "merge PT_NOTEs, drop an executable's PT_PHDR", mergeNotes: true, dropPhdr: true},
	{name: "move the dynamic tables", tables: true},
}

// linker is one attempt at the linker-like layout with one strategy: the
// input and what the steps decide, in the order they decide it.
type linker struct {
	f              *file
	size           uint64
	secIdx, segIdx int // the existing .sframe section and PT_GNU_SFRAME, or -1
	st             strategy

	// editHeaders
	phs                []phdr // the input's program headers after the strategy's edits
	newPhnum           uint64
	oldPhEnd, newPhEnd uint64

	// measure
	phLoad   int    // index in phs of the PT_LOAD that maps the table
	loadEnd  uint64 // end of the loaded image in the file
	maxEnd   uint64 // end of the highest segment in memory
	segAlign uint64

	// makeRoom
	extendLoad                 bool // the table's PT_LOAD grows to hold it
	block                      []int
	inBlock                    map[int]bool
	bStart, bEnd, bAddr, bSize uint64

	// placeSegment
	segOff, segAddr, sfOff, sfAddr, segEnd uint64
	dOff, dAddr                            uint64 // how far the block moves in the file and in memory
}

// newLinkerPlan lays out the output as described at the top of this file.
// secIdx and segIdx are the existing .sframe section and PT_GNU_SFRAME
// (-1 when absent). The error is the last strategy's, which applies to
// every file.
func newLinkerPlan(f *file, size uint64, secIdx, segIdx int) (*Plan, error) {
	if f.shs != nil && f.shstrndx < 0 {
		return nil, &UnsupportedError{What: "section headers without a section name table (e_shstrndx is 0)"}
	}
	var err error
	for _, st := range strategies {
		l := &linker{f: f, size: size, secIdx: secIdx, segIdx: segIdx, st: st}
		var p *Plan
		p, err = l.plan()
		if err == nil {
			p.Strategy = st.name
			return p, nil
		}
		var le *LayoutError
		if !errors.As(err, &le) {
			return nil, err
		}
	}
	return nil, err
}

// plan runs the steps.
func (l *linker) plan() (*Plan, error) {
	if err := l.editHeaders(); err != nil {
		return nil, err
	}
	if err := l.measure(); err != nil {
		return nil, err
	}
	if err := l.makeRoom(); err != nil {
		return nil, err
	}
	if err := l.placeSegment(); err != nil {
		return nil, err
	}
	f := l.f
	p := &Plan{
		f: f, Size: l.size, Addr: l.sfAddr, Offset: l.sfOff,
		SegmentAddr: l.segAddr, SegmentOffset: l.segOff, SegmentSize: l.segEnd - l.segOff, SegmentAlign: l.segAlign,
		phoff: f.phoff,
	}
	if err := l.programHeaders(p); err != nil {
		return nil, err
	}
	l.imagePieces(p)
	if l.bSize > 0 {
		f.patchDynamic(p, l.movedAddr, l.outOff)
	}
	if f.shs == nil {
		// No section headers: copy whatever follows the loaded image as it is.
		n := uint64(len(f.in))
		p.OutputSize = l.segEnd
		if l.loadEnd < n {
			tail, _ := alignUp(l.segEnd, l.segAlign)
			tail += l.loadEnd % l.segAlign
			p.pieces = append(p.pieces, piece{off: tail, src: l.loadEnd, size: n - l.loadEnd})
			p.OutputSize = tail + n - l.loadEnd
		}
	} else if err := l.sectionHeaders(p); err != nil {
		return nil, err
	}
	p.finishHeaders(l.newPhnum)
	return p, nil
}

// editHeaders applies the strategy's edits to a copy of the program
// headers and sizes the output table.
func (l *linker) editHeaders() error {
	f := l.f
	l.phs = slices.Clone(f.phs)
	if l.st.dropPhdr {
		i := slices.IndexFunc(l.phs, func(p phdr) bool { return p.typ == ptPhdr })
		if i < 0 || f.bo.Uint16(f.in[16:]) != etExec {
			return layoutErr("no PT_PHDR of an executable to drop")
		}
		l.phs = slices.Delete(l.phs, i, i+1)
	}
	if l.st.mergeNotes {
		phs, ok := f.mergeNotes(l.phs)
		if !ok {
			return layoutErr("the notes cannot share one PT_NOTE")
		}
		l.phs = phs
	}
	l.newPhnum = uint64(len(l.phs)) + 1 // the new PT_LOAD
	if l.segIdx < 0 {
		l.newPhnum++ // PT_GNU_SFRAME
	}
	if l.newPhnum >= pnXNum {
		return &UnsupportedError{What: fmt.Sprintf("%d program headers", l.newPhnum)}
	}
	l.oldPhEnd = f.phoff + uint64(len(f.phs))*phdrSize
	l.newPhEnd = f.phoff + l.newPhnum*phdrSize
	return nil
}

// measure finds the PT_LOAD that maps the table and the extent of the
// loaded image.
func (l *linker) measure() error {
	f := l.f
	l.phLoad = -1
	l.segAlign = minSegAlign
	for i, p := range l.phs {
		if p.memsz > 0 && p.vaddr+p.memsz > l.maxEnd {
			l.maxEnd = p.vaddr + p.memsz
		}
		if p.typ != ptLoad {
			continue
		}
		l.segAlign = max(l.segAlign, p.align)
		l.loadEnd = max(l.loadEnd, p.off+p.filesz)
		if p.off <= f.phoff && l.oldPhEnd <= p.off+p.filesz {
			l.phLoad = i
		}
	}
	if l.phLoad < 0 {
		return layoutErr("the program header table at %#x is not inside a PT_LOAD", f.phoff)
	}
	for i, s := range f.shs {
		if i > 0 && s.flags&shfAlloc != 0 && s.typ != shtNobits {
			l.loadEnd = max(l.loadEnd, s.off+s.size)
		}
	}
	l.loadEnd = max(l.loadEnd, l.newPhEnd)
	// Non-loaded bytes after the loaded image move behind the new segment;
	// nothing but section headers may name them.
	for i, p := range l.phs {
		if p.typ != ptLoad && p.typ != ptNull && p.filesz > 0 && p.off+p.filesz > l.loadEnd {
			return layoutErr("segment %d (type %#x) lies outside every PT_LOAD", i, p.typ)
		}
	}
	return nil
}

// placeSegment puts the new PT_LOAD after the loaded image in the file and
// above every segment in memory: the block (if any), then .sframe.
func (l *linker) placeSegment() error {
	bAlign := uint64(8)
	for _, i := range l.block {
		bAlign = max(bAlign, l.f.shs[i].addralign)
	}
	for _, p := range l.phs {
		if p.typ != ptLoad && p.filesz > 0 && p.off >= l.bStart && p.off+p.filesz <= l.bEnd {
			bAlign = max(bAlign, p.align)
		}
	}
	if bAlign > maxBlockAlign || bAlign&(bAlign-1) != 0 {
		return layoutErr("a section after the program header table is aligned to %#x", bAlign)
	}
	if l.bSize > 0 {
		// The block keeps its offset modulo its alignment.
		l.segOff = l.loadEnd + (l.bStart%bAlign+bAlign-l.loadEnd%bAlign)%bAlign
	} else {
		l.segOff, _ = alignUp(l.loadEnd, 8)
	}
	base, ok := alignUp(l.maxEnd, l.segAlign)
	if !ok || base+l.segOff%l.segAlign < base {
		return &UnsupportedError{What: "no address space left above the existing segments"}
	}
	l.segAddr = base + l.segOff%l.segAlign
	l.sfOff, _ = alignUp(l.segOff+l.bSize, 8)
	l.sfAddr = l.segAddr + (l.sfOff - l.segOff)
	l.segEnd = l.sfOff + l.size
	if l.segEnd < l.sfOff || l.segAddr+(l.segEnd-l.segOff) < l.segAddr {
		return &UnsupportedError{What: fmt.Sprintf("section size %#x too large", l.size)}
	}
	l.dOff, l.dAddr = l.segOff-l.bStart, l.segAddr-l.bAddr // modular arithmetic; only used when bSize > 0
	return nil
}

// movedAddr maps an input address to the output: addresses in the block
// move with it.
func (l *linker) movedAddr(a uint64) (uint64, bool) {
	if l.bSize > 0 && a >= l.bAddr && a < l.bAddr+l.bSize {
		return a + l.dAddr, true
	}
	return a, false
}

// outOff maps an input offset of the loaded image to the output.
func (l *linker) outOff(o uint64) uint64 {
	if l.bSize > 0 && o >= l.bStart && o < l.bEnd {
		return o + l.dOff
	}
	return o
}

// programHeaders builds the output's program header table: the edited
// input headers with those describing the block moved, the table's own
// PT_PHDR and PT_LOAD grown, the new PT_LOAD after the last PT_LOAD and
// PT_GNU_SFRAME after PT_GNU_EH_FRAME (or last).
func (l *linker) programHeaders(p *Plan) error {
	sfSeg := phdr{typ: ptGNUSFrame, flags: pfR, off: l.sfOff, vaddr: l.sfAddr, paddr: l.sfAddr, filesz: l.size, memsz: l.size, align: 8}
	load := phdr{typ: ptLoad, flags: pfR, off: l.segOff, vaddr: l.segAddr, paddr: l.segAddr, filesz: l.segEnd - l.segOff, memsz: l.segEnd - l.segOff, align: l.segAlign}
	lastLoad, ehFrame := -1, -1
	for i, ph := range l.phs {
		switch ph.typ {
		case ptLoad:
			lastLoad = i
		case ptGNUEHFrame:
			ehFrame = i
		}
	}
	newPhSize := l.newPhnum * phdrSize
	p.phs = make([]phdr, 0, l.newPhnum)
	for i, ph := range l.phs {
		switch {
		case ph.typ == ptPhdr:
			ph.filesz, ph.memsz = newPhSize, newPhSize
		case ph.typ == ptGNUSFrame:
			ph = sfSeg
		case ph.typ == ptLoad && l.extendLoad && i == l.phLoad:
			ph.filesz, ph.memsz = l.newPhEnd-ph.off, l.newPhEnd-ph.off
		case ph.typ == ptLoad || ph.typ == ptNull:
		case l.bSize > 0 && ph.filesz > 0 && ph.off >= l.bStart && ph.off+ph.filesz <= l.bEnd:
			ph.off += l.dOff
			ph.vaddr += l.dAddr
			ph.paddr += l.dAddr
		case l.bSize > 0 && ph.filesz > 0 && ph.off < l.bEnd && l.bStart < ph.off+ph.filesz:
			return layoutErr("segment %d (type %#x) covers part of the sections to move", i, ph.typ)
		}
		p.phs = append(p.phs, ph)
		if i == lastLoad {
			p.phs = append(p.phs, load)
		}
		if l.segIdx < 0 && (i == ehFrame || ehFrame < 0 && i == len(l.phs)-1) {
			p.phs = append(p.phs, sfSeg)
		}
	}
	return nil
}

// imagePieces lays the loaded image, the moved block and .sframe, and
// clears what the output no longer uses: the block's old place beyond the
// table, the rest of a table that shrank, a section header table inside
// the loaded image.
func (l *linker) imagePieces(p *Plan) {
	f := l.f
	p.pieces = append(p.pieces, piece{off: 0, src: 0, size: min(l.loadEnd, uint64(len(f.in)))})
	if l.bSize > 0 {
		p.pieces = append(p.pieces, piece{off: l.segOff, src: l.bStart, size: l.bSize})
		if l.bEnd > l.newPhEnd {
			p.patches = append(p.patches, patch{off: l.newPhEnd, zeros: l.bEnd - l.newPhEnd})
		}
	}
	if l.newPhEnd < l.oldPhEnd {
		p.patches = append(p.patches, patch{off: l.newPhEnd, zeros: l.oldPhEnd - l.newPhEnd})
	}
	p.sfPiece = len(p.pieces)
	p.pieces = append(p.pieces, piece{off: l.sfOff, size: l.size})
	// A section header table inside the loaded image (Go's linker puts it
	// right after the program headers) is cleared there: the output has
	// it at the end, as other linkers do.
	if f.shs != nil && f.shoff < l.loadEnd {
		shEnd := min(f.shoff+uint64(len(f.shs))*shdrSize, l.loadEnd)
		p.patches = append(p.patches, patch{off: f.shoff, zeros: shEnd - f.shoff})
	}
}
