package sframe

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Dump writes the section in the text layout of GNU objdump --sframe,
// starting at the "  Header :" line (objdump's "Contents of the SFrame
// section NAME:" line is the caller's).
func (s *Section) Dump(w io.Writer) error {
	// Written as it goes: a section with millions of functions is not
	// built as one string first.
	b := bufio.NewWriterSize(w, 64<<10)
	h := &s.Header
	b.WriteString("  Header :\n\n")
	fmt.Fprintf(b, "    Version: SFRAME_VERSION_%d\n", h.Version)
	var names []string
	if h.Flags&FlagFDESorted != 0 {
		names = append(names, "SFRAME_F_FDE_SORTED")
	}
	if h.Flags&FlagFramePointer != 0 {
		names = append(names, "SFRAME_F_FRAME_POINTER")
	}
	if h.Flags&FlagFDEFuncStartPCRel != 0 {
		names = append(names, "SFRAME_F_FDE_FUNC_START_PCREL")
	}
	if len(names) == 0 {
		names = append(names, "NONE")
	}
	fmt.Fprintf(b, "    Flags: %s\n", strings.Join(names, ",\n           "))
	if h.CFAFixedFP != CFAFixedFPInvalid {
		fmt.Fprintf(b, "    CFA fixed FP offset: %d\n", h.CFAFixedFP)
	}
	if h.CFAFixedRA != CFAFixedRAInvalid {
		fmt.Fprintf(b, "    CFA fixed RA offset: %d\n", h.CFAFixedRA)
	}
	fmt.Fprintf(b, "    Num FDEs: %d\n", h.NumFDEs)
	fmt.Fprintf(b, "    Num FREs: %d\n", h.NumFREs)
	b.WriteString("\n  Function Index :\n")
	for i := range s.FDEs {
		d := &s.FDEs[i]
		fmt.Fprintf(b, "\n    func idx [%d]: pc = %#x, size = %d bytes", i, d.Start, d.Size)
		if isAArch64(h.ABI) && d.PauthKeyB {
			b.WriteString(", pauth = B key")
		}
		attr := ""
		if d.Signal {
			attr += "S"
		}
		if d.FDEType == FDETypeFlex {
			attr += "F"
		}
		if attr != "" {
			fmt.Fprintf(b, ", attr = %q", attr)
		}
		marker := "   "
		if d.PCType == PCMask {
			marker = "[m]"
		}
		fmt.Fprintf(b, "\n    %-7s%-8s %-10s%-10s%-13s", "STARTPC", marker, "CFA", "FP", "RA")
		for j := range d.FREs {
			f := &d.FREs[j]
			pc := uint64(f.StartOff)
			if d.PCType != PCMask {
				pc += d.Start
			}
			fmt.Fprintf(b, "\n    %016x", pc)
			r := s.Interpret(d, f)
			if r.RAUndefined {
				b.WriteString("  RA undefined")
				continue
			}
			fmt.Fprintf(b, "  %-10s", s.locString(r.CFA))
			fmt.Fprintf(b, "%-10s", s.locString(r.FP))
			ra := s.locString(r.RA)
			if r.MangledRA {
				ra += "[s]"
			} else {
				ra += "   "
			}
			fmt.Fprintf(b, "%-13s", ra)
		}
		b.WriteString("\n")
	}
	return b.Flush()
}

func (s *Section) regName(r uint32) string {
	switch r {
	case SPReg(s.Header.ABI):
		return "sp"
	case FPReg(s.Header.ABI):
		return "fp"
	}
	return fmt.Sprintf("r%d", r)
}

// locString renders a rule the way objdump does. The CFA-relative value
// form (flex reg_p=0, deref_p=0), which GNU as does not emit, is rendered
// "=c±N".
func (s *Section) locString(l Loc) string {
	switch l.Kind {
	case LocUnsaved:
		return "u"
	case LocFixed:
		return "f"
	case LocDefault:
		return "U"
	case LocCFA:
		return fmt.Sprintf("c%+d", l.Offset)
	case LocCFAValue:
		return fmt.Sprintf("=c%+d", l.Offset)
	case LocReg:
		return fmt.Sprintf("%s%+d", s.regName(l.Reg), l.Offset)
	case LocRegDeref:
		return fmt.Sprintf("(%s%+d)", s.regName(l.Reg), l.Offset)
	}
	return "?"
}

