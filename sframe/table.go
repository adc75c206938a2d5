package sframe

import (
	"encoding/binary"
	"sort"
)

// Table is an SFrame section opened for reading, decoded lazily in the way
// of libsframe: Open checks the header and the FDE index (where each
// function's FRE data starts; in V1/V2, whose index entries also hold the
// FRE count and types, those and the total FRE count) and finds the
// functions' address order, but leaves the FREs as bytes. A lookup checks
// and decodes only the attribute and FREs of the one function that holds
// the PC, and reports malformed bytes there as an *Error; FDE does the same
// for the function it reads, Check for all.
//
// The section bytes are kept (not copied) and must not change while the
// Table is in use. A Table is safe for concurrent use.
type Table struct {
	Header Header
	Addr   uint64 // the section's address

	b       []byte
	big     bool
	pcrel   bool
	v3le    bool // a little-endian V3 section: the lookups' fast path
	fdeBase int  // section offset of the FDE index
	fdeSize int  // the size of an index entry
	startW  int  // the size of an index entry's start field, which the size and FRE offset follow
	freBase int  // section offset of the FRE sub-section
	freEnd  int  // section offset of the FRE sub-section's end
	n       int
	// order lists FDE indices by start address when the section's index is
	// not sorted; nil when it is. Positions below are in address order.
	order []uint32
	base  uint64 // the lowest start address
	shift uint8  // log2 of the granule size
	// gran maps the code to positions: gran[g] is the position of the
	// last function starting at or before base + g<<shift. A lookup reads
	// one entry, then the section's own index entries from there (usually
	// one or two, which hold start, size and FRE offset together), then
	// the function's FREs: three dependent loads in the common case. The
	// granule is sized for about one entry per function (4 bytes each).
	// nil when the section has no functions.
	gran []uint32
}

// granPerFDE is the number of granule entries per function Open aims at:
// with more, a lookup's forward scan is shorter, at 4 bytes each.
const granPerFDE = 1

// Open checks the header and the FDE index of an SFrame section and returns
// a Table for lookups. addr is the section's address, used to resolve
// function start offsets (relative to the section start, or to the start
// field itself when FlagFDEFuncStartPCRel is set). Either byte order is
// accepted; it is detected from the magic. Every count, offset and length
// is checked against len(b) before anything is allocated. Open allocates
// the search index: at most 4 bytes per FDE, plus 4 when the section's
// index is not sorted by start address (whatever its flag says).
func Open(b []byte, addr uint64) (*Table, error) { return open(b, addr, true) }

// open is Open; fast selects the little-endian V3 fast path for such a
// section (the tests compare it with the general code).
func open(b []byte, addr uint64, fast bool) (*Table, error) {
	h, big, fdeSize, err := readHeader(b)
	if err != nil {
		return nil, err
	}
	hsz := h.Size()
	t := &Table{Header: h, Addr: addr, b: b, big: big, fdeSize: fdeSize, startW: 4}
	if h.Version == Version3 {
		t.startW = 8
	}
	t.pcrel = h.Flags&FlagFDEFuncStartPCRel != 0
	t.fdeBase = hsz + int(h.FDEOff)
	t.freBase = hsz + int(h.FREOff)
	t.freEnd = t.freBase + int(h.FRELen)
	t.n = int(h.NumFDEs)
	t.v3le = fast && h.Version == Version3 && !big
	if err := t.checkFDEs(); err != nil {
		return nil, err
	}
	return t, nil
}

