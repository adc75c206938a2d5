// Package sframe reads and writes the SFrame stack-trace format (.sframe
// sections, versions 1 to 3, both byte orders, ABIs AArch64 LE/BE, AMD64,
// s390x).
//
// Reading: Open(b, addr) checks a section's header and function index and
// returns a Table, which decodes the rest lazily, as libsframe does.
// OpenFile (a path) and OpenELF (a debug/elf *elf.File) find the SFrame
// data a loader reads in an ELF file (PT_GNU_SFRAME, else the .sframe
// section) and open it; see ExampleOpenELF. Table.Lookup takes a PC and
// returns the Rule there: the Row in effect (CFA, RA and FP as Loc
// values: register+offset, CFA slot, flex forms, fixed, unsaved, with the
// s390x CFA scaling and the V3 flexible-FDE control words applied) and
// its function's attributes, or an error (ErrNoFDE, ErrNoFRE, or an
// *Error naming the malformed bytes). LookupStep gives the common rows in
// the form a stack walker applies (StepRule), and says whether the row at
// a PC is one of them. Neither allocates unless the
// bytes are malformed. Package unwind walks stacks with Tables.
//
// The Table also reads the section function by function: FDE decodes one
// function descriptor and its rows (FREs) into a reused FDE, Interpret
// gives an FRE's Rule, Check decodes them all (what a full decode
// rejects, without keeping anything), Dump writes the text of GNU objdump
// --sframe from its "  Header :" line on and DumpJSON writes JSON.
//
// Writing: []Function with Rows, filled by a translator or from a decoded
// section (FDE and Interpret), and Encode(funcs, Options) writing V2 (with or
// without PCREL) or V3 with libsframe's layout choices (narrowest FRE type
// per function and data-word size per row, FRE data in the order of funcs,
// FDE index optionally sorted), so a GNU-produced section decodes and
// re-encodes byte for byte. An Encoder takes the functions one at a time,
// and forks of it (Fork) take parts of them on other goroutines.
//
// Errors in the section's bytes are *Error values with the section offset.
package sframe

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/cfi2sframe/cfi2sframe/arch"
)

// Format constants.
const (
	Magic = 0xdee2 // the header's first field, in the section's byte order

	Version1 = 1
	Version2 = 2
	Version3 = 3

	// Header flags.
	FlagFDESorted         = 0x1
	FlagFramePointer      = 0x2 // V1 and V2 only
	FlagFDEFuncStartPCRel = 0x4

	// HeaderSize is the size of the fixed header, before the auxiliary
	// header.
	HeaderSize = 28
)

// Internal sizes and bit fields of the format.
const (
	baseRegFP           = 0 // FRE.BaseReg
	baseRegSP           = 1
	fdeSizeV1           = 17
	fdeSizeV2           = 20
	fdeSizeV3           = 16
	fdeAttrSizeV3       = 5
	maxDataWords        = 15
	cfaFixedFPInvalid   = 0
	cfaFixedRAInvalid   = 0
	raOffsetInvalid     = 0 // s390x padding: FP saved without RA
	fdeTypeMaskV3       = 0x1f
	frePCTypeMaskBit    = 0x10
	fdeInfoPauthBit     = 0x20
	fdeInfoSignalBit    = 0x80
	freInfoMangledRABit = 0x80
	flexCtrlRegP        = 0x1
	flexCtrlDerefP      = 0x2
	flexCtrlRegShift    = 3
)

// ABI is an SFrame ABI/arch identifier, the header's abi_arch byte.
type ABI uint8

// ABI/arch identifiers.
const (
	ABIAArch64BE ABI = 1
	ABIAArch64LE ABI = 2
	ABIAMD64LE   ABI = 3
	ABIS390XBE   ABI = 4
)

// String returns the specification's name of the ABI
// ("SFRAME_ABI_AMD64_ENDIAN_LITTLE"), or the number of an unknown one.
func (a ABI) String() string {
	switch a {
	case ABIAArch64BE:
		return "SFRAME_ABI_AARCH64_ENDIAN_BIG"
	case ABIAArch64LE:
		return "SFRAME_ABI_AARCH64_ENDIAN_LITTLE"
	case ABIAMD64LE:
		return "SFRAME_ABI_AMD64_ENDIAN_LITTLE"
	case ABIS390XBE:
		return "SFRAME_ABI_S390X_ENDIAN_BIG"
	}
	return "ABI(" + strconv.Itoa(int(a)) + ")"
}

// arch returns the ABI's descriptor, which holds its facts (registers,
// the CFA offset encoding). The decoder refuses other ids; for one set by
// hand in Options or a Header it is AArch64's, whose registers SFrame's
// readers assume by default.
func (a ABI) arch() *arch.Arch {
	if d := arch.ForSFrameABI(a); d != nil {
		return d
	}
	return arch.ARM64
}

// PCType says how an FDE's FRE start offsets match a PC: as offsets from
// the function's start (PCInc), or from the start of the repeated block
// the PC is in (PCMask, PLT entries).
type PCType uint8

// FDE PC types.
const (
	PCInc  PCType = 0
	PCMask PCType = 1
)

// String returns the specification's name ("SFRAME_FDE_TYPE_PCINC", as V1
// and V2 call it; V3 keeps the values), or the number of an unknown one.
func (p PCType) String() string {
	switch p {
	case PCInc:
		return "SFRAME_FDE_TYPE_PCINC"
	case PCMask:
		return "SFRAME_FDE_TYPE_PCMASK"
	}
	return "PCType(" + strconv.Itoa(int(p)) + ")"
}

// fdeType is a V3 FDE's type: how its FREs' data words read.
type fdeType uint8

// V3 FDE types (earlier versions have only the default).
const (
	fdeTypeDefault fdeType = 0
	fdeTypeFlex    fdeType = 1
)

