package elfwrite

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// Plan is the layout of the output file for one input and one .sframe
// size. Its exported fields describe where things land; all addresses are
// link-time virtual addresses (for ET_DYN, before the load bias).
type Plan struct {
	Addr   uint64 // virtual address of the .sframe data
	Offset uint64 // file offset of the .sframe data in the output
	Size   uint64 // size of the .sframe data the plan was made for

	SegmentAddr   uint64 // p_vaddr of the new PT_LOAD
	SegmentOffset uint64 // p_offset of the new PT_LOAD
	SegmentSize   uint64 // p_filesz = p_memsz of the new PT_LOAD
	SegmentAlign  uint64 // p_align of the new PT_LOAD

	PHDRMoved  bool   // fragile layout only: the program header table moved into the new segment
	OutputSize uint64 // size of the output file

	// Moved names the sections that moved from behind the program header
	// table into the new segment (linker-like layout).
	Moved []string
	// Strategy names how the linker-like layout made room for the program
	// headers (see strategies in layout.go); empty for the fragile layout.
	Strategy string

	f        *file
	phoff    uint64 // output e_phoff
	phs      []phdr // output program headers
	shoff    uint64 // output e_shoff
	shs      []shdr // output section headers; nil when the input has none
	shstrndx int    // output index of the section name table
	pieces   []piece
	patches  []patch
	sfPiece  int  // index in pieces of the .sframe data
	fragile  bool // made for Options.AppendSegment
	opts     Options
}

// Options returns the options the plan was made with.
func (p *Plan) Options() Options { return p.opts }

// Overhead is what the output adds beyond the .sframe data itself: program
// and section headers, the moved sections' new copy, padding.
func (p *Plan) Overhead() int64 {
	return int64(p.OutputSize) - int64(len(p.f.in)) - int64(p.Size)
}

// NewPlan parses in (a linked ELF64 executable or shared library), checks
// it and lays out the output for a .sframe section of size bytes. It does
// not modify in; the returned Plan keeps a reference to it.
func NewPlan(in []byte, size uint64, opts Options) (*Plan, error) {
	f, err := parse(in)
	if err != nil {
		return nil, err
	}
	return newPlan(f, size, opts)
}

// newPlan is NewPlan for a parsed input, which it does not modify.
func newPlan(f *file, size uint64, opts Options) (*Plan, error) {
	p, err := layout(f, size, opts)
	if err != nil {
		return nil, err
	}
	if err := p.disjoint(); err != nil {
		return nil, err
	}
	p.opts = opts
	return p, nil
}

// disjoint checks what every layout promises and a hostile input could
// break unseen: the pieces of the output do not overlap, and no patch
// writes into .sframe (a symbol table rewritten over it would leave a
// section that does not decode).
func (p *Plan) disjoint() error {
	var a piece // the last piece with bytes, in output order
	for _, i := range p.byOffset() {
		b := p.pieces[i]
		if b.size == 0 {
			continue
		}
		if a.size > 0 && a.off+a.size > b.off {
			return &UnsupportedError{What: fmt.Sprintf("a layout where output ranges [%#x, +%#x) and [%#x, +%#x) overlap (sections sharing bytes?)", a.off, a.size, b.off, b.size)}
		}
		a = b
	}
	sf := p.pieces[p.sfPiece]
	for _, pt := range p.patches {
		if n := pt.size(); n > 0 && pt.off < sf.off+sf.size && sf.off < pt.off+n {
			return &UnsupportedError{What: fmt.Sprintf("a layout where the bytes at %#x (+%#x) would be rewritten inside .sframe", pt.off, n)}
		}
	}
	return nil
}

