package sframe

import (
	"encoding/binary"
)

// Decode parses an SFrame section. addr is the section's address, used to
// resolve function start offsets (relative to the section start, or to the
// start field itself when FlagFDEFuncStartPCRel is set). Either byte order
// is accepted; it is detected from the magic. Every count, offset and length
// is checked against len(b) before anything is allocated.
func Decode(b []byte, addr uint64) (*Section, error) {
	if len(b) < HeaderSize {
		return nil, errorf(int64(len(b)), "section too short for a header (%d bytes, need %d)", len(b), HeaderSize)
	}
	var order binary.ByteOrder
	switch {
	case binary.LittleEndian.Uint16(b) == Magic:
		order = binary.LittleEndian
	case binary.BigEndian.Uint16(b) == Magic:
		order = binary.BigEndian
	default:
		return nil, errorf(0, "bad magic %#04x", binary.LittleEndian.Uint16(b))
	}
	h := Header{
		Magic:      Magic,
		Version:    b[2],
		Flags:      b[3],
		ABI:        b[4],
		CFAFixedFP: int8(b[5]),
		CFAFixedRA: int8(b[6]),
		AuxHdrLen:  b[7],
		NumFDEs:    order.Uint32(b[8:]),
		NumFREs:    order.Uint32(b[12:]),
		FRELen:     order.Uint32(b[16:]),
		FDEOff:     order.Uint32(b[20:]),
		FREOff:     order.Uint32(b[24:]),
	}
	hsz, fdeSize, err := h.checkSizes(len(b))
	if err != nil {
		return nil, err
	}
	h.AuxHdr = append([]byte(nil), b[HeaderSize:hsz]...)

	s := &Section{Header: h, Order: order, Addr: addr}
	s.FDEs = make([]FDE, h.NumFDEs)
	fres := make([]FRE, h.NumFREs)
	freBase := hsz + int(h.FREOff)
	freSub := b[freBase : freBase+int(h.FRELen)]
	used := 0
	for i := range s.FDEs {
		off := hsz + int(h.FDEOff) + i*int(fdeSize)
		d := &s.FDEs[i]
		p := b[off:]
		var attrOff int
		switch h.Version {
		case Version1, Version2:
			d.StartOff = int64(int32(order.Uint32(p)))
			d.Size = order.Uint32(p[4:])
			d.FREOff = order.Uint32(p[8:])
			d.NumFREs = order.Uint32(p[12:])
			d.Info = p[16]
			if h.Version == Version2 {
				d.RepSize = p[17]
				d.Padding = order.Uint16(p[18:])
			}
			attrOff = int(d.FREOff)
		case Version3:
			d.StartOff = int64(order.Uint64(p))
			d.Size = order.Uint32(p[8:])
			d.FREOff = order.Uint32(p[12:])
			if uint64(d.FREOff)+fdeAttrSizeV3 > uint64(len(freSub)) {
				return nil, errorf(int64(off+12), "FDE %d: attribute at FRE offset %d runs past the FRE sub-section (%d bytes)", i, d.FREOff, len(freSub))
			}
			a := freSub[d.FREOff:]
			d.NumFREs = uint32(order.Uint16(a))
			d.Info = a[2]
			d.Info2 = a[3]
			d.RepSize = a[4]
			d.FDEType = d.Info2 & fdeTypeMaskV3
			d.Signal = d.Info&fdeInfoSignalBit != 0
			attrOff = int(d.FREOff) + fdeAttrSizeV3
		}
		d.Start = addr + uint64(d.StartOff)
		if h.Flags&FlagFDEFuncStartPCRel != 0 {
			d.Start += uint64(off)
		}
		d.FREType = d.Info & 0xf
		d.PCType = (d.Info >> 4) & 1
		d.PauthKeyB = d.Info&fdeInfoPauthBit != 0
		if d.FREType > FREAddr4 {
			return nil, errorf(int64(off), "FDE %d: unknown FRE type %d", i, d.FREType)
		}
		if d.FDEType > FDETypeFlex {
			return nil, errorf(int64(off), "FDE %d: unknown FDE type %d", i, d.FDEType)
		}
		if uint64(d.NumFREs) > uint64(len(fres)-used) {
			return nil, errorf(int64(off), "FDE %d: %d FREs exceed the header's remaining FRE count %d", i, d.NumFREs, len(fres)-used)
		}
		if attrOff > len(freSub) {
			return nil, errorf(int64(off), "FDE %d: FRE offset %d past the FRE sub-section (%d bytes)", i, attrOff, len(freSub))
		}
		d.FREs = fres[used : used+int(d.NumFREs) : used+int(d.NumFREs)]
		used += int(d.NumFREs)
		pos := attrOff
		asz := 1 << d.FREType
		for j := range d.FREs {
			f := &d.FREs[j]
			at := int64(freBase + pos)
			if pos+asz+1 > len(freSub) {
				return nil, errorf(at, "FDE %d FRE %d: truncated FRE header", i, j)
			}
			q := freSub[pos:]
			switch asz {
			case 1:
				f.StartOff = uint32(q[0])
			case 2:
				f.StartOff = uint32(order.Uint16(q))
			default:
				f.StartOff = order.Uint32(q)
			}
			f.Info = q[asz]
			f.BaseReg = f.Info & 1
			f.NumWords = (f.Info >> 1) & 0xf
			sz := (f.Info >> 5) & 3
			if sz > DataWord4 {
				return nil, errorf(at+int64(asz), "FDE %d FRE %d: bad data-word size code %d", i, j, sz)
			}
			f.WordSize = 1 << sz
			f.MangledRA = f.Info&freInfoMangledRABit != 0
			pos += asz + 1
			n := int(f.NumWords) * int(f.WordSize)
			if pos+n > len(freSub) {
				return nil, errorf(int64(freBase+pos), "FDE %d FRE %d: %d data words of %d bytes run past the FRE sub-section", i, j, f.NumWords, f.WordSize)
			}
			for k := 0; k < int(f.NumWords); k++ {
				w := freSub[pos+k*int(f.WordSize):]
				switch f.WordSize {
				case 1:
					f.Words[k] = int32(int8(w[0]))
				case 2:
					f.Words[k] = int32(int16(order.Uint16(w)))
				default:
					f.Words[k] = int32(order.Uint32(w))
				}
			}
			pos += n
		}
	}
	if used != len(fres) {
		return nil, errorf(12, "header claims %d FREs but the FDEs hold %d", len(fres), used)
	}
	return s, nil
}