// freType is the width of an FDE's FRE start-address fields.
type freType uint8

// FRE types.
const (
	freAddr1 freType = 0
	freAddr2 freType = 1
	freAddr4 freType = 2
)

// addrSize is the size of the start-address field in bytes (of a known
// type).
func (t freType) addrSize() int { return 1 << t }

// Data-word size codes in the FRE info byte.
const (
	dataWord1 = 0
	dataWord2 = 1
	dataWord4 = 2
)

// fdeInfo is an FDE's function-info byte: its bit fields, each read in one
// place.
type fdeInfo uint8

func (i fdeInfo) freType() freType { return freType(i & 0xf) }
func (i fdeInfo) pcType() PCType   { return PCType(i >> 4 & 1) }
func (i fdeInfo) pauthKeyB() bool  { return i&fdeInfoPauthBit != 0 }
func (i fdeInfo) signal() bool     { return i&fdeInfoSignalBit != 0 } // V3

// fdeTypeV3 reads the FDE type from a V3 FDE's second info byte.
func fdeTypeV3(info2 uint8) fdeType { return fdeType(info2 & fdeTypeMaskV3) }

// freInfo is an FRE's info byte.
type freInfo uint8

func (i freInfo) baseReg() uint8      { return uint8(i & 1) }
func (i freInfo) numWords() int       { return int(i >> 1 & 0xf) }
func (i freInfo) wordSizeCode() uint8 { return uint8(i >> 5 & 3) }
func (i freInfo) mangledRA() bool     { return i&freInfoMangledRABit != 0 }

// wordBits is the number and size of the data words together: FREs with
// the same wordBits have the same size.
func (i freInfo) wordBits() int { return int(i & 0x7e) }

// dataSize is the size of the data words in bytes (for a valid size code).
func (i freInfo) dataSize() int { return i.numWords() << i.wordSizeCode() }

// badWordSize is not zero when the data-word size code is 3, which names
// no size: then bits 5 and 6 are both set, and bit 6 of i & i<<1 is. A walk
// over FREs ORs it up and tests once, without a branch per FRE.
func (i freInfo) badWordSize() freInfo { return i & (i << 1) & 0x40 }

// Error is a decoding error: what is wrong and at which byte offset of the
// section.
type Error struct {
	Off int64
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%s at offset %#x", e.Msg, e.Off) }

func errorf[T int | int64](off T, format string, args ...any) *Error {
	return &Error{Off: int64(off), Msg: fmt.Sprintf(format, args...)}
}

// Header is the SFrame header, every field preserved but the magic (Magic
// in the section's byte order) and the auxiliary header's length
// (len(AuxHdr)). CFAFixedFP and CFAFixedRA are 0 where the ABI fixes no
// offset and each row says where FP and RA are saved.
type Header struct {
	Version    uint8
	Flags      uint8
	ABI        ABI
	CFAFixedFP int8
	CFAFixedRA int8
	NumFDEs    uint32
	NumFREs    uint32
	FRELen     uint32
	FDEOff     uint32
	FREOff     uint32
	AuxHdr     []byte
}

// Size is the header size including the auxiliary header.
func (h *Header) Size() int { return HeaderSize + len(h.AuxHdr) }

// FDESize is the size of one entry of the function index in a section of
// the header's version (17 bytes in V1, 20 in V2, 16 in V3), or 0 for a
// version this package does not know.
func (h *Header) FDESize() int {
	switch h.Version {
	case Version1:
		return fdeSizeV1
	case Version2:
		return fdeSizeV2
	case Version3:
		return fdeSizeV3
	}
	return 0
}

// FDE is one function descriptor entry, its fields decoded, with its
// FREs (one per row; the FDE's FRE count is len(FREs)). For V3 the
// attribute fields (the FRE count, RepSize and what the info bytes hold)
// come from the 5-byte attribute at the head of the function's FRE data.
type FDE struct {
	Start    uint64 // resolved start address
	Size     uint32
	FREOff   uint32 // offset of the function's FRE data in the FRE sub-section
	RepSize  uint8  // V2, V3
	AddrSize uint8  // the size of its FREs' start-address fields: 1, 2 or 4 bytes (the FRE type)

	PCType    PCType
	Flex      bool // a V3 flexible FDE (SFRAME_FDE_TYPE_FLEX)
	Signal    bool // V3
	PauthKeyB bool

	FREs []FRE
}

// FREAt returns the index in d.FREs of the row in effect at pc: the last
// FRE starting at or before pc's offset in the function (for a PCMask
// function, its offset in the repeated block), or -1 where pc is before
// the first FRE or outside the function. d.FREs must be decoded
// (Table.FDE).
func (d *FDE) FREAt(pc uint64) int {
	off := pc - d.Start
	if off >= uint64(d.Size) {
		return -1
	}
	if d.PCType == PCMask && d.RepSize != 0 {
		off %= uint64(d.RepSize)
	}
	return sort.Search(len(d.FREs), func(j int) bool { return uint64(d.FREs[j].Start) > off }) - 1
}

// FRE is one frame row entry.
type FRE struct {
	Start     uint32 // offset from the function's start (a mask value for PCMask)
	BaseReg   uint8  // the CFA's base register: 0 for FP, 1 for SP
	NumWords  uint8
	WordSize  uint8 // in bytes: 1, 2 or 4
	MangledRA bool
	Words     [15]int32 // sign-extended data words, the first NumWords of them
}

// uword returns data word i as an unsigned value of the FRE's word size (for
// flex control words).
func (f *FRE) uword(i int) uint32 {
	w := uint32(f.Words[i])
	switch f.WordSize {
	case 1:
		return w & 0xff
	case 2:
		return w & 0xffff
	}
	return w
}
