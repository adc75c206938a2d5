package stepbench

import (
	"encoding/binary"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// floorStepper is the least an SFrame step can do on this format: the
// steps of sframe.Table.LookupStep and unwind's fast path with nothing
// checked and nothing general. It reads a little-endian V3 section
// (AMD64, sorted index, start fields PC-relative) straight from its
// bytes: a granule table built once (as sframe.Open builds its own: one
// 4-byte entry per function) gives the first index entry to look at; the
// 16-byte index entries give start, size and FRE offset; the function's
// FREs are decoded one after another up to the PC's (their sizes vary:
// the format's own walk); the row's CFA rule and saved RA and FP slots
// give the caller's registers, read through unwind.Memory as the other
// steps do. Bad bytes would make it read the wrong row or panic, which is
// why no real reader is this. Its time on the same PCs as the other two
// steps is what the format asks of any reader on this machine: a bound,
// not a target (see DESIGN.md, "The unwind step").
type floorStepper struct {
	b                []byte
	fdeBase, freBase int
	n                int
	addr             uint64 // the section's address
	base             uint64 // lowest start
	shift            uint8
	gran             []uint32
}

// newFloorStepper reads the header of a section cfi2sframe wrote for
// AMD64 (V3, little-endian, sorted, PC-relative starts).
func newFloorStepper(sec []byte, addr uint64) (*floorStepper, error) {
	le := binary.LittleEndian
	if len(sec) < sframe.HeaderSize || le.Uint16(sec) != sframe.Magic || sec[2] != sframe.Version3 ||
		sec[3]&(sframe.FlagFDESorted|sframe.FlagFDEFuncStartPCRel) != sframe.FlagFDESorted|sframe.FlagFDEFuncStartPCRel ||
		sframe.ABI(sec[4]) != sframe.ABIAMD64LE || int8(sec[6]) != -8 {
		return nil, fmt.Errorf("floor: not a sorted, PC-relative V3 AMD64 section with RA at CFA-8")
	}
	aux := sframe.HeaderSize + int(sec[7])
	fl := &floorStepper{b: sec, addr: addr, n: int(le.Uint32(sec[8:])),
		fdeBase: aux + int(le.Uint32(sec[20:])), freBase: aux + int(le.Uint32(sec[24:]))}
	if fl.n == 0 {
		return nil, fmt.Errorf("floor: no functions")
	}
	fl.base = fl.start(0)
	// The granules cover every function to its end, so that a PC in the
	// last one has a granule after its own.
	span := fl.start(fl.n-1) + uint64(le.Uint32(sec[fl.fdeBase+16*(fl.n-1)+8:])) - fl.base
	for span>>fl.shift >= uint64(fl.n) {
		fl.shift++
	}
	fl.gran = make([]uint32, span>>fl.shift+2)
	k := 0
	for g := range fl.gran {
		// gran[g]: the last function starting at or before granule g.
		for k+1 < fl.n && fl.start(k+1) <= fl.base+uint64(g)<<fl.shift {
			k++
		}
		fl.gran[g] = uint32(k)
	}
	return fl, nil
}

func (fl *floorStepper) start(k int) uint64 {
	o := fl.fdeBase + 16*k
	return binary.LittleEndian.Uint64(fl.b[o:]) + fl.addr + uint64(o)
}

// step returns the caller's PC, CFA and FP for a function at pc whose
// FREs are PC-increment ones (what the PCs of the step benchmark are in).
func (fl *floorStepper) step(pc, sp, fp uint64, m unwind.Memory) (uint64, uint64, uint64, bool) {
	le := binary.LittleEndian
	g := (pc - fl.base) >> fl.shift
	k, last := int(fl.gran[g]), int(fl.gran[g+1])
	for k < last && fl.start(k+1) <= pc {
		k++
	}
	e := fl.b[fl.fdeBase+16*k:]
	off := pc - fl.start(k)
	if off >= uint64(le.Uint32(e[8:])) {
		return 0, 0, 0, false
	}
	return fl.rowStep(fl.freBase+int(le.Uint32(e[12:])), off, sp, fp, m)
}

// step2 is step with a copy of the index in the granule table (16 bytes
// a function): when the PC is in the function that covers its granule's
// start, the lookup reads that entry and then the FREs, one dependent
// load fewer; the sizes are not checked.
func (fl *floorStepper) step2(idx []granCopy, pc, sp, fp uint64, m unwind.Memory) (uint64, uint64, uint64, bool) {
	c := &idx[(pc-fl.base)>>fl.shift]
	if pc < c.nextStart {
		return fl.rowStep(fl.freBase+int(c.freOff), pc-c.start, sp, fp, m)
	}
	return fl.step(pc, sp, fp, m)
}

// rowStep decodes the FREs of the function whose attributes are at
// section offset a up to offset off into it, and steps with the row.
func (fl *floorStepper) rowStep(a int, off, sp, fp uint64, m unwind.Memory) (uint64, uint64, uint64, bool) {
	le := binary.LittleEndian
	n := int(le.Uint16(fl.b[a:]))
	asz := 1 << (fl.b[a+2] & 0xf) // FRE start field: 1, 2 or 4 bytes
	pos, found := a+5, -1
	for ; n > 0; n-- {
		var s uint64
		switch asz {
		case 1:
			s = uint64(fl.b[pos])
		case 2:
			s = uint64(le.Uint16(fl.b[pos:]))
		default:
			s = uint64(le.Uint32(fl.b[pos:]))
		}
		if s > off {
			break
		}
		found = pos
		info := fl.b[pos+asz]
		pos += asz + 1 + int(info>>1&0xf)<<(info>>5&3)
	}
	if found < 0 {
		return 0, 0, 0, false
	}
	info := fl.b[found+asz]
	w := found + asz + 1
	word := func(i int) int64 {
		switch info >> 5 & 3 {
		case 0:
			return int64(int8(fl.b[w+i]))
		case 1:
			return int64(int16(le.Uint16(fl.b[w+2*i:])))
		}
		return int64(int32(le.Uint32(fl.b[w+4*i:])))
	}
	base := sp
	if info&1 == 0 { // base register FP
		base = fp
	}
	cfa := base + uint64(word(0))
	ra, _ := m.ReadWord(cfa - 8)
	nfp := fp
	if info>>1&0xf > 1 {
		nfp, _ = m.ReadWord(cfa + uint64(word(1)))
	}
	return ra, cfa, nfp, true
}

// granCopy is one granule of floorStepper's copied index: the function
// that starts last at or before the granule (k), its start and FRE offset,
// and where the next function starts.
type granCopy struct {
	k, freOff        uint32
	start, nextStart uint64
}

// copiedIndex builds the table step2 reads: per granule, what the index
// says of the function covering its start, so that a lookup reads one
// entry and then the FREs.
func (fl *floorStepper) copiedIndex() []granCopy {
	out := make([]granCopy, len(fl.gran))
	for g, k := range fl.gran {
		e := fl.b[fl.fdeBase+16*int(k):]
		next := ^uint64(0)
		if int(k)+1 < fl.n {
			next = fl.start(int(k) + 1)
		}
		out[g] = granCopy{k: k, freOff: binary.LittleEndian.Uint32(e[12:]), start: fl.start(int(k)), nextStart: next}
	}
	return out
}