// readHeader reads and checks the header of section b: the magic (which
// gives the byte order), a known version and ABI, and the auxiliary
// header, the FDE index and the FRE sub-section inside the section, with
// room for NumFREs FREs. It returns the header, the byte order and the
// size of an FDE index entry.
func readHeader(b []byte) (h Header, big bool, fdeSize int, err error) {
	if len(b) < HeaderSize {
		return h, false, 0, errorf(len(b), "section too short for a header (%d bytes, need %d)", len(b), HeaderSize)
	}
	var order binary.ByteOrder = binary.LittleEndian
	switch {
	case binary.LittleEndian.Uint16(b) == Magic:
	case binary.BigEndian.Uint16(b) == Magic:
		order, big = binary.BigEndian, true
	default:
		return h, false, 0, errorf(0, "bad magic %#04x", binary.LittleEndian.Uint16(b))
	}
	h = Header{
		Version: b[2], Flags: b[3], ABI: ABI(b[4]),
		CFAFixedFP: int8(b[5]), CFAFixedRA: int8(b[6]),
		NumFDEs: order.Uint32(b[8:]), NumFREs: order.Uint32(b[12:]), FRELen: order.Uint32(b[16:]),
		FDEOff: order.Uint32(b[20:]), FREOff: order.Uint32(b[24:]),
	}
	if fdeSize = h.FDESize(); fdeSize == 0 {
		return h, big, 0, errorf(2, "unsupported version %d", h.Version)
	}
	if h.ABI < ABIAArch64BE || h.ABI > ABIS390XBE {
		return h, big, 0, errorf(4, "unknown ABI/arch id %d", h.ABI)
	}
	n := len(b)
	hsz := HeaderSize + int(b[7])
	if hsz > n {
		return h, big, 0, errorf(7, "auxiliary header length %d runs past the end of the %d-byte section", b[7], n)
	}
	body := uint64(n - hsz)
	if uint64(h.FDEOff) > body || uint64(h.NumFDEs)*uint64(fdeSize) > body-uint64(h.FDEOff) {
		return h, big, 0, errorf(8, "%d FDEs of %d bytes at FDE offset %#x do not fit in the %#x bytes after the header", h.NumFDEs, fdeSize, h.FDEOff, body)
	}
	if uint64(h.FREOff) > body || uint64(h.FRELen) > body-uint64(h.FREOff) {
		return h, big, 0, errorf(16, "FRE sub-section (offset %#x, length %#x) does not fit in the %#x bytes after the header", h.FREOff, h.FRELen, body)
	}
	// Every FRE takes at least two bytes.
	if uint64(h.NumFREs) > uint64(h.FRELen)/2 {
		return h, big, 0, errorf(12, "%d FREs cannot fit in an FRE sub-section of %d bytes", h.NumFREs, h.FRELen)
	}
	h.AuxHdr = b[HeaderSize:hsz:hsz]
	return h, big, fdeSize, nil
}

func (t *Table) u16(off int) uint16 {
	if t.big {
		return binary.BigEndian.Uint16(t.b[off:])
	}
	return binary.LittleEndian.Uint16(t.b[off:])
}

func (t *Table) u32(off int) uint32 {
	if t.big {
		return binary.BigEndian.Uint32(t.b[off:])
	}
	return binary.LittleEndian.Uint32(t.b[off:])
}

func (t *Table) u64(off int) uint64 {
	if t.big {
		return binary.BigEndian.Uint64(t.b[off:])
	}
	return binary.LittleEndian.Uint64(t.b[off:])
}

// The fields of FDE i's index entry (index order), as every version lays
// them out: the start field (int32 in V1/V2, int64 in V3), the function's
// size and its FRE offset; then in V1/V2 the FRE count at 12, the info
// byte at 16, and in V2 the repeat size at 17 and padding at 18. In V3
// the last three are in the attribute that starts the function's FRE
// data: FRE count (uint16), info, info2, repeat size. fde decodes an
// entry; start, size and freOffAt read one field, for
// searching the index.

// start is the start field resolved to an address (plus the entry's own offset
// when starts are PC-relative), spelled out so that it inlines into the
// index searches.
func (t *Table) start(i int) uint64 {
	off := t.fdeBase + i*t.fdeSize
	var s uint64
	if t.startW == 8 {
		s = t.u64(off)
	} else {
		s = uint64(int64(int32(t.u32(off))))
	}
	s += t.Addr
	if t.pcrel {
		s += uint64(off)
	}
	return s
}

