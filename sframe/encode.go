package sframe

import (
	"unsafe"

	"cmp"
	"encoding/binary"
	"fmt"
	"github.com/cfi2sframe/cfi2sframe/internal/hugepage"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
)

// Function is the version-independent description of one function's
// stack-trace rows, as filled by a translator or taken from a decoded
// section.
type Function struct {
	Start     uint64 // start address
	Size      uint32
	PCType    PCType
	RepSize   uint8 // repeat block size for PCMask
	Signal    bool  // signal frame (V3 only; V2 cannot record it)
	PauthKeyB bool  // AArch64: return addresses signed with the B key
	Flex      bool  // needs the V3 flexible FDE type
	Rows      []Row
}

// Row is one row: from Start (offset from the function start, or a mask
// value for PCMask) the rules hold until the next row.
//
// CFA is LocReg (register + offset; for default FDEs the register must be
// the ABI's SP or FP) or, for flex functions, LocRegDeref. RA and FP are
// LocUnsaved, LocFixed (RA at the header's fixed offset), LocCFA, or for
// flex functions LocDefault, LocReg, LocRegDeref, LocCFAValue.
type Row struct {
	Start       uint32
	CFA         Loc
	RA          Loc
	FP          Loc
	MangledRA   bool
	RAUndefined bool // outermost frame: no data words
}

// Options selects the encoding of a section.
type Options struct {
	Version    uint8 // Version2 or Version3
	ABI        ABI
	Order      binary.ByteOrder
	Addr       uint64 // address the section will have
	PCRel      bool   // set FlagFDEFuncStartPCRel (always wise for V3)
	Sort       bool   // sort FDEs by start address and set FlagFDESorted
	CFAFixedFP int8
	CFAFixedRA int8
	// FramePointer sets the V1/V2 flag SFRAME_F_FRAME_POINTER (GNU as
	// never sets it; kept so decoded sections re-encode faithfully).
	FramePointer bool
	// AuxHdr is written after the fixed header (at most 255 bytes).
	AuxHdr []byte
	// Share writes each distinct FRE block once: the FDEs of functions
	// whose blocks are byte for byte the same (in V3 the attribute and
	// the FREs, in V2 the FREs of the same count and FRE type) point at
	// one copy, and the header counts the FREs the sub-section holds.
	// Every function also gets the narrowest FRE type its rows' starts
	// fit in, whatever its size, so that more blocks are the same.
	// Readers that look each FDE's FREs up at its own offset (the kernel,
	// glibc, libsframe in the host's byte order) take it; libsframe
	// reading a section of the other byte order flips the FREs FDE by
	// FDE and refuses a block flipped twice, so a section meant for such
	// a reader must not share (docs/readers.md).
	Share bool
}

// funcError reports a function that cannot be encoded: its message names
// the function's start address.
type funcError struct {
	start uint64
	msg   string
}

func (e *funcError) Error() string {
	return fmt.Sprintf("function at %#x: %s", e.start, e.msg)
}

func ctrlWord(l Loc) int64 {
	c := int64(l.Reg) << flexCtrlRegShift
	switch l.Kind {
	case LocReg:
		c |= flexCtrlRegP
	case LocRegDeref:
		c |= flexCtrlRegP | flexCtrlDerefP
	case LocCFA:
		c |= flexCtrlDerefP
	}
	return c
}

// cfaWord is the data word of a CFA offset (s390x stores it scaled).
func cfaWord(o *Options, off int32) (int64, error) {
	w, ok := o.ABI.arch().EncodeCFAOffset(int64(off))
	if !ok {
		return 0, fmt.Errorf("%v CFA offset %d is not a multiple of 8", o.ABI.arch(), off)
	}
	return w, nil
}

// flexWords computes the data words of a row of a flexible FDE; ctrl
// marks control words (unsigned).
func flexWords(o *Options, r *Row, words *[maxDataWords]int64, ctrl *[maxDataWords]bool) (n int, baseReg uint8, err error) {
	// GNU leaves the base-register bit clear when it carries no meaning
	// (no data words, or a flex FDE whose control word names the register).
	if r.RAUndefined {
		return 0, baseRegFP, nil
	}
	cfaOff, err := cfaWord(o, r.CFA.Offset)
	if err != nil {
		return 0, 0, err
	}
	add := func(w int64, c bool) {
		words[n], ctrl[n] = w, c
		n++
	}
	if r.CFA.Kind != LocReg && r.CFA.Kind != LocRegDeref {
		return 0, 0, fmt.Errorf("CFA rule must name a register")
	}
	add(ctrlWord(r.CFA), true)
	add(cfaOff, false)
	fpTracked := r.FP.Kind != LocUnsaved
	switch r.RA.Kind {
	case LocUnsaved, LocFixed, LocDefault:
		if fpTracked {
			add(0, true)
		}
	default:
		add(ctrlWord(r.RA), true)
		add(int64(r.RA.Offset), false)
	}
	if fpTracked {
		add(ctrlWord(r.FP), true)
		add(int64(r.FP.Offset), false)
	}
	return n, baseRegFP, nil
}

