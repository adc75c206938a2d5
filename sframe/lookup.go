package sframe

// FindFRE returns the rule that applies at pc: the FDE whose range
// [Start, Start+Size) holds pc (binary search when the section is sorted,
// a linear scan otherwise), then its last FRE starting at or before pc. For
// PCMask FDEs the offset into the function is taken modulo the repeat size
// before comparing with the FRE start values. It does not allocate.
func (s *Section) FindFRE(pc uint64) (Rule, bool) {
	d := s.findFDE(pc)
	if d == nil {
		return Rule{}, false
	}
	f := freAt(d, pc)
	if f == nil {
		return Rule{}, false
	}
	return s.Interpret(d, f), true
}

// freAt returns d's last FRE starting at or before pc (for a PCMask FDE,
// the offset into the function taken modulo the repeat size), or nil.
func freAt(d *FDE, pc uint64) *FRE {
	if len(d.FREs) == 0 {
		return nil
	}
	off := pc - d.Start
	if d.PCType == PCMask && d.RepSize != 0 {
		off %= uint64(d.RepSize)
	}
	// Last FRE with StartOff <= off.
	lo, hi := 0, len(d.FREs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if uint64(d.FREs[m].StartOff) <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return nil
	}
	return &d.FREs[lo-1]
}

func (s *Section) findFDE(pc uint64) *FDE {
	in := func(d *FDE) bool { return pc >= d.Start && pc-d.Start < uint64(d.Size) }
	if s.Header.Flags&FlagFDESorted == 0 {
		for i := range s.FDEs {
			if in(&s.FDEs[i]) {
				return &s.FDEs[i]
			}
		}
		return nil
	}
	lo, hi := 0, len(s.FDEs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.FDEs[m].Start <= pc {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo > 0 && in(&s.FDEs[lo-1]) {
		return &s.FDEs[lo-1]
	}
	return nil
}