// checkSizes checks a parsed header against a section of n bytes: a known
// version and ABI, and the auxiliary header, the FDE array and the FRE
// sub-section inside the section, with room for NumFREs FREs. It returns
// the header's size and one FDE's size. Decode and Open share it.
func (h *Header) checkSizes(n int) (hsz int, fdeSize uint64, err error) {
	if h.Version < Version1 || h.Version > Version3 {
		return 0, 0, errorf(2, "unsupported version %d", h.Version)
	}
	if h.ABI < ABIAArch64BE || h.ABI > ABIS390XBE {
		return 0, 0, errorf(4, "unknown ABI/arch id %d", h.ABI)
	}
	hsz = h.Size()
	if hsz > n {
		return 0, 0, errorf(7, "auxiliary header length %d runs past the end of the %d-byte section", h.AuxHdrLen, n)
	}
	body := uint64(n - hsz)
	fdeSize = uint64(fdeSizeV3)
	switch h.Version {
	case Version1:
		fdeSize = fdeSizeV1
	case Version2:
		fdeSize = fdeSizeV2
	}
	if uint64(h.FDEOff) > body || uint64(h.NumFDEs)*fdeSize > body-uint64(h.FDEOff) {
		return 0, 0, errorf(8, "%d FDEs of %d bytes at FDE offset %d do not fit in the %d bytes after the header", h.NumFDEs, fdeSize, h.FDEOff, body)
	}
	if uint64(h.FREOff) > body || uint64(h.FRELen) > body-uint64(h.FREOff) {
		return 0, 0, errorf(16, "FRE sub-section (offset %d, length %d) does not fit in the %d bytes after the header", h.FREOff, h.FRELen, body)
	}
	// Every FRE takes at least two bytes.
	if uint64(h.NumFREs) > uint64(h.FRELen)/2 {
		return 0, 0, errorf(12, "%d FREs cannot fit in an FRE sub-section of %d bytes", h.NumFREs, h.FRELen)
	}
	return hsz, fdeSize, nil
}