// defaultWords computes the data words of a row of a default FDE: all
// offsets (signed): the CFA offset, then the RA slot (unless the
// ABI fixes it) and the FP slot, as far as the last one saved.
func defaultWords(o *Options, r *Row, words *[maxDataWords]int64) (n int, baseReg uint8, err error) {
	if r.RAUndefined {
		return 0, baseRegFP, nil
	}
	if words[0], err = cfaWord(o, r.CFA.Offset); err != nil {
		return 0, 0, err
	}
	sp, fp := o.ABI.arch().SP(), o.ABI.arch().FP()
	if r.CFA.Kind != LocReg || (r.CFA.Reg != sp && r.CFA.Reg != fp) {
		return 0, 0, fmt.Errorf("CFA is not SP or FP based (needs a flexible FDE)")
	}
	baseReg = baseRegSP
	if r.CFA.Reg == fp {
		baseReg = baseRegFP
	}
	var slots [2]*Loc
	k := 0
	if o.CFAFixedRA == cfaFixedRAInvalid {
		slots[k] = &r.RA
		k++
	} else if r.RA.Kind != LocFixed && r.RA.Kind != LocUnsaved {
		return 0, 0, fmt.Errorf("RA rule differs from the fixed RA offset (needs a flexible FDE)")
	}
	if o.CFAFixedFP == cfaFixedFPInvalid {
		slots[k] = &r.FP
		k++
	}
	n = 1
	for i, l := range slots[:k] {
		switch l.Kind {
		case LocUnsaved, LocFixed, LocDefault:
			words[1+i] = raOffsetInvalid
			continue
		case LocCFA:
			words[1+i] = int64(l.Offset)
		case LocReg:
			if o.ABI != ABIS390XBE || o.Version != Version2 || l.Offset != 0 {
				return 0, 0, fmt.Errorf("register-based RA/FP rule needs a flexible FDE")
			}
			words[1+i] = int64(l.Reg)<<1 | 1 // s390x V2: register in the LSB form
		default:
			return 0, 0, fmt.Errorf("register-based RA/FP rule needs a flexible FDE")
		}
		n = 2 + i // the words up to this saved slot
	}
	return n, baseReg, nil
}

// wordSize is the fewest bytes of 1, 2 and 4 that hold data word w
// (unsigned when c, a control word), or 8 when 4 do not.
func wordSize(w int64, c bool) int {
	if c {
		switch {
		case uint64(w) <= math.MaxUint8:
			return 1
		case uint64(w) <= math.MaxUint16:
			return 2
		case uint64(w) <= math.MaxUint32:
			return 4
		}
		return 8
	}
	switch {
	case w == int64(int8(w)):
		return 1
	case w == int64(int16(w)):
		return 2
	case w == int64(int32(w)):
		return 4
	}
	return 8
}

// offsetsSize is wordSize of the widest of words, all offsets (signed),
// in one pass: 1 for none.
func offsetsSize(words []int64) int {
	var bits int64
	for _, w := range words {
		bits |= w ^ w>>63 // a negative word's magnitude bits
	}
	switch {
	case bits < 1<<7:
		return 1
	case bits < 1<<15:
		return 2
	case bits < 1<<31:
		return 4
	}
	return 8
}

// putWords writes words, size bytes each (1, 2 or 4), at the start of b.
func putWords(be bool, b []byte, words []int64, size int) {
	switch {
	case size == 1:
		for j, w := range words {
			b[j] = uint8(w)
		}
	case size == 2 && be:
		for j, w := range words {
			binary.BigEndian.PutUint16(b[2*j:], uint16(w))
		}
	case size == 2:
		for j, w := range words {
			binary.LittleEndian.PutUint16(b[2*j:], uint16(w))
		}
	case be:
		for j, w := range words {
			binary.BigEndian.PutUint32(b[4*j:], uint32(w))
		}
	default:
		for j, w := range words {
			binary.LittleEndian.PutUint32(b[4*j:], uint32(w))
		}
	}
}

// putSized writes the low size bytes (1, 2 or 4) of v at the start of b
// in the given order.
func putSized(be bool, b []byte, v uint32, size int) {
	switch {
	case size == 1:
		b[0] = uint8(v)
	case size == 2 && be:
		binary.BigEndian.PutUint16(b, uint16(v))
	case size == 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case be:
		binary.BigEndian.PutUint32(b, v)
	default:
		binary.LittleEndian.PutUint32(b, v)
	}
}