func (t *Table) size(i int) uint32 { return t.u32(t.fdeBase + i*t.fdeSize + t.startW) }

func (t *Table) freOffAt(i int) uint32 { return t.u32(t.fdeBase + i*t.fdeSize + t.startW + 4) }

// fde decodes FDE i (index order) into d, leaving d.FREs alone: its index
// entry and, in V3, its attribute. It checks what reading the function's
// FREs relies on: FRE data inside the FRE sub-section, a known FRE and FDE
// type, and room there for the FREs the FDE claims. It returns the section
// offset of the function's first FRE and the number of FREs. (Open has
// bounded the index entry, and in V3 the attribute.)
func (t *Table) fde(i int, d *FDE) (pos, n int, err error) {
	off := t.fdeBase + i*t.fdeSize
	d.Start, d.Size, d.FREOff = t.start(i), t.u32(off+t.startW), t.u32(off+t.startW+4)
	pos = t.freBase + int(d.FREOff)
	var info fdeInfo
	var info2 uint8
	if t.startW == 8 {
		a := t.b[pos:][:fdeAttrSizeV3]
		n, info, info2, d.RepSize = int(t.u16(pos)), fdeInfo(a[2]), a[3], a[4]
		pos += fdeAttrSizeV3
	} else {
		e := t.b[off:][:fdeSizeV1]
		n, info, d.RepSize = int(t.u32(off+12)), fdeInfo(e[16]), 0
		if t.fdeSize == fdeSizeV2 {
			d.RepSize = t.b[off+17]
		}
	}
	ft, typ := info.freType(), fdeTypeDefault
	d.PCType, d.PauthKeyB, d.Signal = info.pcType(), info.pauthKeyB(), false
	if t.startW == 8 {
		typ, d.Signal = fdeTypeV3(info2), info.signal()
	}
	d.AddrSize, d.Flex = uint8(ft.addrSize()), typ == fdeTypeFlex
	if pos > t.freEnd || ft > freAddr4 || typ > fdeTypeFlex || uint64(n) > uint64(t.freEnd-pos)/2 {
		return 0, 0, t.errFDE(i, pos, n, d, ft, typ)
	}
	return pos, n, nil
}

// errFDE says what fde found wrong with FDE i.
func (t *Table) errFDE(i, pos, n int, d *FDE, ft freType, typ fdeType) *Error {
	off := t.fdeBase + i*t.fdeSize
	switch {
	case pos > t.freEnd:
		return errorf(off, "FDE %d: FRE offset %#x past the FRE sub-section (%#x bytes)", i, d.FREOff, t.freEnd-t.freBase)
	case ft > freAddr4:
		return errorf(off, "FDE %d: unknown FRE type %d", i, ft)
	case typ > fdeTypeFlex:
		return errorf(off, "FDE %d: unknown FDE type %d", i, typ)
	}
	// Every FRE takes at least two bytes.
	return errorf(off, "FDE %d: %d FREs cannot fit in the %d bytes left in the FRE sub-section", i, n, t.freEnd-pos)
}

// errAttr reports FDE i's V3 attribute at FRE offset fo running past the
// FRE sub-section.
func (t *Table) errAttr(i int, fo uint32) *Error {
	return errorf(t.fdeBase+i*t.fdeSize+12, "FDE %d: attribute at FRE offset %#x runs past the FRE sub-section (%#x bytes)", i, fo, t.freEnd-t.freBase)
}

// errFRECount reports a header whose FRE count is not the FDEs' total.
func (t *Table) errFRECount(held uint64) *Error {
	return errorf(12, "header claims %d FREs but the FDEs hold %d", t.Header.NumFREs, held)
}

// The FRE decoder: fre decodes FRE j of FDE i at section offset pos (the
// function's start address fields are asz bytes) into f and returns the
// offset of the next FRE: its header with freHead, its data words with
// wordsEnd and word. A lookup's walk over a function's FREs reads only
// their headers, and LookupStep only the words it needs.

