// Package pclntest writes Go function tables (.gopclntab) of every layout
// gopclntab reads, for tests: any version, byte order and pointer size,
// with the functions, flags and pcsp tables a test asks for. debug/gosym
// reads what it writes (names, entries, ends), which ties the layout to
// Go's own reader. ELF makes the small files that hold such a table, or
// the .debug_frame internal/gocfi makes from one.
package pclntest

import (
	"encoding/binary"
)

// Layouts, by the magic number that starts the header.
const (
	Magic116 = 0xfffffffa // Go 1.16, 1.17
	Magic118 = 0xfffffff0 // Go 1.18, 1.19
	Magic120 = 0xfffffff1 // Go 1.20 and later
)

// Func is one function to write.
type Func struct {
	Name   string
	Off    uint64 // entry, as an offset from the text start
	FuncID uint8
	Flag   uint8
	// PCSP is the encoded pcsp table (PCValue), nil for none. Functions
	// with equal PCSP bytes share one copy, as Go's linker makes them.
	PCSP []byte
}

// Table is a table to write.
type Table struct {
	Magic     uint32
	Order     binary.ByteOrder
	PtrSize   int
	Quantum   uint8
	TextStart uint64 // the header's (Go 1.18 and later), and the base of Go 1.16 entries
	Funcs     []Func // by entry
	End       uint64 // offset of the end of the last function
}

// Row is a pc-value row: Value for Len bytes.
type Row struct {
	Value int32
	Len   uint64
}

// R is Row{value, n}.
func R(value int32, n uint64) Row { return Row{Value: value, Len: n} }

// PCValue encodes rows as a pc-value table for the given PC quantum.
func PCValue(quantum uint8, rows ...Row) []byte {
	var b []byte
	prev := int32(-1)
	for _, r := range rows {
		d := r.Value - prev
		b = binary.AppendUvarint(b, uint64(uint32(d<<1)^uint32(d>>31)))
		b = binary.AppendUvarint(b, r.Len/uint64(quantum))
		prev = r.Value
	}
	return append(b, 0)
}

// Write lays the table out as Go's linker does: header, funcnametab,
// cutab, filetab, pctab, then the functab followed by the _func records.
func Write(t Table) []byte {
	p := t.PtrSize
	o := t.Order.(binary.AppendByteOrder)
	words := 8
	if t.Magic == Magic116 {
		words = 7
	}
	var names []byte
	nameOff := make([]uint32, len(t.Funcs))
	for i, f := range t.Funcs {
		nameOff[i] = uint32(len(names))
		names = append(append(names, f.Name...), 0)
	}
	pctab := []byte{0} // offset 0 means no table
	pcsp := make([]uint32, len(t.Funcs))
	seen := map[string]uint32{}
	for i, f := range t.Funcs {
		if f.PCSP == nil {
			continue
		}
		off, ok := seen[string(f.PCSP)]
		if !ok {
			off = uint32(len(pctab))
			seen[string(f.PCSP)] = off
			pctab = append(pctab, f.PCSP...)
		}
		pcsp[i] = off
	}
	hdr := 8 + words*p
	funcnames := hdr
	cutab := funcnames + len(names)
	filetab := cutab + 4
	pcOff := filetab + 1
	functab := align(pcOff+len(pctab), p)
	field := 4
	if t.Magic == Magic116 {
		field = p
	}
	recs := align(functab+(2*len(t.Funcs)+1)*field, 4)

	b := o.AppendUint32(nil, t.Magic)
	b = append(b, 0, 0, t.Quantum, byte(p))
	word := func(b []byte, v uint64) []byte {
		if p == 4 {
			return o.AppendUint32(b, uint32(v))
		}
		return o.AppendUint64(b, v)
	}
	b = word(b, uint64(len(t.Funcs)))
	b = word(b, 1) // nfiles
	if t.Magic != Magic116 {
		b = word(b, t.TextStart)
	}
	for _, v := range []int{funcnames, cutab, filetab, pcOff, functab} {
		b = word(b, uint64(v))
	}
	b = append(b, names...)
	b = append(b, 0, 0, 0, 0) // cutab
	b = append(b, 0)          // filetab
	b = append(b, pctab...)
	b = append(b, make([]byte, functab-len(b))...)
	entry := func(b []byte, off uint64) []byte {
		if t.Magic == Magic116 {
			return word(b, t.TextStart+off)
		}
		return o.AppendUint32(b, uint32(off))
	}
	size := recordSize(t.Magic, p)
	for i, f := range t.Funcs {
		b = entry(b, f.Off)
		rec := uint64(recs - functab + i*size)
		if t.Magic == Magic116 {
			b = word(b, rec)
		} else {
			b = o.AppendUint32(b, uint32(rec))
		}
	}
	b = entry(b, t.End)
	b = append(b, make([]byte, recs-len(b))...)
	for i, f := range t.Funcs {
		b = entry(b, f.Off)
		b = o.AppendUint32(b, nameOff[i])
		b = o.AppendUint32(b, 0) // args
		b = o.AppendUint32(b, 0) // deferreturn
		b = o.AppendUint32(b, pcsp[i])
		b = o.AppendUint32(b, 0) // pcfile
		b = o.AppendUint32(b, 0) // pcln
		b = o.AppendUint32(b, 0) // npcdata
		b = o.AppendUint32(b, 0) // cuOffset
		if t.Magic == Magic120 {
			b = o.AppendUint32(b, 1) // startLine
		}
		b = append(b, f.FuncID, f.Flag, 0, 0) // funcID, flag, pad, nfuncdata
	}
	return b
}

// recordSize is the size of a _func record without pcdata and funcdata.
func recordSize(magic uint32, ptr int) int {
	switch magic {
	case Magic116:
		return ptr + 36
	case Magic118:
		return 40
	}
	return 44
}

func align(n, a int) int { return (n + a - 1) / a * a }
