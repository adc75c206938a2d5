package sframe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"
)

// Dump writes the section in the text layout of GNU objdump --sframe,
// starting at the "  Header :" line (objdump's "Contents of the SFrame
// section NAME:" line is the caller's), one function at a time. It stops
// at the first malformed function with its error, after writing the
// functions before it: Check first to write nothing for such a section.
func (t *Table) Dump(w io.Writer) error { return dumpText(w, t) }

// Column headers of a function's rows, for PCInc and PCMask functions.
var (
	rowsHeaderInc  = fmt.Sprintf("\n    %-7s%-8s %-10s%-10s%-13s", "STARTPC", "   ", "CFA", "FP", "RA")
	rowsHeaderMask = fmt.Sprintf("\n    %-7s%-8s %-10s%-10s%-13s", "STARTPC", "[m]", "CFA", "FP", "RA")
)

// flagNames returns the specification's names of the header flags set,
// in bit order (an empty list, not nil, when none is).
func flagNames(flags uint8) []string {
	names := []string{}
	for _, fl := range []struct {
		bit  uint8
		name string
	}{{FlagFDESorted, "SFRAME_F_FDE_SORTED"}, {FlagFramePointer, "SFRAME_F_FRAME_POINTER"}, {FlagFDEFuncStartPCRel, "SFRAME_F_FDE_FUNC_START_PCREL"}} {
		if flags&fl.bit != 0 {
			names = append(names, fl.name)
		}
	}
	return names
}

func dumpText(w io.Writer, t *Table) error {
	// Written as it goes, each line built in one reused buffer: a
	// section with millions of functions is not built as one string
	// first, and a row costs no allocation.
	b := bufio.NewWriterSize(w, 64<<10)
	h := &t.Header
	b.WriteString("  Header :\n\n")
	fmt.Fprintf(b, "    Version: SFRAME_VERSION_%d\n", h.Version)
	names := flagNames(h.Flags)
	if len(names) == 0 {
		names = append(names, "NONE")
	}
	fmt.Fprintf(b, "    Flags: %s\n", strings.Join(names, ",\n           "))
	if h.CFAFixedFP != cfaFixedFPInvalid {
		fmt.Fprintf(b, "    CFA fixed FP offset: %d\n", h.CFAFixedFP)
	}
	if h.CFAFixedRA != cfaFixedRAInvalid {
		fmt.Fprintf(b, "    CFA fixed RA offset: %d\n", h.CFAFixedRA)
	}
	fmt.Fprintf(b, "    Num FDEs: %d\n", h.NumFDEs)
	fmt.Fprintf(b, "    Num FREs: %d\n", h.NumFREs)
	b.WriteString("\n  Function Index :\n")
	var d FDE
	var line []byte
	for i := 0; i < t.n; i++ {
		if err := t.FDE(i, &d); err != nil {
			b.Flush()
			return err
		}
		line = append(line[:0], "\n    func idx ["...)
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, "]: pc = 0x"...)
		line = strconv.AppendUint(line, d.Start, 16)
		line = append(line, ", size = "...)
		line = strconv.AppendUint(line, uint64(d.Size), 10)
		line = append(line, " bytes"...)
		if h.ABI.arch().PointerAuth() && d.PauthKeyB {
			line = append(line, ", pauth = B key"...)
		}
		if d.Signal || d.Flex {
			line = append(line, `, attr = "`...)
			if d.Signal {
				line = append(line, 'S')
			}
			if d.Flex {
				line = append(line, 'F')
			}
			line = append(line, '"')
		}
		if d.PCType == PCMask {
			line = append(line, rowsHeaderMask...)
		} else {
			line = append(line, rowsHeaderInc...)
		}
		b.Write(line)
		for j := range d.FREs {
			f := &d.FREs[j]
			pc := uint64(f.Start)
			if d.PCType != PCMask {
				pc += d.Start
			}
			line = append(line[:0], "\n    "...)
			line = appendHex16(line, pc)
			r := interpret(h, &d, f)
			if r.RAUndefined {
				line = append(line, "  RA undefined"...)
				b.Write(line)
				continue
			}
			line = append(line, "  "...)
			col := len(line)
			line = appendLoc(line, h.ABI, r.CFA)
			line = pad(line, col+10)
			col = len(line)
			line = appendLoc(line, h.ABI, r.FP)
			line = pad(line, col+10)
			col = len(line)
			line = appendLoc(line, h.ABI, r.RA)
			if r.MangledRA {
				line = append(line, "[s]"...)
			} else {
				line = append(line, "   "...)
			}
			line = pad(line, col+13)
			b.Write(line)
		}
		b.WriteString("\n")
	}
	return b.Flush()
}

// appendHex16 appends v as 16 lower-case hex digits (%016x).
func appendHex16(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for k := 60; k >= 0; k -= 4 {
		b = append(b, digits[(v>>uint(k))&0xf])
	}
	return b
}

// pad appends spaces up to length n (%-Ns of what follows col).
func pad(b []byte, n int) []byte {
	for len(b) < n {
		b = append(b, ' ')
	}
	return b
}

// appendReg appends register r's name, "sp" or "fp" for the ABI's stack
// and frame pointer, or "r" and its DWARF number (every register when abi
// is 0, no ABI).
func appendReg(b []byte, abi ABI, r uint32) []byte {
	switch a := abi.arch(); {
	case abi == 0:
	case r == a.SP():
		return append(b, "sp"...)
	case r == a.FP():
		return append(b, "fp"...)
	}
	return strconv.AppendUint(append(b, 'r'), uint64(r), 10)
}

