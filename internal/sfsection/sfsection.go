// Package sfsection decodes a whole SFrame section at once, for the tests
// and tools that want every function in a slice or re-encode a section:
// the library's one decoded model is sframe.Table, which this builds on.
package sfsection

import (
	"encoding/binary"
	"slices"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Section is a decoded SFrame section: its Table and every FDE with its
// FREs, in index order.
type Section struct {
	*sframe.Table
	FDEs  []sframe.FDE
	Order binary.ByteOrder
}

// StartField returns FDE i's start field as the index holds it: an int32
// in V1 and V2, an int64 in V3, relative to the section's start or, when
// FlagFDEFuncStartPCRel is set, to the field itself.
func (s *Section) StartField(i int) int64 {
	off := uint64(s.Header.Size()+int(s.Header.FDEOff)) + uint64(i*s.Header.FDESize())
	rel := s.FDEs[i].Start - s.Addr
	if s.Header.Flags&sframe.FlagFDEFuncStartPCRel != 0 {
		rel -= off
	}
	if s.Header.Version == sframe.Version3 {
		return int64(rel)
	}
	return int64(int32(rel))
}

// Decode opens section b at address addr, checks all of it (Table.Check)
// and decodes every FDE. It keeps a copy of b, not b.
func Decode(b []byte, addr uint64) (*Section, error) {
	b = slices.Clone(b)
	t, err := sframe.Open(b, addr)
	if err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	s := &Section{Table: t, FDEs: make([]sframe.FDE, t.Header.NumFDEs), Order: binary.LittleEndian}
	if binary.BigEndian.Uint16(b) == sframe.Magic {
		s.Order = binary.BigEndian
	}
	// FDEs that share a block (cfi2sframe's default output) share its
	// decoded FREs: a section of a few kilobytes whose thousands of FDEs
	// point at one long block would otherwise decode into gigabytes.
	first := map[uint32]int{}
	var d sframe.FDE
	for i := range s.FDEs {
		if err := t.FDE(i, &d); err != nil {
			return nil, err
		}
		fres := d.FREs
		s.FDEs[i], d.FREs = d, nil
		k, ok := first[d.FREOff]
		if ok && slices.Equal(fres, s.FDEs[k].FREs) {
			s.FDEs[i].FREs = s.FDEs[k].FREs
			d.FREs = fres // reused
			continue
		}
		if !ok {
			first[d.FREOff] = i
		}
	}
	return s, nil
}

// Functions returns the section's functions as Encode takes them, in the
// order of their FRE data (which Encode keeps), each row as Interpret
// gives it.
func (s *Section) Functions() []sframe.Function {
	order := make([]int, len(s.FDEs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return s.FDEs[order[a]].FREOff < s.FDEs[order[b]].FREOff })
	out := make([]sframe.Function, len(s.FDEs))
	for i, di := range order {
		d := &s.FDEs[di]
		fn := sframe.Function{Start: d.Start, Size: d.Size, PCType: d.PCType, RepSize: d.RepSize,
			Signal: d.Signal, PauthKeyB: d.PauthKeyB, Flex: d.Flex}
		fn.Rows = make([]sframe.Row, len(d.FREs))
		for j := range d.FREs {
			fn.Rows[j] = s.Interpret(d, &d.FREs[j]).Row
		}
		out[i] = fn
	}
	return out
}

// Options returns the options that re-encode the section as it is.
func (s *Section) Options() sframe.Options {
	h := &s.Header
	return sframe.Options{Version: h.Version, ABI: h.ABI, Order: s.Order, Addr: s.Addr,
		PCRel: h.Flags&sframe.FlagFDEFuncStartPCRel != 0, Sort: h.Flags&sframe.FlagFDESorted != 0,
		CFAFixedFP: h.CFAFixedFP, CFAFixedRA: h.CFAFixedRA,
		FramePointer: h.Flags&sframe.FlagFramePointer != 0, AuxHdr: h.AuxHdr}
}
