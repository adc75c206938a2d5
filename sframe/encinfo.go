package sframe

// What an Encoder tells about the section it builds, beyond its bytes:
// figures for reports.

// Stats counts what an Encoder was given.
type Stats struct {
	Functions int // functions (FDEs)
	FREs      int
	// FREType counts functions by the width of their FREs' start
	// addresses: FREAddr1, FREAddr2, FREAddr4 (1, 2 and 4 bytes).
	FREType [3]int
	// WordSize counts FREs by the size of their data words: 1, 2 and 4
	// bytes.
	WordSize [3]int
}

// Stats returns the counts of the functions added so far.
func (e *Encoder) Stats() Stats {
	s := e.stats
	s.Functions, s.FREs = len(e.ents), e.numFREs
	return s
}

// add counts one function: its FRE type and its FREs by data-word size.
func (s *Stats) add(freType int, sizes [3]int) {
	s.FREType[freType]++
	for i, n := range sizes {
		s.WordSize[i] += n
	}
}

// merge adds the counts of another encoder's functions (Append).
func (s *Stats) merge(o *Stats) {
	for i := range s.FREType {
		s.FREType[i] += o.FREType[i]
		s.WordSize[i] += o.WordSize[i]
	}
}