// freHead reads the start address field and the info byte of the FRE at
// pos; false when they run past the FRE sub-section.
func (t *Table) freHead(pos, asz int) (start uint32, info freInfo, ok bool) {
	if pos+asz+1 > t.freEnd {
		return
	}
	switch asz {
	case 1:
		start = uint32(t.b[pos])
	case 2:
		start = uint32(t.u16(pos))
	default:
		start = t.u32(pos)
	}
	return start, freInfo(t.b[pos+asz]), true
}

// errFREHead reports FRE j of FDE i at pos, whose header freHead could not
// read or whose info byte has no data-word size.
func (t *Table) errFREHead(i, j, pos, asz int) *Error {
	if pos+asz+1 > t.freEnd {
		return errorf(pos, "FDE %d FRE %d: truncated FRE header", i, j)
	}
	return errorf(pos+asz, "FDE %d FRE %d: bad data-word size code %d", i, j, freInfo(t.b[pos+asz]).wordSizeCode())
}

func (t *Table) fre(i, j, pos, asz int, f *FRE) (int, error) {
	s, info, ok := t.freHead(pos, asz)
	if !ok || info.wordSizeCode() > dataWord4 {
		return 0, t.errFREHead(i, j, pos, asz)
	}
	at := pos + asz + 1
	end, ok := t.wordsEnd(info, at)
	if !ok {
		return 0, errWords(i, j, info, at)
	}
	n := info.numWords()
	f.Start, f.BaseReg, f.NumWords, f.WordSize, f.MangledRA = s, info.baseReg(), uint8(n), 1<<info.wordSizeCode(), info.mangledRA()
	ws := f.Words[:n]
	switch info.wordSizeCode() {
	case dataWord1:
		for k := range ws {
			ws[k] = int32(int8(t.b[at+k]))
		}
	case dataWord2:
		for k := range ws {
			ws[k] = int32(int16(t.u16(at + 2*k)))
		}
	default:
		for k := range ws {
			ws[k] = int32(t.u32(at + 4*k))
		}
	}
	return end, nil
}

// wordsEnd returns the end of the data words of an FRE with info byte
// info (of a known size code) that start at section offset at, and
// whether they end inside the FRE sub-section (errWords says when not).
func (t *Table) wordsEnd(info freInfo, at int) (int, bool) {
	end := at + info.dataSize()
	return end, end <= t.freEnd
}

func errWords(i, j int, info freInfo, at int) *Error {
	return errorf(at, "FDE %d FRE %d: %d data words of %d bytes run past the FRE sub-section", i, j, info.numWords(), 1<<info.wordSizeCode())
}

// word returns data word k, sign-extended, of an FRE with info byte info
// whose words start at section offset at (and end inside the FRE
// sub-section: wordsEnd).
func (t *Table) word(info freInfo, at, k int) int32 {
	switch info.wordSizeCode() {
	case dataWord1:
		return int32(int8(t.b[at+k]))
	case dataWord2:
		return int32(int16(t.u16(at + 2*k)))
	}
	return int32(t.u32(at + 4*k))
}

// FDE decodes function i (index order, 0 <= i < Header.NumFDEs) and its FREs into
// d. The FREs go into d.FREs' memory, which is reused: they stay valid
// until the next call with the same d. Malformed bytes give an *Error.
func (t *Table) FDE(i int, d *FDE) error {
	pos, n, err := t.fde(i, d)
	if err != nil {
		return err
	}
	d.FREs = grow(d.FREs, n)
	return t.fres(i, pos, d)
}

// grow returns s resized to n elements, reusing its memory when it can.
func grow(s []FRE, n int) []FRE {
	if cap(s) < n {
		return make([]FRE, n)
	}
	return s[:n]
}

