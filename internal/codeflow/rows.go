package codeflow

import (
	"math"
	"slices"
)

// Analyze holds every function's rows until the walks have been held
// against each other (conflicts): on a file of chromium's size, tens of
// millions of them. A Row takes 96 bytes; a packedRow 28, the same
// fields with the offsets in 32 bits (the PC from its Func's start).
// A Func whose rows do not all fit keeps its Rows as they are: packing
// never changes a row.

// packedRow is a Row in 28 bytes (packRows).
type packedRow struct {
	pc                     uint32 // from the Func's Start
	cfa, fp, ra, sp, fpVal int32
	flags                  uint16
}

// The bits of packedRow.flags; the two Where fields take two bits each.
const (
	pkBaseFP = 1 << iota
	pkRASigned
	pkBKey
	pkSPKnown
	pkFPValKnown
	pkFPWhere                   // and the bit above
	pkRAWhere = 1 << (iota + 1) // and the bit above
)

// heldFunc is a Func held until Analyze emits it: its rows packed, or in
// rows when they could not be.
type heldFunc struct {
	start, end, entry uint64
	packed            []packedRow
	rows              []Row
}

// hold packs fn's rows when every one fits; it keeps nothing of fn.Rows
// (a walk's buffer).
func hold(fn Func) heldFunc {
	h := heldFunc{start: fn.Start, end: fn.End, entry: fn.Entry}
	if len(fn.Rows) == 0 {
		return h
	}
	p := make([]packedRow, len(fn.Rows))
	for i := range fn.Rows {
		var ok bool
		if p[i], ok = packRow(fn.Start, &fn.Rows[i]); !ok {
			h.rows = slices.Clone(fn.Rows)
			return h
		}
	}
	h.packed = p
	return h
}

// fn is the Func h holds.
func (h *heldFunc) fn() Func {
	fn := Func{Start: h.start, End: h.end, Entry: h.entry, Rows: h.rows}
	if h.packed != nil {
		fn.Rows = make([]Row, len(h.packed))
		for i := range h.packed {
			fn.Rows[i] = unpackRow(h.start, &h.packed[i])
		}
	}
	return fn
}

func fits32(v int64) bool { return v >= math.MinInt32 && v <= math.MaxInt32 }

// packRow packs r, a row of the Func starting at start; ok is false when
// a field does not fit.
func packRow(start uint64, r *Row) (packedRow, bool) {
	d := r.PC - start
	if r.PC < start || d > math.MaxUint32 || r.Base > BaseFP || r.FP.Where > Lost || r.RA.Where > Lost {
		return packedRow{}, false
	}
	for _, v := range [...]int64{r.CFAOff, r.FP.Off, r.RA.Off, r.SP.Off, r.FPVal.Off} {
		if !fits32(v) {
			return packedRow{}, false
		}
	}
	p := packedRow{pc: uint32(d), cfa: int32(r.CFAOff), fp: int32(r.FP.Off), ra: int32(r.RA.Off),
		sp: int32(r.SP.Off), fpVal: int32(r.FPVal.Off)}
	p.flags = uint16(r.FP.Where)*pkFPWhere | uint16(r.RA.Where)*pkRAWhere
	for _, b := range [...]struct {
		on  bool
		bit uint16
	}{{r.Base == BaseFP, pkBaseFP}, {r.RASigned, pkRASigned}, {r.BKey, pkBKey}, {r.SP.Known, pkSPKnown}, {r.FPVal.Known, pkFPValKnown}} {
		if b.on {
			p.flags |= b.bit
		}
	}
	return p, true
}

// unpackRow is the Row packRow packed into p.
func unpackRow(start uint64, p *packedRow) Row {
	r := Row{PC: start + uint64(p.pc), CFAOff: int64(p.cfa),
		FP:       Saved{Where: Where(p.flags / pkFPWhere & 3), Off: int64(p.fp)},
		RA:       Saved{Where: Where(p.flags / pkRAWhere & 3), Off: int64(p.ra)},
		RASigned: p.flags&pkRASigned != 0, BKey: p.flags&pkBKey != 0,
		SP:    Val{Off: int64(p.sp), Known: p.flags&pkSPKnown != 0},
		FPVal: Val{Off: int64(p.fpVal), Known: p.flags&pkFPValKnown != 0}}
	if p.flags&pkBaseFP != 0 {
		r.Base = BaseFP
	}
	return r
}