// JSON layout written by DumpJSON (field names are stable):
//
//	{"version": 3, "flags": 5, "flag_names": ["SFRAME_F_FDE_SORTED", ...],
//	 "abi": 3, "abi_name": "SFRAME_ABI_AMD64_ENDIAN_LITTLE",
//	 "cfa_fixed_fp_offset": 0, "cfa_fixed_ra_offset": -8,
//	 "auxhdr_len": 0, "num_fdes": N, "num_fres": N, "fre_len": N,
//	 "fdeoff": N, "freoff": N,
//	 "functions": [{"start": 4096, "size": 16, "pc_type": "inc"|"mask",
//	   "rep_size": 0, "fre_type": 0, "fde_type": "default"|"flex",
//	   "signal": false, "pauth_key_b": false,
//	   "fres": [{"start": 4096, "start_offset": 0, "base_reg": "sp"|"fp",
//	     "words": [8], "word_size": 1, "mangled_ra": false,
//	     "cfa": "sp+8", "fp": "u", "ra": "f", "ra_undefined": false}]}]}
//
// "start" of an FRE is the address for inc FDEs and the mask value for
// mask FDEs; "cfa"/"fp"/"ra" use the text dump's notation.
type jsonSection struct {
	Version    uint8      `json:"version"`
	Flags      uint8      `json:"flags"`
	FlagNames  []string   `json:"flag_names"`
	ABI        uint8      `json:"abi"`
	ABIName    string     `json:"abi_name"`
	CFAFixedFP int8       `json:"cfa_fixed_fp_offset"`
	CFAFixedRA int8       `json:"cfa_fixed_ra_offset"`
	AuxHdrLen  uint8      `json:"auxhdr_len"`
	NumFDEs    uint32     `json:"num_fdes"`
	NumFREs    uint32     `json:"num_fres"`
	FRELen     uint32     `json:"fre_len"`
	FDEOff     uint32     `json:"fdeoff"`
	FREOff     uint32     `json:"freoff"`
	Functions  []jsonFunc `json:"functions"`
}

type jsonFunc struct {
	Start     uint64    `json:"start"`
	Size      uint32    `json:"size"`
	PCType    string    `json:"pc_type"`
	RepSize   uint8     `json:"rep_size"`
	FREType   uint8     `json:"fre_type"`
	FDEType   string    `json:"fde_type"`
	Signal    bool      `json:"signal"`
	PauthKeyB bool      `json:"pauth_key_b"`
	FREs      []jsonFRE `json:"fres"`
}

type jsonFRE struct {
	Start       uint64  `json:"start"`
	StartOffset uint32  `json:"start_offset"`
	BaseReg     string  `json:"base_reg"`
	Words       []int32 `json:"words"`
	WordSize    uint8   `json:"word_size"`
	MangledRA   bool    `json:"mangled_ra"`
	CFA         string  `json:"cfa,omitempty"`
	FP          string  `json:"fp,omitempty"`
	RA          string  `json:"ra,omitempty"`
	RAUndefined bool    `json:"ra_undefined"`
}

// DumpJSON writes the section as indented JSON (layout documented above).
func (s *Section) DumpJSON(w io.Writer) error {
	h := &s.Header
	js := jsonSection{
		Version: h.Version, Flags: h.Flags, ABI: h.ABI, ABIName: ABIName(h.ABI),
		CFAFixedFP: h.CFAFixedFP, CFAFixedRA: h.CFAFixedRA, AuxHdrLen: h.AuxHdrLen,
		NumFDEs: h.NumFDEs, NumFREs: h.NumFREs, FRELen: h.FRELen, FDEOff: h.FDEOff, FREOff: h.FREOff,
		FlagNames: []string{}, Functions: []jsonFunc{},
	}
	for _, fl := range []struct {
		bit  uint8
		name string
	}{{FlagFDESorted, "SFRAME_F_FDE_SORTED"}, {FlagFramePointer, "SFRAME_F_FRAME_POINTER"}, {FlagFDEFuncStartPCRel, "SFRAME_F_FDE_FUNC_START_PCREL"}} {
		if h.Flags&fl.bit != 0 {
			js.FlagNames = append(js.FlagNames, fl.name)
		}
	}
	for i := range s.FDEs {
		d := &s.FDEs[i]
		jf := jsonFunc{Start: d.Start, Size: d.Size, PCType: "inc", RepSize: d.RepSize, FREType: d.FREType,
			FDEType: "default", Signal: d.Signal, PauthKeyB: d.PauthKeyB, FREs: []jsonFRE{}}
		if d.PCType == PCMask {
			jf.PCType = "mask"
		}
		if d.FDEType == FDETypeFlex {
			jf.FDEType = "flex"
		}
		for j := range d.FREs {
			f := &d.FREs[j]
			start := uint64(f.StartOff)
			if d.PCType != PCMask {
				start += d.Start
			}
			jr := jsonFRE{Start: start, StartOffset: f.StartOff, BaseReg: "sp", Words: append([]int32{}, f.Words[:f.NumWords]...),
				WordSize: f.WordSize, MangledRA: f.MangledRA}
			if f.BaseReg == BaseRegFP {
				jr.BaseReg = "fp"
			}
			r := s.Interpret(d, f)
			jr.RAUndefined = r.RAUndefined
			if !r.RAUndefined {
				jr.CFA, jr.FP, jr.RA = s.locString(r.CFA), s.locString(r.FP), s.locString(r.RA)
			}
			jf.FREs = append(jf.FREs, jr)
		}
		js.Functions = append(js.Functions, jf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(js)
}
