package sframe

import (
	"bytes"
	"hash/maphash"
)

// sharedBlock is where share wrote the first block of a hash: its offset
// in the new FRE sub-section and, for V2 (whose index entry says how to
// read the FREs), the FRE count and info byte it was written for.
type sharedBlock struct {
	off  uint32
	nfre uint32
	info uint8
}

// share lays the FRE sub-section out anew with each distinct block once
// (Options.Share): a function's block is its FRE bytes (V3: with the
// attribute in front), from its offset to the next function's in the
// order they were added, and a function whose block is the same as an
// earlier one's points at that one. The index entries get their new
// offsets, the header's FRE count the FREs written.
//
// Cost: one pass over the FRE bytes (hashed with maphash, compared byte
// for byte on a hit), a new buffer of the distinct blocks' size, and a map
// from a block's hash to where it went: about 40 bytes per distinct block
// (libLLVM-15: 35,483 blocks, some 1.5 MB), dropped when share returns.
// The encoder's streaming is untouched: each function still costs only
// its FRE bytes and an index entry until Section.
func (e *Encoder) share() {
	if len(e.ents) == 0 {
		return
	}
	chunks := e.full
	if len(e.fre) > 0 {
		chunks = append(chunks, e.fre)
	}
	seed := maphash.MakeSeed()
	seen := make(map[uint64]sharedBlock, len(e.ents)/2)
	out := make([]byte, 0, e.freLen)
	v2 := e.o.Version == Version2
	numFREs := 0
	ci, base := 0, 0 // the chunk holding the current block, and its offset
	for k := range e.ents {
		en := &e.ents[k]
		from, to := int(en.freOff), e.freLen
		if k+1 < len(e.ents) {
			to = int(e.ents[k+1].freOff) // not yet moved
		}
		if to == from { // a V2 function without FREs
			en.freOff = uint32(len(out))
			continue
		}
		// Add keeps a function's FREs in one chunk.
		for from >= base+len(chunks[ci]) {
			base += len(chunks[ci])
			ci++
		}
		b := chunks[ci][from-base : to-base]
		h := maphash.Bytes(seed, b)
		if v2 {
			h ^= (uint64(en.nfre)<<8 | uint64(en.info)) * 0x9e3779b97f4a7c15
		}
		if s, ok := seen[h]; ok && int(s.off)+len(b) <= len(out) && bytes.Equal(out[s.off:int(s.off)+len(b)], b) &&
			(!v2 || s.nfre == en.nfre && s.info == en.info) {
			en.freOff = s.off
			continue
		}
		off := uint32(len(out))
		if _, ok := seen[h]; !ok { // a colliding block is written, not shared
			seen[h] = sharedBlock{off: off, nfre: en.nfre, info: en.info}
		}
		out = append(out, b...)
		en.freOff = off
		numFREs += int(en.nfre)
	}
	e.full, e.fullAt, e.fre, e.freRegion, e.arena = nil, nil, out, -1, nil
	e.freLen, e.numFREs = len(out), numFREs
}