// Encode writes a section from the neutral model. Functions keep their
// order unless o.Sort is set (stable sort by start address). Every FRE
// uses the narrowest data-word size that holds its words; every function
// the narrowest FRE type for its size. A function V2 cannot express
// (Flex) gives an error naming its start address.
func Encode(funcs []Function, o Options) ([]byte, error) {
	e, err := NewEncoder(o)
	if err != nil {
		return nil, err
	}
	for i := range funcs {
		if err := e.Add(&funcs[i]); err != nil {
			return nil, err
		}
	}
	return e.Section(o.Addr)
}

// Encoder builds a section one function at a time, so that a translator
// can hand over each function as it is made and keep none of them: the
// FREs go into one growing byte buffer, each function into a small
// fixed-size index entry. The result is Encode's for the same functions
// in the same order.
type Encoder struct {
	o       Options
	fre     []byte     // the FRE sub-section's last chunk, in the order functions were added
	full    [][]byte   // its earlier chunks
	freLen  int        // its size: the full chunks and fre
	ents    []encEntry // one per function, in the order added
	numFREs int
	sorted  bool   // ents are in index order
	out     []byte // the last Section; its FRE part is final once built
	freAt   int    // offset of the FRE sub-section in out (0: not built)
	be      bool   // o.Order is big-endian (Add writes FREs without the interface)

	// What plainFREs needs of the options, computed once.
	plain          bool   // data words are the offsets (not s390x)
	sp, fp         uint32 // the ABI's stack and frame pointers
	raSlot, fpSlot bool   // rows carry an RA, an FP slot

	// The arena of e's chunks (Reserve, or Use of a region carved from
	// one) and where each FRE chunk lies in it: fullAt for the full
	// chunks, freRegion for fre (-1: not in it).
	arena     *arena
	fullAt    []int
	freRegion int
}

// arena is one buffer that the FRE chunks of an encoder and of the
// encoders forked from it are cut from, in the order they are forked,
// behind room for the section's header and FDE index (buf is nil when the
// encoder reserved none), and the index room of the forks appended, for
// later forks' Grow.
type arena struct {
	owner  *Encoder // the encoder whose section it holds
	buf    []byte
	prefix int // the room in front
	next   int // where the next region starts

	mu    sync.Mutex
	spare [][]encEntry
}

// encEntry is what the FDE index needs of one function.
type encEntry struct {
	start  uint64
	size   uint32
	freOff uint32
	nfre   uint32
	info   uint8
	info2  uint8
	rep    uint8
}

// NewEncoder starts a section with options o (o.Addr is not used: see
// Section).
func NewEncoder(o Options) (*Encoder, error) {
	if o.Version != Version2 && o.Version != Version3 {
		return nil, fmt.Errorf("cannot encode version %d", o.Version)
	}
	if o.Order == nil {
		return nil, fmt.Errorf("no byte order")
	}
	if o.FramePointer && o.Version > Version2 {
		return nil, fmt.Errorf("SFRAME_F_FRAME_POINTER does not exist in version %d", o.Version)
	}
	if len(o.AuxHdr) > math.MaxUint8 {
		return nil, fmt.Errorf("auxiliary header of %d bytes exceeds 255", len(o.AuxHdr))
	}
	var probe [2]byte
	o.Order.PutUint16(probe[:], 1)
	return &Encoder{o: o, be: probe[1] == 1, plain: o.ABI != ABIS390XBE, sp: o.ABI.arch().SP(), fp: o.ABI.arch().FP(),
		raSlot: o.CFAFixedRA == cfaFixedRAInvalid, fpSlot: o.CFAFixedFP == cfaFixedFPInvalid, freRegion: -1}, nil
}

// Grow makes room for n more functions: their index entries, and, when
// no FRE was added yet, a first FRE chunk sized for about that many (an
// encoder given a few functions does not take a whole chunk).
func (e *Encoder) Grow(n int) {
	if len(e.ents)+n > cap(e.ents) {
		if a := e.arena; cap(e.ents) == 0 && a != nil {
			a.mu.Lock()
			if k := len(a.spare); k > 0 {
				e.ents, a.spare = a.spare[k-1], a.spare[:k-1]
			}
			a.mu.Unlock()
		}
		e.ents = slices.Grow(e.ents, n)
		hugepage.Advise(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(e.ents))), cap(e.ents)*int(unsafe.Sizeof(encEntry{}))))
	}
	if e.freLen == 0 && cap(e.fre) == 0 {
		e.fre = make([]byte, 0, min(freChunk, max(n, 64)*freGuess))
	}
}

