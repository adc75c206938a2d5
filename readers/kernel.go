package readers

import "github.com/cfi2sframe/cfi2sframe/sframe"

// kernel applies the rules of the Linux kernel's SFrame user unwinder
// (kernel/unwind/sframe.c, patch series v13, January 2026). A section that
// breaks any of them is not registered at exec (sframe_add_section fails),
// or is removed at the first lookup that trips over it (sframe_find_user
// drops a section on -EFAULT): either way the kernel has no SFrame for the
// file, so every rule here is a Reject.
func (c *checker) kernel(in Input) {
	h := &c.sec.Header
	// sframe_read_header: version, flags and auxiliary header.
	if h.Version != sframe.Version3 {
		c.add("version", Reject, -1, -1, 0, "version %d (the kernel reads version 3 only)", h.Version)
	}
	if h.Flags&sframe.FlagFDESorted == 0 {
		c.add("sorted", Reject, -1, -1, 0, "SFRAME_F_FDE_SORTED not set")
	}
	if h.Flags&sframe.FlagFDEFuncStartPCRel == 0 {
		c.add("pcrel", Reject, -1, -1, 0, "SFRAME_F_FDE_FUNC_START_PCREL not set")
	}
	if h.AuxHdrLen != 0 {
		c.add("aux-header", Reject, -1, -1, 0, "auxiliary header of %d bytes", h.AuxHdrLen)
	}
	// sframe_read_header: "no FDE/FRE entries".
	if h.NumFDEs == 0 || h.NumFREs == 0 {
		c.add("empty", Reject, -1, -1, 0, "%d FDEs and %d FREs (both must be non-zero)", h.NumFDEs, h.NumFREs)
	}
	// sframe_read_header: the header ends before the section does, and
	// the FRE area starts after the FDE index and ends inside the section.
	size := uint64(len(in.Section))
	hsz := uint64(h.Size())
	if hsz >= size {
		c.add("header-fits", Reject, -1, -1, 0, "header of %d bytes fills the %d-byte section", hsz, size)
	}
	fdesEnd := hsz + uint64(h.FDEOff) + uint64(h.NumFDEs)*c.fdeSize()
	freStart := hsz + uint64(h.FREOff)
	if freStart < fdesEnd || freStart+uint64(h.FRELen) > size {
		c.add("fre-area", Reject, -1, -1, 0, "FRE area [%#x,%#x) is not after the FDE index (ends %#x) and inside the %d-byte section",
			freStart, freStart+uint64(h.FRELen), fdesEnd, size)
	}
	if h.Version != sframe.Version3 {
		return // the FDE layout differs; nothing below applies
	}
	c.common()
	var prev uint64
	for i := range c.sec.FDEs {
		d := &c.sec.FDEs[i]
		// __read_fde: the function start lies in the registered text.
		if in.Exec != nil && !inRanges(in.Exec, d.Start) {
			c.add("text", Reject, i, -1, d.Start, "function start %#x is outside the executable segments", d.Start)
		}
		// sframe_validate_section: starts strictly increase (prev_ip
		// starts at 0, so a function at address 0 fails too).
		if d.Start <= prev {
			c.add("fde-order", Reject, i, -1, d.Start, "function start %#x is not above the previous one (%#x)", d.Start, prev)
		}
		prev = d.Start
		c.kernelFREs(i, d)
	}
}

func (c *checker) kernelFREs(i int, d *sframe.FDE) {
	h := &c.sec.Header
	for j := range d.FREs {
		f := &d.FREs[j]
		pc := d.Start + uint64(f.StartOff)
		// __read_fre: a PCINC FRE may not start beyond the function.
		if d.PCType == sframe.PCInc && f.StartOff > d.Size {
			c.add("fre-start", Reject, i, j, pc, "FRE start +%#x is beyond the function size %#x", f.StartOff, d.Size)
		}
		// __find_fre / sframe_validate_section: FRE starts strictly
		// increase.
		if j > 0 && f.StartOff <= d.FREs[j-1].StartOff {
			c.add("fre-order", Reject, i, j, pc, "FRE start +%#x is not above the previous FRE's +%#x", f.StartOff, d.FREs[j-1].StartOff)
		}
		n := int(f.NumWords)
		if n == 0 {
			continue // outermost frame: accepted (__read_fre_datawords)
		}
		if d.FDEType == sframe.FDETypeFlex {
			// __read_flex_fde_fre_datawords: CFA control+offset, then
			// RA and FP each as a control word, followed by an offset
			// when the control word is not 0; nothing may be left.
			if n < 2 {
				c.add("flex-words", Reject, i, j, pc, "flexible FDE FRE with %d data word (at least 2)", n)
				continue
			}
			left, k := n-2, 2
			for range 2 {
				if left >= 2 {
					ctl := f.UWord(k)
					left--
					k++
					if ctl != 0 {
						left--
						k++
					}
				}
			}
			if left != 0 {
				c.add("extra-words", Reject, i, j, pc, "flexible FDE FRE has %d data words the kernel does not read", left)
			}
			// sframe_init_cfa_rule_data: the CFA control word must name
			// a register (reg_p); otherwise the lookup fails (-EINVAL).
			if f.UWord(0)&1 == 0 {
				c.add("flex-cfa-reg", LookupFails, i, j, pc, "CFA control word %#x names no register", f.UWord(0))
			}
			continue
		}
		// __read_default_fre_datawords: the CFA offset, then the RA
		// offset when the header has no fixed one, then the FP offset
		// when the header has no fixed one; nothing may be left.
		want := 1
		if h.CFAFixedRA == sframe.CFAFixedRAInvalid {
			want++
		}
		if h.CFAFixedFP == sframe.CFAFixedFPInvalid {
			want++
		}
		if n > want {
			c.add("extra-words", Reject, i, j, pc, "default FDE FRE has %d data words, at most %d are read", n, want)
		}
	}
}

func inRanges(rs []Range, a uint64) bool {
	for _, r := range rs {
		if a >= r.Lo && a < r.Hi {
			return true
		}
	}
	return false
}