// fres decodes the FREs of FDE i (read by fde, whose first FRE is at pos)
// into d.FREs, one per FRE.
func (t *Table) fres(i, pos int, d *FDE) error {
	asz := int(d.AddrSize)
	for j := range d.FREs {
		f := &d.FREs[j]
		var err error
		if pos, err = t.fre(i, j, pos, asz, f); err != nil {
			return err
		}
		clear(f.Words[f.NumWords:]) // as a fresh FRE has them, in reused memory
	}
	return nil
}

// Check decodes every function and its FREs and checks that the header's
// FRE count is the FREs the sub-section holds, without keeping what it
// decodes. FDEs may share a block (cfi2sframe's default output): the FREs
// at one offset count once, however many FDEs point there. After it
// returns nil, FDE and the lookups report no malformed bytes.
func (t *Table) Check() error {
	var d FDE
	left := uint64(t.Header.NumFREs)
	blocks := blockStarts{}
	for i := 0; i < t.n; i++ {
		pos, n, err := t.fde(i, &d)
		if err != nil {
			return err
		}
		// A V2 function without FREs holds no block at its offset.
		if n > 0 && blocks.first(t, i, d.FREOff) {
			if uint64(n) > left {
				return errorf(t.fdeBase+i*t.fdeSize, "FDE %d: %d FREs exceed the header's remaining FRE count %d", i, n, left)
			}
			left -= uint64(n)
		}
		d.FREs = grow(d.FREs, n)
		if err := t.fres(i, pos, &d); err != nil {
			return err
		}
	}
	if left != 0 {
		return t.errFRECount(uint64(t.Header.NumFREs) - left)
	}
	return nil
}

// fdeFREs is the FRE count of FDE k, which Check has decoded.
func (t *Table) fdeFREs(k int) int {
	var d FDE
	_, n, _ := t.fde(k, &d)
	return n
}

// blockStarts tells, FDE by FDE in index order, whether an FDE is the
// first to point at its FRE offset. Where the offsets rise with the index
// (every unshared section cfi2sframe or GNU ld writes) that is one
// comparison; from the first FDE that points at or below an earlier one
// on, a set of the offsets seen, rebuilt from the FDEs before it.
type blockStarts struct {
	next uint64 // the lowest offset not seen yet while they rise (+1)
	seen map[uint32]struct{}
}

// first reports whether FDE i, at FRE offset off, is the first FDE to
// point there.
func (b *blockStarts) first(t *Table, i int, off uint32) bool {
	if b.seen == nil {
		if uint64(off)+1 > b.next {
			b.next = uint64(off) + 1
			return true
		}
		b.seen = make(map[uint32]struct{}, t.n)
		for k := 0; k < i; k++ {
			if t.fdeFREs(k) > 0 {
				b.seen[t.freOffAt(k)] = struct{}{}
			}
		}
	}
	if _, ok := b.seen[off]; ok {
		return false
	}
	b.seen[off] = struct{}{}
	return true
}

// checkFDEs validates every FDE so that lookups only need to bound the FRE
// bytes of one function, and builds the search index (gran; order for an
// index not sorted by start address).
func (t *Table) checkFDEs() error {
	var sorted bool
	var last uint64
	var err error
	if t.v3le {
		sorted, last, err = t.checkV3LE()
	} else {
		sorted, last, err = t.checkAny()
	}
	if err != nil {
		return err
	}
	if !sorted {
		// An index flagged sorted that is not is searched as it is.
		t.order = make([]uint32, t.n)
		for i := range t.order {
			t.order[i] = uint32(i)
		}
		sort.SliceStable(t.order, func(a, b int) bool { return t.start(int(t.order[a])) < t.start(int(t.order[b])) })
		t.base = t.start(int(t.order[0]))
		last = t.start(int(t.order[t.n-1]))
	}
	if t.n == 0 {
		return nil
	}
	// The smallest granule that keeps the table within granPerFDE
	// entries per function (last-base is at most the span of the code).
	span := last - t.base
	for span>>t.shift >= uint64(granPerFDE*t.n) {
		t.shift++
	}
	t.gran = make([]uint32, span>>t.shift+1)
	if t.order == nil && t.v3le {
		t.granV3LE()
	} else {
		for k := 0; k < t.n; k++ {
			t.mark(t.start(t.at(k))-t.base, k)
		}
	}
	t.fillGran()
	return nil
}