func layout(f *file, size uint64, opts Options) (*Plan, error) {
	secIdx, segIdx, err := f.existingSFrame()
	if err != nil {
		return nil, err
	}
	if (secIdx >= 0 || segIdx >= 0) && !opts.Replace {
		return nil, &HasSFrameError{Section: secIdx >= 0, Segment: segIdx >= 0}
	}
	if f.shs != nil && secIdx < 0 && f.shstrndx < 0 {
		return nil, &UnsupportedError{What: "section headers without a section name table (e_shstrndx is 0)"}
	}
	if !opts.AppendSegment {
		return newLinkerPlan(f, size, secIdx, segIdx)
	}
	return newFragilePlan(f, size, secIdx, segIdx, opts)
}

// existingSFrame returns the index of the input's .sframe section and of
// its PT_GNU_SFRAME, -1 for either that is absent.
func (f *file) existingSFrame() (secIdx, segIdx int, err error) {
	secIdx, segIdx = -1, -1
	for i := 1; i < len(f.shs); i++ {
		s := f.shs[i]
		if s.typ == shtGNUSFrame || f.sectionName(s) == SectionName {
			if secIdx >= 0 {
				return 0, 0, &UnsupportedError{What: fmt.Sprintf("more than one .sframe section (%d and %d)", secIdx, i)}
			}
			secIdx = i
		}
	}
	for i, p := range f.phs {
		if p.typ == ptGNUSFrame {
			if segIdx >= 0 {
				return 0, 0, &UnsupportedError{What: fmt.Sprintf("more than one PT_GNU_SFRAME (%d and %d)", segIdx, i)}
			}
			segIdx = i
		}
	}
	return secIdx, segIdx, nil
}

// canGrowPhdrsInPlace reports whether the program header table can grow to
// size bytes where it is: the extra bytes are inside the file, zero, inside
// the PT_LOAD that maps the table (if any), and used by no header, section
// or other segment. Without section headers nothing can be proven unused.
func (f *file) canGrowPhdrsInPlace(size uint64) bool {
	return f.canGrowPhdrs(f.phs, size, false, false)
}

// canGrowPhdrs is canGrowPhdrsInPlace with the program headers phs (the
// input's, or those a layout strategy edited); with extend, the PT_LOAD that maps
// the table may grow to cover it (newLinkerPlan checks that it can); with
// movingShdrs, the section header table's bytes count as free, as the
// output has it elsewhere.
func (f *file) canGrowPhdrs(phs []phdr, size uint64, extend, movingShdrs bool) bool {
	n := uint64(len(f.in))
	oldEnd := f.phoff + uint64(len(f.phs))*phdrSize
	if f.shs == nil || !within(f.phoff, size, n) {
		return false
	}
	newEnd := f.phoff + size
	overlaps := func(off, sz uint64) bool { return sz > 0 && off < newEnd && oldEnd < off+sz }
	shEnd := f.shoff + uint64(len(f.shs))*shdrSize
	for o, b := range f.in[oldEnd:newEnd] {
		if at := oldEnd + uint64(o); b != 0 && !(movingShdrs && at >= f.shoff && at < shEnd) {
			return false
		}
	}
	if overlaps(0, ehdrSize) || !movingShdrs && overlaps(f.shoff, uint64(len(f.shs))*shdrSize) {
		return false
	}
	for i, s := range f.shs {
		if i > 0 && s.typ != shtNobits && overlaps(s.off, s.size) {
			return false
		}
	}
	for _, p := range phs {
		switch p.typ {
		case ptPhdr:
		case ptLoad:
			if !extend && p.off <= f.phoff && oldEnd <= p.off+p.filesz && newEnd > p.off+p.filesz {
				return false // the table is mapped but would outgrow its segment
			}
			if extend && p.filesz > 0 && !(p.off <= f.phoff && oldEnd <= p.off+p.filesz) && p.off < newEnd && oldEnd < p.off+p.filesz {
				return false // another segment's bytes
			}
		default:
			if overlaps(p.off, p.filesz) {
				return false
			}
		}
	}
	return true
}

