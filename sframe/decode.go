package sframe

// Decode opens an SFrame section (see Open) and decodes all of it: every
// FDE with its FREs, checked as Check checks them. It keeps nothing of b.
// Tables read large sections one function at a time (Table.FDE, Check,
// Dump); a Section is for callers that want every function at once, such
// as one re-encoding the section (Functions, Options).
func Decode(b []byte, addr uint64) (*Section, error) {
	t, err := Open(b, addr)
	if err != nil {
		return nil, err
	}
	h := t.Header
	h.AuxHdr = append([]byte(nil), h.AuxHdr...)
	s := &Section{Header: h, Order: t.byteOrder(), Addr: addr, FDEs: make([]FDE, t.n)}
	// One array for every FRE: the header's count, which Open bounded by
	// the section's size, and which decodeAll holds the FDEs to.
	pool := make([]FRE, h.NumFREs)
	err = t.decodeAll(func(i int) *FDE { return &s.FDEs[i] }, func(_ []FRE, n int) []FRE {
		f := pool[:n:n]
		pool = pool[n:]
		return f
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