// mark records in gran that position k starts at s (minus base): the
// first granule whose start is at or after s (a later position with the
// same granule overwrites it). fillGran then gives every granule the
// largest position marked at or before it, which is the last function
// starting at or before the granule's start, as positions are in address
// order. Both passes are free of unpredictable branches: Open's time is
// a few cycles per function.
func (t *Table) mark(s uint64, k int) {
	mask := uint64(1)<<t.shift - 1
	if g := s>>t.shift + ((s&mask)+mask)>>t.shift; g < uint64(len(t.gran)) {
		t.gran[g] = uint32(k)
	}
}

func (t *Table) fillGran() {
	m := uint32(0)
	for g, k := range t.gran {
		m = max(m, k)
		t.gran[g] = m
	}
}

// v3StartTerms gives the passes over a V3 index that read its entries
// directly what start(k) adds to entry k's raw field: start(k) = field +
// add + k*inc, that is Addr, and the entry's own section offset when
// starts are PC-relative.
func (t *Table) v3StartTerms() (add, inc uint64) {
	if t.pcrel {
		return t.Addr + uint64(t.fdeBase), fdeSizeV3
	}
	return t.Addr, 0
}

// The little-endian V3 fast path: granV3LE, checkV3LE and the V3 branch of
// findFDE read the index entries directly, and walkV3LE a function's FREs
// (lookup.go). What they do is what the general code does on any section,
// which the tests compare them with.

// granV3LE marks gran for a sorted little-endian V3 index, reading the
// start fields in one pass (Open's second and last).
func (t *Table) granV3LE() {
	const es = fdeSizeV3
	ents := t.b[t.fdeBase : t.fdeBase+t.n*es]
	// Entry k's start minus base is its field + add + k*inc.
	add, inc := t.v3StartTerms()
	add -= t.base
	for k := 0; len(ents) >= es; k++ {
		t.mark(binary.LittleEndian.Uint64(ents)+add, k)
		add += inc
		ents = ents[es:]
	}
}

// checkV3LE is checkFDEs' pass over a little-endian V3 index (the common
// case, and the bulk of Open's time: it reads the whole index). It sets
// base to the first start and returns whether the index is sorted and the
// last start.
func (t *Table) checkV3LE() (sorted bool, last uint64, err error) {
	const es = fdeSizeV3
	ents := t.b[t.fdeBase : t.fdeBase+t.n*es]
	freLen := uint64(t.freEnd - t.freBase)
	add, inc := t.v3StartTerms()
	if t.n > 0 {
		t.base = binary.LittleEndian.Uint64(ents) + add
	}
	prev := t.base
	sorted = true
	for i := 0; len(ents) >= es; i++ {
		e := ents[:es:es]
		if fo := binary.LittleEndian.Uint32(e[12:]); uint64(fo)+fdeAttrSizeV3 > freLen {
			// The attribute (FRE count and types) lives in the FRE
			// sub-section, spread over the whole section: a lookup reads
			// it for the one function it needs, so Open only bounds it.
			return false, 0, t.errAttr(i, fo)
		}
		s := binary.LittleEndian.Uint64(e) + add
		if s < prev {
			sorted = false
		}
		prev = s
		add += inc
		ents = ents[es:]
	}
	return sorted, prev, nil
}

