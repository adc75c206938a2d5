package acceptance

import "github.com/cfi2sframe/cfi2sframe/sframe"

// glibc applies the rules of glibc 2.42–2.44's SFrame backtrace()
// (configured with --enable-sframe): __sframe_decode and __sframe_find_fre
// in sysdeps/generic/sframe-read.c, __stacktrace_sframe in
// sysdeps/generic/sframe.c. __stacktrace_sframe returns 0 (and backtrace()
// falls back to libgcc's DWARF unwinder) as soon as one frame cannot be
// read, so a LookupFails here discards the whole SFrame trace of any
// backtrace that reaches that PC.
func (c *checker) glibc() {
	h := &c.sec.Header
	// sframe_header_sanity_check_p: version 2, known V2 flags only (the
	// 2.42 release knew SORTED and FRAME_POINTER; FUNC_START_PCREL was
	// added with sframe_decoder_get_secrel_func_start_addr), FDE index
	// before the FRE area.
	if h.Version != sframe.Version2 {
		c.add("version", Reject, -1, -1, 0, "version %d (glibc reads version 2 only)", h.Version)
		return
	}
	const known = sframe.FlagFDESorted | sframe.FlagFramePointer | sframe.FlagFDEFuncStartPCRel
	if h.Flags&^known != 0 {
		c.add("flags", Reject, -1, -1, 0, "unknown flags %#x", h.Flags&^known)
	}
	if h.FDEOff > h.FREOff {
		c.add("offsets", Reject, -1, -1, 0, "FDE offset %d is past the FRE offset %d", h.FDEOff, h.FREOff)
	}
	// sframe_get_funcdesc_with_addr_internal: no binary search (hence no
	// lookup at all) without SFRAME_F_FDE_SORTED.
	if h.Flags&sframe.FlagFDESorted == 0 {
		c.add("sorted", Reject, -1, -1, 0, "SFRAME_F_FDE_SORTED not set: every lookup fails")
	}
	c.common()
	c.sortedStarts(false, "fde-order", Reject)
	for i := range c.sec.FDEs {
		d := &c.sec.FDEs[i]
		for j := range d.FREs {
			f := &d.FREs[j]
			pc := d.Start + uint64(f.Start)
			switch {
			case f.NumWords == 0:
				// __sframe_fre_get_cfa_offset: no CFA offset. This is
				// the RA-undefined (outermost frame) marker; glibc
				// stops cleanly at the outermost frame only when it
				// has no FRE at all (fp is 0 there).
				c.add("no-data-words", LookupFails, i, j, pc, "FRE without data words (RA undefined): glibc discards the whole trace")
			case h.CFAFixedRA == 0 && f.NumWords < 2:
				// __sframe_fre_get_ra_offset: with no fixed RA offset
				// (AArch64) the RA offset must be in the FRE; a frame
				// whose RA is still in its register has none.
				c.add("no-ra-word", LookupFails, i, j, pc, "FRE without an RA offset (RA in its register): glibc cannot unwind this frame")
			}
		}
	}
}

// libsframe applies GNU libsframe 2.47.50's rules (libsframe/sframe.c):
// sframe_decode (sframe_header_sanity_check_p, the FDE and FRE checks of
// the decoder) and sframe_find_fre.
func (c *checker) libsframe() {
	h := &c.sec.Header
	// sframe_decode: versions 2 and 3 (V1 is refused: "Buffer does not
	// contain SFrame data").
	if h.Version != sframe.Version2 && h.Version != sframe.Version3 {
		c.add("version", Reject, -1, -1, 0, "version %d (libsframe 2.47 decodes versions 2 and 3)", h.Version)
		return
	}
	c.common()
	c.sortedStarts(false, "fde-order", LookupFails)
	// sframe_decoder_get_secrel_func_start_addr adds the offset of the
	// FDE's start field whether or not SFRAME_F_FDE_FUNC_START_PCREL is
	// set, so a V2 section without the flag is looked up at the wrong
	// addresses (GNU ld 2.44's own V2 output included).
	if h.Version == sframe.Version2 && h.Flags&sframe.FlagFDEFuncStartPCRel == 0 {
		for i := range c.sec.FDEs {
			d := &c.sec.FDEs[i]
			if len(d.FREs) > 0 {
				c.add("v2-start-not-pcrel", LookupFails, i, -1, d.Start,
					"V2 without SFRAME_F_FDE_FUNC_START_PCREL: sframe_find_fre treats the start field as PC-relative anyway")
				break
			}
		}
	}
}

// libsframe244 applies GNU libsframe 2.44's rules: version 2 only, and no
// SFRAME_F_FDE_FUNC_START_PCREL (sframe_decode fails, reporting "Out of
// Memory"); sframe_find_fre misses PCs in PCMASK FDEs.
func (c *checker) libsframe244() {
	h := &c.sec.Header
	if h.Version != sframe.Version2 {
		c.add("version", Reject, -1, -1, 0, "version %d (libsframe 2.44 decodes version 2 only)", h.Version)
		return
	}
	if h.Flags&sframe.FlagFDEFuncStartPCRel != 0 {
		c.add("pcrel", Reject, -1, -1, 0, "SFRAME_F_FDE_FUNC_START_PCREL is unknown to libsframe 2.44")
		return
	}
	c.common()
	c.sortedStarts(false, "fde-order", LookupFails)
	for i := range c.sec.FDEs {
		d := &c.sec.FDEs[i]
		if d.PCType == sframe.PCMask && len(d.FREs) > 0 {
			c.add("pcmask-lookup", LookupFails, i, -1, d.Start, "PCMASK FDE: libsframe 2.44's sframe_find_fre misses its PCs")
		}
	}
}