// Bytes returns the output file with sframe as the .sframe contents.
// len(sframe) must equal p.Size.
func (p *Plan) Bytes(sframe []byte) ([]byte, error) {
	if uint64(len(sframe)) != p.Size {
		return nil, fmt.Errorf("%w: got %d bytes, planned %d", ErrSizeMismatch, len(sframe), p.Size)
	}
	out := make([]byte, p.OutputSize)
	for i, pc := range p.pieces {
		copy(out[pc.off:pc.off+pc.size], p.content(i, pc, sframe))
	}
	for _, pt := range p.patches {
		if pt.data == nil {
			clear(out[pt.off : pt.off+pt.zeros])
		}
		copy(out[pt.off:], pt.data)
	}
	return out, nil
}

func (p *Plan) content(i int, pc piece, sframe []byte) []byte {
	switch {
	case i == p.sfPiece:
		return sframe
	case pc.data != nil:
		return pc.data
	}
	return p.f.in[pc.src : pc.src+pc.size]
}

// writeChunk bounds the buffer Write assembles the output in.
const writeChunk = 1 << 20

// Write writes the output file to w (see Bytes) without building it in
// memory: the output is assembled one chunk at a time from the input's
// bytes, the new data and the planned patches, in the order Bytes applies
// them; bytes no piece covers are zero.
func (p *Plan) Write(w io.Writer, sframe []byte) error {
	if uint64(len(sframe)) != p.Size {
		return fmt.Errorf("%w: got %d bytes, planned %d", ErrSizeMismatch, len(sframe), p.Size)
	}
	a := p.assembler(sframe)
	return a.write(w, 0, p.OutputSize)
}

// minFileCopy is the shortest run of unchanged input bytes WriteFile
// copies file to file rather than through its buffer (a variable for the
// tests, which also copy short runs).
var minFileCopy uint64 = 64 << 10

// WriteFile writes the output file to dst, as Write does, but copies the
// long runs of input bytes that no patch touches from src (the input
// file, positioned anywhere) to dst file to file: io.Copy between two
// files, which is copy_file_range on Linux, so those bytes never pass
// through this process's memory. dst is written from its current offset
// on; both files' offsets move.
func (p *Plan) WriteFile(dst, src *os.File, sframe []byte) error {
	if uint64(len(sframe)) != p.Size {
		return fmt.Errorf("%w: got %d bytes, planned %d", ErrSizeMismatch, len(sframe), p.Size)
	}
	a := p.assembler(sframe)
	base, err := dst.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	pos := uint64(0)
	for _, c := range p.cleanRuns() {
		if err := a.write(dst, pos, c.off); err != nil {
			return err
		}
		reserve(dst, uint64(base)+c.off, c.size)
		if _, err := src.Seek(int64(c.src), io.SeekStart); err != nil {
			return err
		}
		n, err := io.Copy(dst, &io.LimitedReader{R: src, N: int64(c.size)})
		if err != nil {
			return err
		}
		if uint64(n) != c.size {
			return fmt.Errorf("input file shrank while it was copied (%d of %d bytes at %#x)", n, c.size, c.src)
		}
		pos = c.off + c.size
	}
	return a.write(dst, pos, p.OutputSize)
}

// cleanRuns returns the output ranges, in order, that hold input bytes no
// patch overwrites and are at least minFileCopy long.
func (p *Plan) cleanRuns() []piece {
	var out []piece
	for i, pc := range p.pieces {
		if i == p.sfPiece || pc.data != nil || pc.size == 0 {
			continue
		}
		runs := []piece{pc}
		for _, pt := range p.patches {
			lo, hi := pt.off, pt.off+pt.size()
			var next []piece
			for _, r := range runs {
				if hi <= r.off || lo >= r.off+r.size {
					next = append(next, r)
					continue
				}
				if lo > r.off {
					next = append(next, piece{off: r.off, src: r.src, size: lo - r.off})
				}
				if e := r.off + r.size; hi < e {
					next = append(next, piece{off: hi, src: r.src + (hi - r.off), size: e - hi})
				}
			}
			runs = next
		}
		for _, r := range runs {
			if r.size >= minFileCopy {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].off < out[b].off })
	return out
}

