package acceptance

import (
	"errors"
	"slices"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// kernel applies the rules of the Linux kernel's SFrame user unwinder
// (kernel/unwind/sframe.c) as its revisions after the v13 posting (January
// 2026) have them: linux-mm/linux-mm commits 5ce6138798d7, 07e15cb06bc9
// and 7edb32403917, the newest states of the series in that tree (each
// with flexible FDEs and CONFIG_SFRAME_VALIDATION). Where they differ the
// strictest is taken: every FRE's data words are checked (07e15cb reads
// only the looked-up FRE's, 5ce6138 every FRE it walks past), and a
// function at address 0 is refused (7edb324 allows one).
//
// Each rule is a Reject. A section that breaks one is either not
// registered at exec (sframe_add_section: sframe_read_header, and
// sframe_validate_section when validation is configured), or removed from
// the process at the first lookup that reads the broken part: sframe_find
// removes the section on every lookup error but -ENOENT, which means only
// "no function here" (no FDE at or below the PC, or the PC in a gap after
// the function found). v13 removed it on -EFAULT only.
//
// Some rules the kernel reads but applies only in the interrupted frame
// (kernel/unwind/user.c, unwind_user_next_common, as linux-mm/linux-mm
// 0d511c76135d has it): a CFA, RA or FP rule that names a register, since
// it reads registers from the task's saved user registers only; FP counts
// too, though the walk tracks it. Those are InnermostOnly limits
// (Result.Limits), not violations: a DRAP function's rbp, saved at rbp+0,
// is one, and a kernel booted with the unwinder stopped its walks there
// (scripts/kernel-acceptance.sh: leaf, d3, drapfn, then nothing).
//
// The section is registered once per executable program header, with that
// segment as its text range (elf_add_sframe in the series' binfmt_elf
// patch, as posted up to v13; the linux-mm trees hold no revision of that
// caller), and every FDE a lookup or the validation reads must lie inside
// that range. binfmt_elf registers the program's section and its
// interpreter's at exec; a shared library's is registered only through
// sframe_register() ("unwind: Add sframe_(un)register() system calls", v2,
// 2026-05-28), which the dynamic loader, or a library preloaded in its
// stead, calls with the section and each executable segment: the same
// sframe_add_section, so the same rules (Result.Registration says which
// way a file's section is registered). Either way sframe_add_section
// refuses a section that does not lie inside one mapping (its
// vma_lookup), checked here against the file's PT_LOAD segments.
func (c *checker) kernel(in Input) {
	h := &c.sec.Header
	c.res.Registration = RegisteredAtExec
	if in.Shared {
		c.res.Registration = RegisteredBySyscall
	}
	// sframe_add_section: [sframe_start, sframe_end) inside one VMA.
	if in.Loads != nil {
		lo, hi := in.Addr, in.Addr+uint64(len(in.Section))
		inside := false
		for _, l := range in.Loads {
			if lo >= l.Lo && hi <= l.Hi {
				inside = true
			}
		}
		if !inside {
			c.add("sframe-mapping", Reject, -1, -1, lo, "section [%#x,%#x) does not lie inside one PT_LOAD segment (one mapping): sframe_add_section refuses it", lo, hi)
		}
	}
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
	if len(h.AuxHdr) != 0 {
		c.add("aux-header", Reject, -1, -1, 0, "auxiliary header of %d bytes", len(h.AuxHdr))
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
	segs := sortedRanges(in.Exec)
	c.kernelSegments(segs)
	var prev uint64
	for i := range c.sec.FDEs {
		d := &c.sec.FDEs[i]
		c.kernelFDE(i, d, in.Exec != nil, segs)
		// sframe_validate_section: starts strictly increase (prev_ip
		// starts at 0, so a function at address 0 fails too).
		if d.Start <= prev {
			c.add("fde-order", Reject, i, -1, d.Start, "function start %#x is not above the previous one (%#x)", d.Start, prev)
		}
		prev = d.Start
		c.kernelFREs(i, d)
		if in.CallEnds != nil {
			c.kernelCallEnd(i, d, in.CallEnds)
		}
	}
}

// kernelCallEnd finds where the kernel looks up the return address of a
// call that is function i's last instruction. unwind_user_next_common
// looks a caller's return address up as it is, not minus one (as DWARF
// unwinders do), so it lands past the function: in the next function,
// whose rule there is used for the caller's frame, or in padding, where
// sframe_find fails with -ENOENT and the walk falls back to the frame
// pointer. Seen on a booted kernel: glibc's exit ends with its call of
// __run_exit_handlers, and the chain ended at exit's end.
func (c *checker) kernelCallEnd(i int, d *sframe.FDE, callEnds func(lo, hi, from uint64) bool) {
	end := d.Start + uint64(d.Size)
	if d.Size == 0 || end < d.Start || d.PCType != sframe.PCInc || len(d.FREs) == 0 {
		return // no PC, past the address space ("text" says more), or no rows
	}
	at := d.FREAt(end - 1)
	if at < 0 || !callEnds(d.Start, end, d.Start+uint64(d.FREs[at].Start)) {
		return // "first-fre", or no call at the end
	}
	// The kernel's __find_fde and __find_fre, as Table.Lookup does them:
	// starts strictly increase in any section it takes ("fde-order").
	next, err := c.sec.Lookup(end)
	switch {
	case errors.Is(err, sframe.ErrNoFDE):
		c.limitKind(CallerLookup, "return-at-end", i, at, end,
			"the call that ends the function returns to %#x, which no function covers: the kernel looks the return address up as it is and unwinds the caller by the frame pointer", end)
	case err != nil:
		c.limitKind(CallerLookup, "return-at-end", i, at, end,
			"the call that ends the function returns to %#x, where another function has no row: the kernel looks the return address up as it is and does not unwind the caller with this function's rule", end)
	case !sameRule(c.sec.Interpret(d, &d.FREs[at]), next):
		c.limitKind(CallerLookup, "return-at-end", i, at, end,
			"the call that ends the function returns to %#x, in function %#x: the kernel looks the return address up as it is and unwinds the caller with that function's rule, not this one's (a wrong caller)", end, next.FuncStart)
	}
}

// sameRule says whether two rules recover the caller's CFA, return
// address and frame pointer the same way.
func sameRule(a, b sframe.Rule) bool {
	return a.CFA == b.CFA && a.RA == b.RA && a.FP == b.FP && a.MangledRA == b.MangledRA &&
		a.RAUndefined == b.RAUndefined && a.Signal == b.Signal
}

// kernelFDE applies __read_fde's checks and __find_fre's need for a row at
// every PC of the function.
func (c *checker) kernelFDE(i int, d *sframe.FDE, haveSegs bool, segs []Range) {
	end := d.Start + uint64(d.Size)
	// __read_fde: the function lies in the text range it is registered
	// for (start at or above text_start, end at or below text_end).
	if haveSegs {
		if s := segmentOf(segs, d.Start); s < 0 {
			c.add("text", Reject, i, -1, d.Start, "function start %#x is outside the executable segments", d.Start)
		} else if end > segs[s].Hi || end < d.Start {
			c.add("text-end", Reject, i, -1, d.Start, "function [%#x,%#x) runs past the end %#x of its executable segment", d.Start, end, segs[s].Hi)
		}
	}
	// __read_fde: a PCMASK FDE needs a repeat size (whether or not it
	// has FREs), and no more FREs than the function has bytes.
	if d.PCType == sframe.PCMask && d.RepSize == 0 {
		c.add("pcmask-rep-size", Reject, i, -1, d.Start, "PCMASK FDE with repeat size 0")
	}
	if uint64(len(d.FREs)) > uint64(d.Size) {
		c.add("fres-num", Reject, i, -1, d.Start, "%d FREs for a function of %d bytes", len(d.FREs), d.Size)
	}
	// __find_fre: a lookup at a PC before the first FRE (or in a function
	// without FREs) fails with -EINVAL, which removes the section.
	if d.Size == 0 {
		return // no PC is ever looked up in it
	}
	switch {
	case len(d.FREs) == 0 && d.Signal:
		c.add("no-fre", Reject, i, -1, d.Start, "signal FDE without FREs: a lookup in [%#x,%#x) fails (FRE-less signal FDEs are read only by the signal-frame RFC)", d.Start, end)
	case len(d.FREs) == 0:
		c.add("no-fre", Reject, i, -1, d.Start, "FDE without FREs: a lookup in [%#x,%#x) fails", d.Start, end)
	case d.FREs[0].Start > 0 && !(d.PCType == sframe.PCMask && d.RepSize == 0):
		c.add("first-fre", Reject, i, 0, d.Start, "the first FRE starts at +%#x: a lookup at %#x (or below the first FRE in any repeat block) fails", d.FREs[0].Start, d.Start)
	}
}

// kernelSegments applies the text range check to the registration of each
// executable segment as a whole: with CONFIG_SFRAME_VALIDATION every
// registration reads every FDE, and without it a PC at the start of a
// segment finds the last function below it, of another segment.
func (c *checker) kernelSegments(segs []Range) {
	if len(segs) < 2 {
		return
	}
	first := -1 // segment of the first function inside a segment
	for i := range c.sec.FDEs {
		s := segmentOf(segs, c.sec.FDEs[i].Start)
		if s < 0 {
			continue // "text"
		}
		if first < 0 {
			first = s
		} else if s != first {
			d := &c.sec.FDEs[i]
			c.add("exec-segments", Reject, i, -1, d.Start,
				"function %#x lies in executable segment [%#x,%#x), earlier ones in [%#x,%#x): the section is registered for each segment and validating one reads the functions of the others",
				d.Start, segs[s].Lo, segs[s].Hi, segs[first].Lo, segs[first].Hi)
			break
		}
	}
	for _, sg := range segs {
		// __find_fde: the last function starting at or below sg.Lo.
		found := -1
		for i := range c.sec.FDEs {
			if c.sec.FDEs[i].Start <= sg.Lo {
				found = i
			}
		}
		if found < 0 {
			continue
		}
		d := &c.sec.FDEs[found]
		if d.Start == sg.Lo || segmentOf(segs, d.Start) < 0 {
			continue // covered from its start, or reported as "text"
		}
		c.add("segment-start", Reject, found, -1, sg.Lo,
			"a lookup at %#x, the start of executable segment [%#x,%#x), finds function %#x of another segment and fails",
			sg.Lo, sg.Lo, sg.Hi, d.Start)
	}
}

func (c *checker) kernelFREs(i int, d *sframe.FDE) {
	h := &c.sec.Header
	for j := range d.FREs {
		f := &d.FREs[j]
		pc := d.Start + uint64(f.Start)
		// __read_fre: an FRE starts inside the function (PCINC) or the
		// repeat block (PCMASK; a zero repeat size is reported above).
		switch {
		case d.PCType == sframe.PCInc && f.Start >= d.Size:
			c.add("fre-start", Reject, i, j, pc, "FRE start +%#x is not below the function size %#x", f.Start, d.Size)
		case d.PCType == sframe.PCMask && d.RepSize != 0 && f.Start >= uint32(d.RepSize):
			c.add("fre-start", Reject, i, j, pc, "FRE start +%#x is not below the repeat size %#x", f.Start, d.RepSize)
		}
		// __find_fre / sframe_validate_section: FRE starts strictly
		// increase.
		if j > 0 && f.Start <= d.FREs[j-1].Start {
			c.add("fre-order", Reject, i, j, pc, "FRE start +%#x is not above the previous FRE's +%#x", f.Start, d.FREs[j-1].Start)
		}
		n := int(f.NumWords)
		if n == 0 {
			continue // outermost frame: accepted (__read_fre)
		}
		if d.Flex {
			c.kernelFlex(i, j, pc, f)
			continue
		}
		// __read_default_fre_datawords: the CFA offset, then the RA
		// offset when the header has no fixed one, then the FP offset
		// when the header has no fixed one; nothing may be left.
		want := 1
		if h.CFAFixedRA == 0 {
			want++
		}
		if h.CFAFixedFP == 0 {
			want++
		}
		if n > want {
			c.add("extra-words", Reject, i, j, pc, "default FDE FRE has %d data words, at most %d are read", n, want)
		}
	}
}

// Flexible FDE control words (kernel/unwind/sframe.h): bit 0 reg_p, bit 1
// deref_p, bit 2 reserved, the register number in the 5 bits above.
const (
	ctlRegP     = 1 << 0
	ctlReserved = 1 << 2
	ctlRegMax   = 31
)

// kernelFlex applies __read_flex_fde_fre_datawords and the rule decoding
// of __find_fre (sframe_init_cfa_rule_data, sframe_init_rule_data) to a
// flexible FDE's FRE.
func (c *checker) kernelFlex(i, j int, pc uint64, f *sframe.FRE) {
	n := int(f.NumWords)
	// CFA control+offset, then RA and FP each as a control word followed
	// by an offset when the control word is not 0 (0 is padding); each is
	// read only while two words are left; nothing may be left.
	if n < 2 {
		c.add("flex-words", Reject, i, j, pc, "flexible FDE FRE with %d data word (at least 2)", n)
		return
	}
	ctls := []struct {
		what string
		k    int
	}{{"CFA", 0}}
	left, k := n-2, 2
	for _, what := range []string{"RA", "FP"} {
		if left < 2 {
			break
		}
		ctl := uword(f, k)
		left--
		if ctl != 0 {
			ctls = append(ctls, struct {
				what string
				k    int
			}{what, k})
			left--
			k++
		}
		k++
	}
	if left != 0 {
		c.add("extra-words", Reject, i, j, pc, "flexible FDE FRE has %d data words the kernel does not read", left)
	}
	for _, cw := range ctls {
		ctl := uword(f, cw.k)
		if ctl&ctlReserved != 0 {
			c.add("flex-reserved", Reject, i, j, pc, "%s control word %#x has the reserved bit set", cw.what, ctl)
		}
		if cw.what == "CFA" && ctl&ctlRegP == 0 {
			c.add("flex-cfa-reg", Reject, i, j, pc, "CFA control word %#x names no register", ctl)
		}
		// unwind_user_next_common: a rule naming a register is applied
		// only in the interrupted frame; the CFA's SP and FP are the
		// walk's own (UNWIND_USER_CFA_RULE_SP/FP_OFFSET).
		if ctl&ctlRegP != 0 && ctl&ctlReserved == 0 {
			reg := (ctl >> 3) & ctlRegMax
			if a := arch.ForSFrameABI(c.sec.Header.ABI); cw.what != "CFA" || (reg != a.SP() && reg != a.FP()) {
				c.limit("innermost-register", i, j, pc, "%s rule names register %d, which the kernel reads only in the interrupted frame: a walk reaching %#x as a caller stops here", cw.what, reg, pc)
			}
		}
		// The register number is read as 5 bits: a larger one names
		// another register (a wrong answer, not a refusal).
		if ctl&ctlRegP != 0 && ctl>>3 > ctlRegMax {
			c.add("flex-regnum", LookupFails, i, j, pc, "%s control word names register %d, which the kernel reads as %d", cw.what, ctl>>3, (ctl>>3)&ctlRegMax)
		}
	}
}

// sortedRanges returns rs ordered by start.
func sortedRanges(rs []Range) []Range {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b Range) int {
		switch {
		case a.Lo < b.Lo:
			return -1
		case a.Lo > b.Lo:
			return 1
		}
		return 0
	})
	return out
}

// segmentOf returns the index of the range of rs holding a, or -1.
func segmentOf(rs []Range, a uint64) int {
	for i, r := range rs {
		if a >= r.Lo && a < r.Hi {
			return i
		}
	}
	return -1
}

// uword returns data word k of f as the unsigned value of f's word size,
// as the kernel reads a flexible FDE's control words.
func uword(f *sframe.FRE, k int) uint32 {
	w := uint32(f.Words[k])
	if f.WordSize < 4 {
		w &= 1<<(8*f.WordSize) - 1
	}
	return w
}
