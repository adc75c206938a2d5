// Package sframe models the SFrame stack-trace format (.sframe sections,
// versions 1 to 3, both byte orders, ABIs AArch64 LE/BE, AMD64, s390x).
//
// Raw model: Decode(b, addr) returns a *Section holding the Header (every
// field, auxiliary header included) and its FDEs, each with its decoded
// info bytes and FREs (start offset, info bits, sign-extended data words).
// Every count, offset and length is checked against the input before
// anything is allocated; errors are *Error values with the byte offset.
//
// Lookups: Open(b, addr) checks a section's header and index and returns a
// Table, whose Lookup gives the Rule at a PC, decoding only that
// function's rows (what an unwinder needs; package unwind walks stacks
// with it). OpenFile (a path), OpenELF (a debug/elf *elf.File) and
// OpenELFFile (an elfread.File) find an ELF file's SFrame section and
// open it; see ExampleOpenELF.
//
// Streaming: NewReader(b, addr) makes the same checks as Decode, with the
// same errors, but keeps no per-function memory; (*Reader).ReadFDE decodes
// one function into a reused FDE, and the Reader dumps and looks PCs up as
// a Section does. Dump, verify and report read large sections this way.
//
// Interpretation: (*Section).Interpret turns one FRE into a Rule (CFA, RA
// and FP as Loc values: register+offset, CFA slot, flex forms, fixed,
// unsaved), applying the s390x CFA scaling and the V3 flexible-FDE
// control/offset word pairs. (*Section).FindFRE(pc) looks a PC up without
// allocating.
//
// Output: (*Section).Dump writes the text of GNU objdump --sframe from its
// "  Header :" line on; (*Section).DumpJSON writes JSON.
//
// Neutral model: []Function with Rows, filled by a translator or by
// (*Section).Functions, and Encode(funcs, Options) writing V2 (with or
// without PCREL) or V3 with libsframe's layout choices (narrowest FRE type
// per function and data-word size per row, FRE data in the order of funcs,
// FDE index optionally sorted), so a GNU-produced section decodes and
// re-encodes byte for byte.
package sframe

import (
	"encoding/binary"
	"fmt"
)

// Format constants.
const (
	Magic = 0xdee2

	Version1 = 1
	Version2 = 2
	Version3 = 3

	// Header flags.
	FlagFDESorted         = 0x1
	FlagFramePointer      = 0x2 // V1 and V2 only
	FlagFDEFuncStartPCRel = 0x4
	HeaderSize            = 28
	fdeSizeV1             = 17
	fdeSizeV2             = 20
	fdeSizeV3             = 16
	fdeAttrSizeV3         = 5
	maxDataWords          = 15
	CFAFixedFPInvalid     = 0
	CFAFixedRAInvalid     = 0
	RAOffsetInvalid       = 0 // s390x padding: FP saved without RA
	S390XCFAOffsetAdjust  = -160
	S390XCFAOffsetAlign   = 8
	S390XSPValOffset      = -160
	AArch64PauthKeyA      = 0
	AArch64PauthKeyB      = 1
	BaseRegFP             = 0
	BaseRegSP             = 1
	fdeTypeMaskV3         = 0x1f
	frePCTypeMaskBit      = 0x10
	fdeInfoPauthBit       = 0x20
	fdeInfoSignalBit      = 0x80
	freInfoMangledRABit   = 0x80
	flexCtrlRegP          = 0x1
	flexCtrlDerefP        = 0x2
	flexCtrlRegShift      = 3
)

// ABI/arch identifiers.
const (
	ABIAArch64BE = 1
	ABIAArch64LE = 2
	ABIAMD64LE   = 3
	ABIS390XBE   = 4
)

// FDE PC types.
const (
	PCInc  = 0
	PCMask = 1
)

// V3 FDE types.
const (
	FDETypeDefault = 0
	FDETypeFlex    = 1
)

// FRE types: width of the FRE start-address field.
const (
	FREAddr1 = 0
	FREAddr2 = 1
	FREAddr4 = 2
)

// Data-word size codes in the FRE info byte.
const (
	DataWord1 = 0
	DataWord2 = 1
	DataWord4 = 2
)

// Error is a decoding error: what is wrong and at which byte offset of the
// section.
type Error struct {
	Off int64
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("sframe: %s at offset %#x", e.Msg, e.Off) }

func errorf(off int64, format string, args ...any) *Error {
	return &Error{Off: off, Msg: fmt.Sprintf(format, args...)}
}

// Header is the SFrame header, every field preserved.
type Header struct {
	Magic      uint16
	Version    uint8
	Flags      uint8
	ABI        uint8
	CFAFixedFP int8
	CFAFixedRA int8
	AuxHdrLen  uint8
	NumFDEs    uint32
	NumFREs    uint32
	FRELen     uint32
	FDEOff     uint32
	FREOff     uint32
	AuxHdr     []byte
}

// Size is the header size including the auxiliary header.
func (h *Header) Size() int { return HeaderSize + int(h.AuxHdrLen) }

// FDE is one function descriptor entry, raw fields plus decoded info bytes.
// For V3 the attribute fields (NumFREs, Info, Info2, RepSize) come from the
// 5-byte attribute at the head of the function's FRE data.
type FDE struct {
	StartOff int64  // raw start field (int32 in V1/V2, int64 in V3)
	Start    uint64 // resolved start address
	Size     uint32
	FREOff   uint32 // offset of the function's FRE data in the FRE sub-section
	NumFREs  uint32
	Info     uint8
	Info2    uint8 // V3 only
	RepSize  uint8 // V2, V3
	Padding  uint16

	PCType    uint8
	FREType   uint8
	FDEType   uint8 // FDETypeDefault or FDETypeFlex (always default before V3)
	Signal    bool  // V3
	PauthKeyB bool

	FREs []FRE
}

// FRE is one frame row entry.
type FRE struct {
	StartOff  uint32
	Info      uint8
	BaseReg   uint8 // BaseRegFP or BaseRegSP
	NumWords  uint8
	WordSize  uint8 // in bytes: 1, 2 or 4
	MangledRA bool
	Words     [maxDataWords]int32 // sign-extended data words
}

// UWord returns data word i as an unsigned value of the FRE's word size (for
// flex control words).
func (f *FRE) UWord(i int) uint32 {
	w := uint32(f.Words[i])
	switch f.WordSize {
	case 1:
		return w & 0xff
	case 2:
		return w & 0xffff
	}
	return w
}

// Section is a decoded .sframe section.
type Section struct {
	Header Header
	Order  binary.ByteOrder
	Addr   uint64 // the section's address
	FDEs   []FDE
}

// ABIName names an ABI id.
func ABIName(abi uint8) string {
	switch abi {
	case ABIAArch64BE:
		return "SFRAME_ABI_AARCH64_ENDIAN_BIG"
	case ABIAArch64LE:
		return "SFRAME_ABI_AARCH64_ENDIAN_LITTLE"
	case ABIAMD64LE:
		return "SFRAME_ABI_AMD64_ENDIAN_LITTLE"
	case ABIS390XBE:
		return "SFRAME_ABI_S390X_ENDIAN_BIG"
	}
	return fmt.Sprintf("unknown ABI %d", abi)
}

func isAArch64(abi uint8) bool { return abi == ABIAArch64BE || abi == ABIAArch64LE }
