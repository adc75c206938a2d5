package sframe

// Decode parses an SFrame section. addr is the section's address, used to
// resolve function start offsets (relative to the section start, or to the
// start field itself when FlagFDEFuncStartPCRel is set). Either byte order
// is accepted; it is detected from the magic. Every count, offset and length
// is checked against len(b) before anything is allocated.
func Decode(b []byte, addr uint64) (*Section, error) {
	r, err := NewReader(b, addr)
	if err != nil {
		return nil, err
	}
	h := r.Header
	h.AuxHdr = append([]byte(nil), h.AuxHdr...)
	s := &Section{Header: h, Order: r.Order, Addr: addr}
	s.FDEs = make([]FDE, h.NumFDEs)
	fres := make([]FRE, h.NumFREs)
	used := 0
	for i := range s.FDEs {
		d := &s.FDEs[i]
		pos, _ := r.head(i, d, len(fres)-used) // checked by NewReader
		d.FREs = fres[used : used+int(d.NumFREs) : used+int(d.NumFREs)]
		used += int(d.NumFREs)
		for j := range d.FREs {
			pos, _ = r.fre(i, j, pos, d, &d.FREs[j])
		}
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