// Reserve gives e, which has no FREs yet, one buffer with room in front
// for the header and the index of up to funcs functions, and freBytes
// behind it for the FREs of e (the first ownBytes of them) and of the
// encoders Fork makes. When each encoder's FREs fit in its part and the
// forks are appended in the order they were made, Section moves the FREs
// together in place, instead of copying them all into a new buffer: a
// conversion spends most of that copy on first touches of new memory.
// Anything else (an encoder outgrowing its part, more functions) only
// costs that copy.
func (e *Encoder) Reserve(funcs, freBytes, ownBytes int) {
	fdeSize := fdeSizeV2
	if e.o.Version == Version3 {
		fdeSize = fdeSizeV3
	}
	if e.arena != nil || e.freLen != 0 || cap(e.fre) != 0 || funcs < 0 || freBytes <= 0 || funcs > (math.MaxInt32-freBytes)/fdeSize {
		return
	}
	prefix := HeaderSize + len(e.o.AuxHdr) + funcs*fdeSize
	e.arena = &arena{owner: e, buf: make([]byte, prefix+freBytes), prefix: prefix, next: prefix}
	hugepage.Advise(e.arena.buf)
	e.fre, e.freRegion = e.arena.carve(ownBytes)
}

// Fork returns a new encoder with e's options, for functions that will be
// appended to e (Append): encoders forked in turn can take functions on
// several goroutines at once. Its FREs go first into the next n bytes of
// the buffer Reserve gave e (called before the first Fork), if that has
// them left. An appended fork's index room goes to a later fork's Grow.
func (e *Encoder) Fork(n int) *Encoder {
	if e.arena == nil {
		e.arena = &arena{owner: e}
	}
	f := &Encoder{o: e.o, be: e.be, plain: e.plain, sp: e.sp, fp: e.fp, raSlot: e.raSlot, fpSlot: e.fpSlot, arena: e.arena}
	f.fre, f.freRegion = e.arena.carve(n)
	return f
}

// carve cuts the next n bytes of the arena's buffer for an encoder's FREs
// and returns them with their offset in the buffer, or nil and -1 when
// too few are left.
func (a *arena) carve(n int) ([]byte, int) {
	if n <= 0 || n > len(a.buf)-a.next {
		return nil, -1
	}
	at := a.next
	a.next += n
	return a.buf[at:at:a.next], at
}

// inPlace reports whether Section can put the FREs together in e's arena,
// behind a header and index of front bytes: each chunk is the region
// carved for it, in order.
func (e *Encoder) inPlace(front int) bool {
	a := e.arena
	if a == nil || a.owner != e || front > a.prefix {
		return false
	}
	at := a.prefix
	for i, c := range e.full {
		if e.fullAt[i] < at {
			return false
		}
		at = e.fullAt[i] + len(c)
	}
	return len(e.fre) == 0 || e.freRegion >= at
}

// freGuess is the FRE bytes Grow expects a function to take: most have
// a few FREs of 2 to 4 bytes (libLLVM-15: 35 on average).
const freGuess = 48

// freChunk is the largest of the FRE sub-section's chunks: it grows a
// chunk at a time, each twice the last from minFREChunk (or from what
// Grow expects) up to freChunk, never copied until Section joins them. (A
// variable for the tests.)
var freChunk = 1 << 20

const minFREChunk = 4 << 10

// Add encodes fn's rows. fn and its rows are not kept.
func (e *Encoder) Add(fn *Function) error {
	o := &e.o
	if e.freAt != 0 {
		return fmt.Errorf("function added after the section was built")
	}
	if fn.Flex && o.Version < Version3 {
		return &funcError{start: fn.Start, msg: "needs a flexible FDE, which SFrame V2 cannot express"}
	}
	freType := freAddr1
	// libsframe sizes the start fields by the function's size; a shared
	// section by the rows' starts alone (a reader bounds a start by the
	// size, never the field by it).
	size, maxStart := uint64(fn.Size), uint64(0)
	if size > 0 {
		maxStart = size - 1
	}
	if o.Share {
		size, maxStart = 0, 0
	}
	for i := range fn.Rows {
		maxStart = max(maxStart, uint64(fn.Rows[i].Start))
	}
	switch {
	case size < 1<<8 && maxStart < 1<<8:
		freType = freAddr1
	case size < 1<<16 && maxStart < 1<<16:
		freType = freAddr2
	default:
		freType = freAddr4
	}
	if o.Version == Version3 && len(fn.Rows) > math.MaxUint16 {
		return &funcError{start: fn.Start, msg: fmt.Sprintf("%d rows exceed the V3 limit of 65535", len(fn.Rows))}
	}
	info := uint8(freType) | uint8(fn.PCType)<<4
	if fn.PauthKeyB {
		info |= fdeInfoPauthBit
	}
	var info2 uint8
	// The most this function's FREs can take (start, info, data words).
	need := 5 + len(fn.Rows)*(4+1+4*maxDataWords)
	if len(e.fre)+need > cap(e.fre) {
		if len(e.fre) > 0 {
			e.full = append(e.full, e.fre)
			e.fullAt = append(e.fullAt, e.freRegion)
		}
		e.freRegion = -1
		// Chunks double from a few KiB up to freChunk: a small section
		// (an object's, an archive member's) takes no more than it needs.
		e.fre = make([]byte, 0, max(need, min(freChunk, max(2*cap(e.fre), minFREChunk))))
	}
	fre := e.fre
	freOff := e.freLen
	if o.Version == Version3 {
		if fn.Signal {
			info |= fdeInfoSignalBit
		}
		if fn.Flex {
			info2 = uint8(fdeTypeFlex)
		}
		p := len(fre)
		fre = fre[:p+5]
		putSized(e.be, fre[p:], uint32(len(fn.Rows)), 2)
		fre[p+2], fre[p+3], fre[p+4] = info, info2, fn.RepSize
	}
	asz := 1 << (freType - freAddr1)
	ok := false
	switch {
	case fn.Flex || !e.plain:
	case !e.raSlot && e.fpSlot && !e.be:
		fre, ok = e.amd64FREs(fn.Rows, fre, asz)
	default:
		fre, ok = e.plainFREs(fn.Rows, fre, asz)
	}
	if !ok {
		var err error
		if fre, err = e.rowFREs(fn, fre, asz); err != nil {
			return err
		}
	}
	if freOff+len(fre)-len(e.fre) > math.MaxUint32 {
		return fmt.Errorf("FRE sub-section exceeds 4 GiB")
	}
	e.freLen += len(fre) - len(e.fre)
	e.fre = fre
	e.numFREs += len(fn.Rows)
	e.ents = append(e.ents, encEntry{start: fn.Start, size: fn.Size, freOff: uint32(freOff), nfre: uint32(len(fn.Rows)),
		info: info, info2: info2, rep: fn.RepSize})
	return nil
}