// appendSigned appends v with its sign (%+d).
func appendSigned(b []byte, v int32) []byte {
	if v >= 0 {
		b = append(b, '+')
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// appendLoc renders a rule the way objdump does. The CFA-relative value
// form (flex reg_p=0, deref_p=0), which GNU as does not emit, is rendered
// "=c±N".
func appendLoc(b []byte, abi ABI, l Loc) []byte {
	switch l.Kind {
	case LocUnsaved:
		return append(b, 'u')
	case LocFixed:
		return append(b, 'f')
	case LocDefault:
		return append(b, 'U')
	case LocCFA:
		return appendSigned(append(b, 'c'), l.Offset)
	case LocCFAValue:
		return appendSigned(append(b, "=c"...), l.Offset)
	case LocReg:
		return appendSigned(appendReg(b, abi, l.Reg), l.Offset)
	case LocRegDeref:
		b = appendSigned(appendReg(append(b, '('), abi, l.Reg), l.Offset)
		return append(b, ')')
	}
	return append(b, '?')
}

func locString(abi ABI, l Loc) string { return string(appendLoc(nil, abi, l)) }

// jsonSection is the JSON layout DumpJSON writes (see there).
type jsonSection struct {
	Version    uint8      `json:"version"`
	Flags      uint8      `json:"flags"`
	FlagNames  []string   `json:"flag_names"`
	ABI        ABI        `json:"abi"`
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

// DumpJSON writes the section as indented JSON, one function at a time;
// malformed bytes stop it as they stop Dump. The layout (field names are
// stable):
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
// mask FDEs; "cfa", "fp" and "ra" use Dump's notation.
func (t *Table) DumpJSON(w io.Writer) error { return dumpJSON(w, t) }

// dumpJSON writes what encoding/json's Encoder (indented by two spaces)
// writes for a jsonSection, but one function at a time: the header with
// an empty function list, opened up, then each function indented to its
// place in the list.
func dumpJSON(w io.Writer, t *Table) error {
	h := &t.Header
	js := jsonSection{
		Version: h.Version, Flags: h.Flags, ABI: h.ABI, ABIName: h.ABI.String(),
		CFAFixedFP: h.CFAFixedFP, CFAFixedRA: h.CFAFixedRA, AuxHdrLen: uint8(len(h.AuxHdr)),
		NumFDEs: h.NumFDEs, NumFREs: h.NumFREs, FRELen: h.FRELen, FDEOff: h.FDEOff, FREOff: h.FREOff,
		FlagNames: flagNames(h.Flags), Functions: []jsonFunc{},
	}
	head, err := json.MarshalIndent(js, "", "  ")
	if err != nil {
		return err
	}
	b := bufio.NewWriterSize(w, 64<<10)
	if t.n == 0 {
		b.Write(head)
		b.WriteString("\n")
		return b.Flush()
	}
	const empty = "[]\n}"
	if !bytes.HasSuffix(head, []byte(empty)) {
		return fmt.Errorf("unexpected JSON header layout")
	}
	b.Write(head[:len(head)-len(empty)])
	b.WriteString("[\n")
	var d FDE
	var jf jsonFunc
	for i := 0; i < t.n; i++ {
		if err := t.FDE(i, &d); err != nil {
			b.Flush()
			return err
		}
		jf.fill(h, &d)
		item, err := json.MarshalIndent(&jf, "    ", "  ")
		if err != nil {
			return err
		}
		b.WriteString("    ")
		b.Write(item)
		if i+1 < t.n {
			b.WriteString(",\n")
		}
	}
	b.WriteString("\n  ]\n}\n")
	return b.Flush()
}

// fill sets jf to function d of a section with header h, reusing jf's
// FRE slice; the FREs' data words alias d's.
func (jf *jsonFunc) fill(h *Header, d *FDE) {
	*jf = jsonFunc{Start: d.Start, Size: d.Size, PCType: "inc", RepSize: d.RepSize, FREType: uint8(bits.TrailingZeros8(d.AddrSize)),
		FDEType: "default", Signal: d.Signal, PauthKeyB: d.PauthKeyB, FREs: jf.FREs[:0]}
	if d.PCType == PCMask {
		jf.PCType = "mask"
	}
	if d.Flex {
		jf.FDEType = "flex"
	}
	for j := range d.FREs {
		f := &d.FREs[j]
		start := uint64(f.Start)
		if d.PCType != PCMask {
			start += d.Start
		}
		jr := jsonFRE{Start: start, StartOffset: f.Start, BaseReg: "sp", Words: f.Words[:f.NumWords],
			WordSize: f.WordSize, MangledRA: f.MangledRA}
		if f.BaseReg == baseRegFP {
			jr.BaseReg = "fp"
		}
		r := interpret(h, d, f)
		jr.RAUndefined = r.RAUndefined
		if !r.RAUndefined {
			jr.CFA, jr.FP, jr.RA = locString(h.ABI, r.CFA), locString(h.ABI, r.FP), locString(h.ABI, r.RA)
		}
		jf.FREs = append(jf.FREs, jr)
	}
	if jf.FREs == nil {
		jf.FREs = []jsonFRE{}
	}
}