// checkAny is checkV3LE for any version and byte order; in V1/V2, whose
// index entries hold the FRE count and types, it also decodes and checks
// each entry (fde) and checks the header's total.
func (t *Table) checkAny() (sorted bool, last uint64, err error) {
	var total uint64
	var d FDE
	var blocks blockStarts
	v3 := t.fdeSize == fdeSizeV3
	sorted = true
	if t.n > 0 {
		t.base = t.start(0)
	}
	prev := t.base
	for i := 0; i < t.n; i++ {
		if v3 {
			if fo := t.freOffAt(i); uint64(fo)+fdeAttrSizeV3 > uint64(t.freEnd-t.freBase) {
				return false, 0, t.errAttr(i, fo)
			}
		} else {
			_, n, err := t.fde(i, &d)
			if err != nil {
				return false, 0, err
			}
			if n > 0 && blocks.first(t, i, d.FREOff) { // shared FREs count once
				total += uint64(n)
			}
		}
		s := t.start(i)
		if s < prev {
			sorted = false
		}
		prev = s
	}
	if !v3 && total != uint64(t.Header.NumFREs) {
		return false, 0, t.errFRECount(total)
	}
	return sorted, prev, nil
}

// at returns the FDE index at position k of the address order.
func (t *Table) at(k int) int {
	if t.order != nil {
		return int(t.order[k])
	}
	return k
}

// findFDE returns the index of the FDE covering pc, or -1, with its start
// address, size and FRE offset: of the functions that start last at or
// before pc, the last in index order that covers it (zero-sized functions
// and other ones may share a start).
func (t *Table) findFDE(pc uint64) (i int, start uint64, size, freOff uint32) {
	if t.gran == nil || pc < t.base {
		return -1, 0, 0, 0
	}
	g := (pc - t.base) >> t.shift
	last := t.n - 1 // the last position that may start at or before pc
	if g < uint64(len(t.gran)-1) {
		last = int(t.gran[g+1])
	} else {
		g = uint64(len(t.gran) - 1)
	}
	k := int(t.gran[g])
	if t.order == nil && t.v3le {
		// What cfi2sframe and GNU write: one 16-byte index entry holds
		// start, size and FRE offset.
		const es = fdeSizeV3
		ents := t.b[t.fdeBase : t.fdeBase+t.n*es]
		add, inc := t.v3StartTerms()
		startOf := func(k int) uint64 { return binary.LittleEndian.Uint64(ents[k*es:]) + add + uint64(k)*inc }
		if last-k > 4 {
			// searchPositions on the entries themselves.
			for hi := last; k < hi; {
				m := int(uint(k+hi+1) >> 1)
				if startOf(m) <= pc {
					k = m
				} else {
					hi = m - 1
				}
			}
		} else {
			for k < last && startOf(k+1) <= pc {
				k++
			}
		}
		e := ents[k*es:][:es]
		start = startOf(k)
		size = binary.LittleEndian.Uint32(e[8:])
		if pc-start < uint64(size) {
			return k, start, size, binary.LittleEndian.Uint32(e[12:])
		}
	} else {
		if last-k > 4 {
			k = t.searchPositions(pc, k, last)
		} else {
			for k < last && t.start(t.at(k+1)) <= pc {
				k++
			}
		}
		i = t.at(k)
		start, size = t.start(i), t.size(i)
		if pc-start < uint64(size) {
			return i, start, size, t.freOffAt(i)
		}
	}
	// Not in the function that starts last at or before pc: one with the
	// same start (zero-sized ones come first), or none.
	if i = t.back(pc, k+1); i < 0 {
		return -1, 0, 0, 0
	}
	return i, t.start(i), t.size(i), t.freOffAt(i)
}

// searchPositions returns the last position in [lo, hi] whose function
// starts at or before pc, given that lo's does.
func (t *Table) searchPositions(pc uint64, lo, hi int) int {
	// Invariant: lo starts at or before pc; everything past hi after it.
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if t.start(t.at(m)) <= pc {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// back returns the FDE that covers pc among those at positions before k
// (the first position starting past pc): the one at k-1, or one with the
// same start before it (zero-sized functions come first).
func (t *Table) back(pc uint64, k int) int {
	for k--; k >= 0; k-- {
		i := t.at(k)
		s := t.start(i)
		if pc-s < uint64(t.size(i)) {
			return i
		}
		if k == 0 || t.start(t.at(k-1)) != s {
			break
		}
	}
	return -1
}