// rowFREs writes fn's rows as FREs of asz-byte start addresses at the end
// of fre (within its capacity).
func (e *Encoder) rowFREs(fn *Function, fre []byte, asz int) ([]byte, error) {
	o := &e.o
	var words [maxDataWords]int64
	var ctrl [maxDataWords]bool
	for ri := range fn.Rows {
		r := &fn.Rows[ri]
		var n, size int
		var base uint8
		var err error
		if fn.Flex {
			n, base, err = flexWords(o, r, &words, &ctrl)
			size = 1
			for j := 0; j < n; j++ {
				size = max(size, wordSize(words[j], ctrl[j]))
			}
		} else {
			n, base, err = defaultWords(o, r, &words)
			size = offsetsSize(words[:n])
		}
		if err != nil {
			return nil, &funcError{start: fn.Start, msg: fmt.Sprintf("row at +%#x: %v", r.Start, err)}
		}
		if size > 4 {
			for j := 0; j < n; j++ {
				if wordSize(words[j], ctrl[j]) > 4 {
					return nil, &funcError{start: fn.Start, msg: fmt.Sprintf("row at +%#x: data word %d does not fit in 32 bits", r.Start, words[j])}
				}
			}
		}
		sizeCode := uint8(size >> 1) // 1->0, 2->1, 4->2
		fi := base | uint8(n)<<1 | sizeCode<<5
		if r.MangledRA {
			fi |= freInfoMangledRABit
		}
		// Within the capacity Add made sure of: written in place.
		p := len(fre)
		fre = fre[:p+asz+1+n*size]
		putSized(e.be, fre[p:], r.Start, asz)
		fre[p+asz] = fi
		putWords(e.be, fre[p+asz+1:], words[:n], size)
	}
	return fre, nil
}

// plainFREs is rowFREs for the rows of nearly every default FDE, on an
// ABI whose data words are the offsets themselves (all but s390x): the
// CFA on SP or FP, the RA and the FP unsaved, at their fixed slot or at a
// CFA offset. It keeps the words in variables and writes each row in one
// step, at about half rowFREs's cost a row. ok is false when a row is not
// of that kind; rowFREs then encodes the function (or refuses it), from
// the same fre.
func (e *Encoder) plainFREs(rows []Row, fre []byte, asz int) (_ []byte, ok bool) {
	start := fre
	for ri := range rows {
		r := &rows[ri]
		fi, ok := e.plainBase(r)
		if !ok {
			return start, false
		}
		// The words: CFA offset, then the RA slot (unless the ABI fixes
		// it) and the FP slot, as far as the last one saved; an unsaved
		// slot before a saved one holds raOffsetInvalid (0).
		w0, w1, w2 := int64(r.CFA.Offset), int64(0), int64(0)
		n := 1
		if e.raSlot {
			switch r.RA.Kind {
			case LocCFA:
				w1, n = int64(r.RA.Offset), 2
			case LocUnsaved, LocFixed, LocDefault:
			default:
				return start, false
			}
		} else if r.RA.Kind != LocFixed && r.RA.Kind != LocUnsaved {
			return start, false
		}
		if e.fpSlot {
			switch r.FP.Kind {
			case LocCFA:
				if e.raSlot {
					w2, n = int64(r.FP.Offset), 3
				} else {
					w1, n = int64(r.FP.Offset), 2
				}
			case LocUnsaved, LocFixed, LocDefault:
			default:
				return start, false
			}
		}
		fi, size := plainInfo(fi, n, (w0^w0>>63)|(w1^w1>>63)|(w2^w2>>63), r.MangledRA)
		// Every field is stored as four bytes, the next one overwriting
		// what lies past its size: Add made room for the widest row.
		p := len(fre)
		b := fre[p : p+4+1+4*3]
		e.put4(b, r.Start, asz)
		b[asz] = fi
		q := asz + 1
		e.put4(b[q:], uint32(w0), size)
		if n > 1 {
			e.put4(b[q+size:], uint32(w1), size)
			if n > 2 {
				e.put4(b[q+2*size:], uint32(w2), size)
			}
		}
		fre = fre[:p+q+n*size]
	}
	return fre, true
}