// byOffset returns the indices of the pieces sorted by output offset
// (pieces at one offset in their order).
func (p *Plan) byOffset() []int {
	idx := make([]int, len(p.pieces))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return p.pieces[idx[a]].off < p.pieces[idx[b]].off })
	return idx
}

// assembler builds output bytes from the plan's pieces and patches.
type assembler struct {
	p      *Plan
	sframe []byte
	idx    []int  // pieces sorted by output offset
	zeros  []span // the ranges patches clear
	buf    []byte
	// sparse: the output is a new file, whose bytes read as zero until
	// written; a chunk with nothing but zeros is skipped (seek), not
	// written (the old places of moved sections are megabytes of them).
	sparse bool
}

type span struct{ lo, hi uint64 }

func (p *Plan) assembler(sframe []byte) *assembler {
	a := &assembler{p: p, sframe: sframe, idx: p.byOffset()}
	for _, pt := range p.patches {
		if pt.data == nil && pt.zeros > 0 {
			a.zeros = append(a.zeros, span{pt.off, pt.off + pt.zeros})
		}
	}
	return a
}

// write writes output bytes [from, to) to w, one chunk at a time; a run
// that comes whole from one slice in memory (the section, a rewritten
// table) is written from it, not through the buffer.
func (a *assembler) write(w io.Writer, from, to uint64) error {
	p := a.p
	for lo := from; lo < to; {
		if b := a.whole(lo, to); b != nil {
			if _, err := w.Write(b); err != nil {
				return err
			}
			lo += uint64(len(b))
			continue
		}
		hi := min(lo+writeChunk, to)
		if e := a.nextWhole(lo, hi); e < hi {
			hi = e // the chunk stops where a whole run starts
		}
		if seeker, ok := w.(io.Seeker); ok && a.sparse {
			// In a new file, zeros are skipped, with no buffer touched;
			// a chunk ends where its last bytes other than zero do.
			end := a.fill(nil, lo, hi)
			if end == lo {
				if _, err := seeker.Seek(int64(hi-lo), io.SeekCurrent); err != nil {
					return err
				}
				lo = hi
				continue
			}
			hi = end
		}
		if a.buf == nil {
			a.buf = make([]byte, min(writeChunk, p.OutputSize))
		}
		b := a.buf[:hi-lo]
		clear(b)
		a.fill(b, lo, hi)
		lo = hi
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// fill assembles output bytes [lo, hi) into b (cleared, hi-lo long) and
// returns the end of the bytes it copied into it (lo for none); with b
// nil it copies nothing, only says where that end would be.
func (a *assembler) fill(b []byte, lo, hi uint64) (end uint64) {
	end = lo
	p := a.p
	idx := a.idx
	// Pieces do not overlap: start at the first one ending after lo.
	k := sort.Search(len(idx), func(k int) bool { pc := p.pieces[idx[k]]; return pc.off+pc.size > lo })
	for ; k < len(idx) && p.pieces[idx[k]].off < hi; k++ {
		i := idx[k]
		pc := p.pieces[i]
		s, e := max(pc.off, lo), min(pc.off+pc.size, hi)
		// Bytes a cleared range covers are left zero, unread.
		for s < e {
			t := e
			for _, z := range a.zeros {
				if z.lo <= s && s < z.hi {
					s = min(z.hi, e)
				} else if s < z.lo && z.lo < t {
					t = z.lo
				}
			}
			if s >= t {
				continue
			}
			if b != nil {
				copy(b[s-lo:t-lo], p.content(i, pc, a.sframe)[s-pc.off:t-pc.off])
			}
			end = max(end, t)
			s = t
		}
	}
	for _, pt := range p.patches {
		if e := pt.off + pt.size(); pt.off < hi && e > lo {
			s, e := max(pt.off, lo), min(e, hi)
			if pt.data == nil {
				if b != nil {
					clear(b[s-lo : e-lo])
				}
				continue
			}
			if b != nil {
				copy(b[s-lo:e-lo], pt.data[s-pt.off:e-pt.off])
			}
			end = max(end, e)
		}
	}
	return end
}

// minWhole is the shortest run write takes straight from its slice (a
// variable for the tests, which also take short runs).
var minWhole uint64 = 64 << 10

// whole returns the output bytes from lo on (up to to) when they come
// whole from one slice in memory, at least minWhole of them: the new
// section or a piece with data no patch touches, or one patch with data
// no other patch touches. nil otherwise.
func (a *assembler) whole(lo, to uint64) []byte {
	p := a.p
	var over []int // the patches over [lo, e)
	span := func(off, size uint64, data []byte) []byte {
		if data == nil || off > lo || off+size <= lo {
			return nil
		}
		e := min(off+size, to)
		if e-lo < minWhole {
			return nil
		}
		over = over[:0]
		for j, pt := range p.patches {
			if n := pt.size(); n > 0 && pt.off < e && lo < pt.off+n {
				over = append(over, j)
			}
		}
		return data[lo-off : e-off]
	}
	for j, pt := range p.patches {
		if b := span(pt.off, pt.size(), pt.data); b != nil && len(over) == 1 && over[0] == j {
			return b
		}
	}
	for i, pc := range p.pieces {
		if i != p.sfPiece && pc.data == nil {
			continue
		}
		if b := span(pc.off, pc.size, p.content(i, pc, a.sframe)); b != nil && len(over) == 0 {
			return b
		}
	}
	return nil
}

// nextWhole returns where the first run whole would take starts within
// (lo, hi), or hi.
func (a *assembler) nextWhole(lo, hi uint64) uint64 {
	p := a.p
	e := hi
	for _, pt := range p.patches {
		if pt.data != nil && pt.off > lo && pt.off < e && pt.size() >= minWhole {
			e = pt.off
		}
	}
	for i, pc := range p.pieces {
		if (i == p.sfPiece || pc.data != nil) && pc.off > lo && pc.off < e && pc.size >= minWhole {
			e = pc.off
		}
	}
	return e
}

// maxReplans bounds how often Insert re-encodes when the section address
// moves with its size.
const maxReplans = 4

// Insert plans, calls encode with the address .sframe will have, and
// returns the output file. If the encoded size changes the layout so that
// the address moves, it re-plans and re-encodes (a bounded number of times).
func Insert(in []byte, opts Options, encode func(addr uint64) ([]byte, error)) ([]byte, error) {
	p, data, err := Place(in, opts, encode)
	if err != nil {
		return nil, err
	}
	return p.Bytes(data)
}

// Place is Insert without building the output: it returns the final plan
// and the encoded section, for Plan.Write or Plan.WriteFile.
func Place(in []byte, opts Options, encode func(addr uint64) ([]byte, error)) (*Plan, []byte, error) {
	p, err := NewPlan(in, 0, opts)
	if err != nil {
		return nil, nil, err
	}
	return PlaceFrom(p, encode)
}

// PlaceFrom is Place starting from a plan NewPlan made for the input and
// options (for any size): the input is not parsed again.
func PlaceFrom(p *Plan, encode func(addr uint64) ([]byte, error)) (*Plan, []byte, error) {
	opts := p.opts
	for range maxReplans {
		data, err := encode(p.Addr)
		if err != nil {
			return nil, nil, err
		}
		q, err := newPlan(p.f, uint64(len(data)), opts)
		if err != nil {
			return nil, nil, err
		}
		if q.Addr == p.Addr {
			return q, data, nil
		}
		p = q
	}
	return nil, nil, fmt.Errorf(".sframe address did not settle after %d encodings", maxReplans)
}