// amd64FREs is plainFREs for AMD64's options (the RA at its fixed slot,
// the FP tracked, little-endian), with their tests taken out of the loop:
// each row has one or two words, the CFA offset and the FP's.
func (e *Encoder) amd64FREs(rows []Row, fre []byte, asz int) (_ []byte, ok bool) {
	start := fre
	for ri := range rows {
		r := &rows[ri]
		fi, ok := e.plainBase(r)
		if !ok || r.RA.Kind != LocFixed && r.RA.Kind != LocUnsaved {
			return start, false
		}
		w0, w1, n := int64(r.CFA.Offset), int64(0), 1
		switch r.FP.Kind {
		case LocCFA:
			w1, n = int64(r.FP.Offset), 2
		case LocUnsaved, LocFixed, LocDefault:
		default:
			return start, false
		}
		fi, size := plainInfo(fi, n, (w0^w0>>63)|(w1^w1>>63), r.MangledRA)
		// As in plainFREs: four bytes a field, each overwriting the
		// rest of the one before.
		p := len(fre)
		b := fre[p : p+4+1+4*2]
		binary.LittleEndian.PutUint32(b, r.Start)
		b[asz] = fi
		binary.LittleEndian.PutUint32(b[asz+1:], uint32(w0))
		if n > 1 {
			binary.LittleEndian.PutUint32(b[asz+1+size:], uint32(w1))
		}
		fre = fre[:p+asz+1+n*size]
	}
	return fre, true
}

// plainBase returns the base-register bit of a row's FRE info byte when
// the row has data words and its CFA is SP or FP plus an offset.
func (e *Encoder) plainBase(r *Row) (fi uint8, ok bool) {
	switch {
	case r.RAUndefined || r.CFA.Kind != LocReg:
		return 0, false
	case r.CFA.Reg == e.sp:
		return baseRegSP, true
	case r.CFA.Reg == e.fp:
		return baseRegFP, true
	}
	return 0, false
}

// plainInfo completes a row's FRE info byte fi (the base register) for n
// data words of the int32s whose magnitude bits are mag, and returns it
// with their size (1, 2 or 4 bytes).
func plainInfo(fi uint8, n int, mag int64, mangledRA bool) (info uint8, size int) {
	size, code := 4, uint8(2)
	switch {
	case mag < 1<<7:
		size, code = 1, 0
	case mag < 1<<15:
		size, code = 2, 1
	}
	fi |= uint8(n)<<1 | code<<5
	if mangledRA {
		fi |= freInfoMangledRABit
	}
	return fi, size
}

// put4 writes the low size bytes (1, 2 or 4) of v at the start of b in
// the encoder's byte order, as four bytes: the ones after them are
// whatever is left of v, for the next field to overwrite.
func (e *Encoder) put4(b []byte, v uint32, size int) {
	if e.be {
		v = bits.ReverseBytes32(v << (32 - 8*size))
	}
	binary.LittleEndian.PutUint32(b, v)
}

// Append adds the functions of other, an encoder with the same options
// (a fork of e, say), after e's, as if they had been added to e in the
// same order: their FRE bytes follow e's. other is left empty, as
// NewEncoder made it, and may take functions again. Translating on two
// goroutines, each into its own encoder, and appending the second to the
// first gives the section one encoder would have built.
func (e *Encoder) Append(other *Encoder) error {
	if e.freAt != 0 || other.freAt != 0 {
		return fmt.Errorf("functions appended after the section was built")
	}
	if !sameOptions(&e.o, &other.o) {
		return fmt.Errorf("appending an encoder with other options")
	}
	if e.freLen+other.freLen > math.MaxUint32 {
		return fmt.Errorf("FRE sub-section exceeds 4 GiB")
	}
	base := uint32(e.freLen)
	e.ents = slices.Grow(e.ents, len(other.ents))
	for _, en := range other.ents {
		en.freOff += base
		e.ents = append(e.ents, en)
	}
	if len(e.fre) > 0 {
		e.full = append(e.full, e.fre)
		e.fullAt = append(e.fullAt, e.freRegion)
	}
	e.full = append(e.full, other.full...)
	e.fullAt = append(e.fullAt, other.fullAt...)
	e.fre, e.freRegion = other.fre, other.freRegion
	if e.arena == nil || other.arena != e.arena || e.arena.buf == nil { // other's offsets are not in e's buffer
		for i := len(e.fullAt) - len(other.fullAt); i < len(e.fullAt); i++ {
			e.fullAt[i] = -1
		}
		e.freRegion = -1
	}
	e.freLen += other.freLen
	e.numFREs += other.numFREs
	e.sorted = false
	other.empty(e.arena)
	return nil
}

// empty drops e's functions and FRE chunks (which an encoder appended to
// may hold), keeping its options. The room of its index goes to arena a
// when e is a fork of a's encoder, for a later fork; else e keeps it.
func (e *Encoder) empty(a *arena) {
	ents := e.ents[:0]
	if a != nil && e.arena == a && cap(ents) > 0 {
		a.mu.Lock()
		a.spare = append(a.spare, ents)
		a.mu.Unlock()
		ents = nil
	}
	*e = Encoder{o: e.o, be: e.be, plain: e.plain, sp: e.sp, fp: e.fp, raSlot: e.raSlot, fpSlot: e.fpSlot, ents: ents, freRegion: -1}
}

func sameOptions(a, b *Options) bool {
	return a.Version == b.Version && a.ABI == b.ABI && a.Order == b.Order && a.PCRel == b.PCRel &&
		a.Sort == b.Sort && a.CFAFixedFP == b.CFAFixedFP && a.CFAFixedRA == b.CFAFixedRA &&
		a.FramePointer == b.FramePointer && a.Share == b.Share && slices.Equal(a.AuxHdr, b.AuxHdr)
}

// order puts the entries in index order: a stable sort by start address
// with Options.Sort, the order added otherwise. The FRE data stays in
// the order added (as libsframe's encoder lays it out); only the index
// is sorted.
func (e *Encoder) order() {
	if e.sorted {
		return
	}
	e.sorted = true
	ents := e.ents
	if !e.o.Sort || slices.IsSortedFunc(ents, byStart) {
		return
	}
	slices.SortStableFunc(ents, byStart)
}

// Section returns the section for address addr. The FRE data is built
// on the first call; a later call (another address, when the section's
// place moved) rewrites only the FDE index, in the same buffer: the slice
// an earlier call returned changes with it.
func (e *Encoder) Section(addr uint64) ([]byte, error) {
	o := &e.o
	fdeSize := fdeSizeV2
	if o.Version == Version3 {
		fdeSize = fdeSizeV3
	}
	if len(e.ents) > math.MaxUint32/fdeSize {
		return nil, fmt.Errorf("too many functions (%d)", len(e.ents))
	}
	hsz := HeaderSize + len(o.AuxHdr)
	fdesLen := len(e.ents) * fdeSize
	if e.freAt == 0 {
		if o.Share {
			e.share()
		}
		e.order()
		e.freAt = hsz + fdesLen
		var err error
		switch {
		case e.inPlace(hsz + fdesLen):
			// The FREs are moved while the index is written.
			e.out = e.sectionInArena(hsz + fdesLen)
			moved := make(chan struct{})
			go func() { e.moveInPlace(); close(moved) }()
			err = e.writeFDEs(addr)
			<-moved
		case e.freLen+fdesLen < minParallelJoin:
			e.out = joinChunks(e.header(fdesLen), append(e.full, e.fre))
			err = e.writeFDEs(addr)
		default:
			// The FRE chunks are joined while the index is written: both
			// are mostly first touches of new pages.
			out, chunks := e.header(fdesLen), append(e.full, e.fre)
			joined := make(chan []byte, 1)
			go func() { joined <- joinChunks(out, chunks) }()
			e.out = out[:e.freAt+e.freLen]
			err = e.writeFDEs(addr)
			e.out = <-joined
		}
		e.fre, e.full, e.fullAt, e.arena = nil, nil, nil, nil
		if err != nil {
			return nil, err
		}
		return e.out, nil
	}
	if err := e.writeFDEs(addr); err != nil {
		return nil, err
	}
	return e.out, nil
}

// header returns a new buffer holding the section's header, with room
// for the FDE index (fdesLen bytes) and capacity for the FREs.
func (e *Encoder) header(fdesLen int) []byte {
	hsz := HeaderSize + len(e.o.AuxHdr)
	out := make([]byte, hsz+fdesLen, hsz+fdesLen+e.freLen)
	e.putHeader(out, fdesLen)
	return out
}

// putHeader writes the section's header at the start of out.
func (e *Encoder) putHeader(out []byte, fdesLen int) {
	o := &e.o
	var flags uint8
	if o.Sort {
		flags |= FlagFDESorted
	}
	if o.PCRel {
		flags |= FlagFDEFuncStartPCRel
	}
	if o.FramePointer {
		flags |= FlagFramePointer
	}
	o.Order.PutUint16(out, Magic)
	out[2], out[3], out[4] = o.Version, flags, uint8(o.ABI)
	out[5], out[6], out[7] = uint8(o.CFAFixedFP), uint8(o.CFAFixedRA), uint8(len(o.AuxHdr))
	o.Order.PutUint32(out[8:], uint32(len(e.ents)))
	o.Order.PutUint32(out[12:], uint32(e.numFREs))
	o.Order.PutUint32(out[16:], uint32(e.freLen))
	o.Order.PutUint32(out[20:], 0)
	o.Order.PutUint32(out[24:], uint32(fdesLen))
	copy(out[HeaderSize:], o.AuxHdr)
}

// sectionInArena returns the section in e's arena, its header written:
// front bytes of header and index just before the FREs, which moveInPlace
// puts at the end of the arena's room in front.
func (e *Encoder) sectionInArena(front int) []byte {
	a := e.arena
	out := a.buf[a.prefix-front : a.prefix+e.freLen : a.prefix+e.freLen]
	e.putHeader(out, front-HeaderSize-len(e.o.AuxHdr))
	return out
}

// moveInPlace moves the FRE chunks together at the end of the arena's
// room in front, in order: each lies at or after where it goes (inPlace).
func (e *Encoder) moveInPlace() {
	a := e.arena
	at := a.prefix
	for _, c := range append(e.full, e.fre) {
		at += copy(a.buf[at:], c)
	}
}

// writeFDEs writes the FDE index of the section built, for address addr.
func (e *Encoder) writeFDEs(addr uint64) error {
	o := &e.o
	fdeSize := fdeSizeV2
	if o.Version == Version3 {
		fdeSize = fdeSizeV3
	}
	hsz := HeaderSize + len(o.AuxHdr)
	fdes := e.out[hsz : hsz+len(e.ents)*fdeSize]
	put32, put64 := binary.LittleEndian.PutUint32, binary.LittleEndian.PutUint64
	if e.be {
		put32, put64 = binary.BigEndian.PutUint32, binary.BigEndian.PutUint64
	}
	for k := range e.ents {
		en := &e.ents[k]
		// Field offset within the section, for PC-relative starts.
		base := addr
		if o.PCRel {
			base += uint64(hsz + k*fdeSize)
		}
		startOff := int64(en.start - base)
		p := fdes[k*fdeSize : (k+1)*fdeSize]
		if o.Version == Version2 {
			if startOff < math.MinInt32 || startOff > math.MaxInt32 {
				return &funcError{start: en.start, msg: "start address too far from the section for V2's 32-bit offset"}
			}
			put32(p, uint32(int32(startOff)))
			put32(p[4:], en.size)
			put32(p[8:], en.freOff)
			put32(p[12:], en.nfre)
			p[16] = en.info
			p[17] = en.rep
			p[18], p[19] = 0, 0
		} else {
			put64(p, uint64(startOff))
			put32(p[8:], en.size)
			put32(p[12:], en.freOff)
		}
	}
	return nil
}

// joinChunks appends the chunks to out, within its capacity. A section
// of megabytes is joined by as many goroutines as there are CPUs, each
// copying every so many chunks: most of the time goes in first touches
// of out's pages, which the kernel serves on every CPU at once.
func joinChunks(out []byte, chunks [][]byte) []byte {
	at := make([]int, len(chunks)+1) // where each chunk goes
	at[0] = len(out)
	for i, c := range chunks {
		at[i+1] = at[i] + len(c)
	}
	out = out[:at[len(chunks)]]
	n := min(runtime.GOMAXPROCS(0), len(chunks), (at[len(chunks)]-at[0])/minParallelJoin)
	if n < 2 {
		for i, c := range chunks {
			copy(out[at[i]:], c)
		}
		return out
	}
	var wg sync.WaitGroup
	wg.Add(n)
	for g := range n {
		go func() {
			defer wg.Done()
			for i := g; i < len(chunks); i += n {
				copy(out[at[i]:], chunks[i])
			}
		}()
	}
	wg.Wait()
	return out
}

// minParallelJoin is the fewest FRE bytes a goroutine of joinChunks takes.
const minParallelJoin = 1 << 20

func byStart(a, b encEntry) int { return cmp.Compare(a.start, b.start) }
