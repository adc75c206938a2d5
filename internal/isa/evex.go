package isa

import (
	"fmt"
	"strconv"
	"strings"
)

// VecInst is a VEX- or EVEX-encoded instruction as far as a stack walk
// needs it. None of them moves control: every one falls through to the
// next instruction.
type VecInst struct {
	Len int // bytes
	// GPR is the general register (x86 encoding 0-15) it writes, or -1.
	// MULX writes two (its ModRM.reg and VEX.vvvv operands): GPR is the
	// first operand in Intel order, ModRM.reg (the high half); GPR2 is
	// the other. VPCMPESTRI and VPCMPISTRI write RCX (1) implicitly.
	GPR  int
	GPR2 int // a second general register written (MULX only), or -1
	// Store says it writes its memory operand (or, for VMASKMOVDQU,
	// the memory at RDI, given as MemBase 7).
	Store bool
	// MemBase is the memory operand's base register (0-15); -1 when it
	// has none, it has no memory operand or it is RIP-relative.
	MemBase int
	// Mem says it has a memory operand (RIP-relative ones too).
	Mem bool
	// MemDisp is the memory operand's displacement. EVEX compresses an
	// 8-bit displacement (disp8*N, N from the instruction's tuple type
	// and vector length): DispExact says MemDisp is the real one. It is
	// for VEX, for every displacement of 0 or 32 bits, and for EVEX's
	// stores (whose N DecodeVec knows); for the other EVEX instructions
	// with a disp8 it is the disp8 unscaled and DispExact is false.
	MemDisp   int64
	DispExact bool
}

// VecErrorKind says why DecodeVec gives no instruction.
type VecErrorKind uint8

const (
	VecTruncated VecErrorKind = iota + 1 // b ends inside the instruction
	VecNotVec                            // b[0] is not c4, c5 or 62 (a prefix before it is this too)
	VecReserved                          // a reserved field set: an encoding (APX's extended registers, an unknown map) DecodeVec does not know
	VecUnknown                           // an opcode DecodeVec's tables do not hold
)

// VecError is why DecodeVec gives no instruction.
type VecError struct {
	Kind   VecErrorKind
	Detail string
}

func (e *VecError) Error() string { return "isa: vector instruction: " + e.Detail }

func vecErr(k VecErrorKind, format string, a ...any) *VecError {
	return &VecError{Kind: k, Detail: fmt.Sprintf(format, a...)}
}

// Encodings, for the opcode tables.
const (
	encVEX = iota
	encEVEX
)

// Prefixes implied by VEX.pp and EVEX.pp.
const (
	ppNone = iota
	pp66
	ppF3
	ppF2
)

// opSet is a set of opcode bytes.
type opSet [4]uint64

func (s *opSet) has(op byte) bool { return s[op>>6]&(1<<(op&63)) != 0 }

// opset reads a set written as hex bytes and ranges ("10-17 2a"). The
// tables are constants of this file; a malformed one is a bug that
// panics when the package is loaded, so every test finds it.
func opset(spec string) opSet {
	var s opSet
	for _, f := range strings.Fields(spec) {
		lo, hi, ok := strings.Cut(f, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.ParseUint(lo, 16, 8)
		z, err2 := strconv.ParseUint(hi, 16, 8)
		if err1 != nil || err2 != nil || a > z {
			panic("isa: bad opcode table entry " + f)
		}
		for op := a; op <= z; op++ {
			s[op>>6] |= 1 << (op & 63)
		}
	}
	return s
}

// vecOps holds, by encoding and opcode map (1 0F, 2 0F38, 3 0F3A, 5 and
// 6 the FP16 maps of EVEX), the opcodes DecodeVec knows, written from the
// SDM's opcode maps (and AMD's FMA4 and VPERMIL2 rows of VEX map 3). An
// opcode outside them is refused: an instruction set extension yet to
// come may give it a memory or general-register destination. Whether
// the prefix pp goes with the opcode is not checked beyond the rows that
// write a general register or memory: a VEX or EVEX opcode undefined with
// its pp faults (#UD), so no stack frame outlives it.
var vecOps = [2][7]opSet{
	encVEX: {
		1: opset("10-17 28-2f 41-42 44-47 4a-4b 50-77 7c-7f 90-93 98-99 ae c2 c4-c6 d0-fe"),
		2: opset("00-0f 13 16-1a 1c-1e 20-25 28-2f 30-41 45-47 49 4b 50-53 58-5a 5c 5e 6c 72 78-79 8c 8e 90-93 96-9f a6-af b0-b1 b4-bf cb-cd cf d2-d3 da-df e0-ef f2-f3 f5-f7"),
		3: opset("00-02 04-06 08-0f 14-19 1d 20-22 30-33 38-39 40-42 44 46 48-4c 5c-5f 60-63 68-6f 78-7f ce-cf de-df f0"),
	},
	// EVEX leaves out VEX's general-register rows (map 1's 90-93, map 2's
	// f0-f7, map 3's f0): under APX they are EVEX-promoted forms whose
	// destinations may be r16-r31 or flags-free variants.
	encEVEX: {
		1: opset("10-17 28-2f 51 54-76 78-7b 7e-7f c2 c4-c6 d1-d6 d8-ef f1-f6 f8-fe"),
		2: opset("00 04 0b-0d 10-16 18-1f 20-2d 30-40 42-47 4c-4f 50-55 58-5b 62-66 68 70-73 75-7f 83 88-8b 8d 8f 90-93 96-9f a0-a3 a6-af b4-bf c4 c6-c8 ca-cd cf dc-df"),
		3: opset("00-01 03-05 08-0b 0f 14-1b 1d-23 25-27 38-3b 3e-3f 42-44 50-51 54-57 66-67 70-73 c2 ce-cf"),
		5: opset("10-11 1d 2a 2c-2f 51 58-5f 6e 78-7e"),
		6: opset("13 2c-2d 42-43 4c-4f 56-57 96-9f a6-af b6-bf d6-d7"),
	},
}

// vecPrefix is what a VEX or EVEX prefix says.
type vecPrefix struct {
	enc     int
	size    int  // bytes of the prefix, c4/c5/62 included
	m       int  // opcode map
	r, x, b int  // the REX bits, as 0 or 8
	rHi     bool // EVEX.R' (ModRM.reg's fifth bit) set
	w       int  // 0 or 1
	vvvv    int  // the operand in VEX.vvvv, decoded (0-15)
	pp      int  // the implied prefix
	ll      int  // vector length: 0 128, 1 256, 2 512 bits
}

// DecodeVec decodes one VEX (c4, c5) or EVEX (62; in 64-bit mode these
// bytes always begin one) instruction at b[0]. b[0] must be the VEX or
// EVEX byte itself: 66, f2, f3, f0 or REX before it make the instruction
// fault (#UD); 67 and segment overrides would be valid but DecodeVec
// does not take them (they are VecNotVec) — compilers and glibc's
// hand-written code emit neither. DecodeVec reads no byte past b; every
// error is a *VecError.
func DecodeVec(b []byte) (VecInst, error) {
	p, err := vecPrefixOf(b)
	if err != nil {
		return VecInst{}, err
	}
	pos := p.size
	if pos >= len(b) {
		return VecInst{}, vecErr(VecTruncated, "no opcode after the prefix")
	}
	op := b[pos]
	pos++
	if !vecOps[p.enc][p.m].has(op) {
		return VecInst{}, vecErr(VecUnknown, "%s map %d opcode %#02x", encName(p.enc), p.m, op)
	}
	in := VecInst{GPR: -1, GPR2: -1, MemBase: -1, DispExact: true}
	if p.enc == encVEX && p.m == 1 && op == 0x77 {
		// VZEROUPPER and VZEROALL: the only ones without a ModRM byte.
		in.Len = pos
		return in, nil
	}
	if pos >= len(b) {
		return VecInst{}, vecErr(VecTruncated, "no ModRM byte")
	}
	modrm := b[pos]
	pos++
	mod, reg, rm := int(modrm>>6), int(modrm>>3&7), int(modrm&7)
	var disp8 bool
	if mod != 3 {
		in.Mem = true
		pos, disp8, err = vecMemory(b, pos, mod, rm, p, &in)
		if err != nil {
			return VecInst{}, err
		}
	}
	if vecHasImm8(p.m, op) {
		pos++
	}
	if pos > len(b) {
		return VecInst{}, vecErr(VecTruncated, "no immediate byte")
	}
	in.Len = pos
	if err := vecEffects(&in, p, op, mod, reg|p.r, rm|p.b); err != nil {
		return VecInst{}, err
	}
	if disp8 && p.enc == encEVEX {
		n := evexStoreN(p, op)
		if in.Store && n > 0 {
			in.MemDisp *= int64(n)
		} else {
			in.DispExact = false
		}
	}
	return in, nil
}

func encName(enc int) string {
	if enc == encEVEX {
		return "EVEX"
	}
	return "VEX"
}

// vecPrefixOf reads the VEX or EVEX prefix at b[0].
func vecPrefixOf(b []byte) (vecPrefix, error) {
	inv := func(v byte, bit uint) int { return int(^v>>bit&1) << 3 }
	if len(b) == 0 {
		return vecPrefix{}, vecErr(VecTruncated, "no bytes")
	}
	switch b[0] {
	case 0xc5:
		if len(b) < 2 {
			return vecPrefix{}, vecErr(VecTruncated, "VEX prefix cut short")
		}
		v := b[1]
		return vecPrefix{enc: encVEX, size: 2, m: 1, r: inv(v, 7),
			vvvv: int(^v >> 3 & 15), ll: int(v >> 2 & 1), pp: int(v & 3)}, nil
	case 0xc4:
		if len(b) < 3 {
			return vecPrefix{}, vecErr(VecTruncated, "VEX prefix cut short")
		}
		v1, v2 := b[1], b[2]
		m := int(v1 & 31)
		if m < 1 || m > 3 {
			return vecPrefix{}, vecErr(VecReserved, "VEX opcode map %d", m)
		}
		return vecPrefix{enc: encVEX, size: 3, m: m, r: inv(v1, 7), x: inv(v1, 6), b: inv(v1, 5),
			w: int(v2 >> 7), vvvv: int(^v2 >> 3 & 15), ll: int(v2 >> 2 & 1), pp: int(v2 & 3)}, nil
	case 0x62:
		return evexPrefixOf(b)
	}
	return vecPrefix{}, vecErr(VecNotVec, "first byte %#02x is not c4, c5 or 62", b[0])
}

// evexPrefixOf reads the four bytes of an EVEX prefix: 62 P0 P1 P2.
func evexPrefixOf(b []byte) (vecPrefix, error) {
	if len(b) < 4 {
		return vecPrefix{}, vecErr(VecTruncated, "EVEX prefix cut short")
	}
	p0, p1, p2 := b[1], b[2], b[3]
	if p0&0x08 != 0 {
		// APX's B4 (bit 3 was reserved, zero): base or rm in r16-r31.
		return vecPrefix{}, vecErr(VecReserved, "EVEX P0 bit 3 (APX B4) set")
	}
	m := int(p0 & 7)
	if m != 1 && m != 2 && m != 3 && m != 5 && m != 6 {
		// Map 4 is APX's promoted legacy instructions (PUSH2 and POP2
		// among them): never a vector instruction.
		return vecPrefix{}, vecErr(VecReserved, "EVEX opcode map %d", m)
	}
	ll := int(p2 >> 5 & 3)
	if ll == 3 {
		// Reserved as a length; with EVEX.b and a register operand it
		// is a rounding mode, which the length does not depend on.
		ll = 2
	}
	// P1 bit 2 (EVEX.U, APX's X4) is not checked: it changes no length,
	// and it extends only an index or a vector register.
	return vecPrefix{enc: encEVEX, size: 4, m: m,
		r: int(^p0>>7&1) << 3, x: int(^p0>>6&1) << 3, b: int(^p0>>5&1) << 3,
		rHi: p0&0x10 == 0, w: int(p1 >> 7), vvvv: int(^p1 >> 3 & 15), pp: int(p1 & 3), ll: ll}, nil
}

// vecMemory reads the SIB byte and displacement of a memory operand
// (64-bit addressing) from b[pos:], filling in's MemBase and MemDisp; it
// gives the position after them and whether the displacement was 8 bits.
func vecMemory(b []byte, pos, mod, rm int, p vecPrefix, in *VecInst) (int, bool, error) {
	base := rm | p.b
	dispLen := [3]int{0, 1, 4}[mod]
	if rm == 4 {
		if pos >= len(b) {
			return 0, false, vecErr(VecTruncated, "no SIB byte")
		}
		sib := b[pos]
		pos++
		base = int(sib&7) | p.b
		if mod == 0 && sib&7 == 5 {
			base, dispLen = -1, 4 // no base: disp32
		}
	} else if mod == 0 && rm == 5 {
		base, dispLen = -1, 4 // RIP-relative
	}
	if pos+dispLen > len(b) {
		return 0, false, vecErr(VecTruncated, "displacement cut short")
	}
	switch dispLen {
	case 1:
		in.MemDisp = int64(int8(b[pos]))
	case 4:
		in.MemDisp = int64(int32(uint32(b[pos]) | uint32(b[pos+1])<<8 | uint32(b[pos+2])<<16 | uint32(b[pos+3])<<24))
	}
	in.MemBase = base
	return pos + dispLen, dispLen == 1, nil
}

// vecHasImm8 says the opcode takes an 8-bit immediate (or VEX's /is4
// register byte): every opcode of map 3, and map 1's shuffles, shifts by
// an immediate, compares, PINSRW, PEXTRW and SHUFPS/PD. Maps 2, 5 and 6
// have none.
func vecHasImm8(m int, op byte) bool {
	switch m {
	case 3:
		return true
	case 1:
		return op >= 0x70 && op <= 0x73 || op == 0xc2 || op >= 0xc4 && op <= 0xc6
	}
	return false
}

// Where a general-register destination is encoded.
const (
	gprNone = iota
	gprReg  // ModRM.reg
	gprRM   // ModRM.rm, when mod is 3 (else the destination is memory)
	gprVVVV // VEX.vvvv
	gprRCX  // implicitly RCX
)

// vecEffects fills in's GPR and Store from the opcode; an opcode that
// writes a general register with a ModRM.reg the tables do not hold is
// refused.
func vecEffects(in *VecInst, p vecPrefix, op byte, mod, reg, rm int) error {
	dest, err := vecGPRDest(p, op, reg&7)
	if err != nil {
		return err
	}
	switch dest {
	case gprReg:
		if p.rHi {
			return vecErr(VecReserved, "EVEX.R' set on a general register")
		}
		in.GPR = reg
	case gprRM:
		if mod == 3 {
			if p.enc == encEVEX && p.x != 0 {
				return vecErr(VecReserved, "EVEX.X set on a general register")
			}
			in.GPR = rm
		}
	case gprVVVV:
		in.GPR = p.vvvv
	case gprRCX:
		in.GPR = 1
	}
	if p.enc == encVEX && p.m == 2 && op == 0xf6 {
		in.GPR2 = p.vvvv // MULX's low half
	}
	if p.enc == encVEX && p.m == 1 && op == 0xf7 && p.pp == pp66 {
		// VMASKMOVDQU: stores through RDI, whatever ModRM says.
		in.Store, in.Mem, in.MemBase, in.MemDisp = true, true, 7, 0
		return nil
	}
	if mod != 3 {
		st, err := vecStores(p, op, reg&7)
		if err != nil {
			return err
		}
		in.Store = st
	}
	return nil
}

// vecGPRDest is where the opcode's general-register destination is, if
// it has one: the SDM's conversions to an integer (CVT(T)SS2SI and kin,
// FP16's too), moves of a vector element or mask to a general register
// (VMOVD/Q, VMOVW, VPEXTR*, VEXTRACTPS, VMOVMSKPS/PD, VPMOVMSKB, KMOV*),
// string compares giving an index (VPCMPESTRI, VPCMPISTRI), CMPccXADD,
// and the BMI1/BMI2 instructions.
func vecGPRDest(p vecPrefix, op byte, reg int) (int, error) {
	type key struct {
		enc, m int
		op     byte
	}
	switch (key{p.enc, p.m, op}) {
	case key{encVEX, 1, 0x2c}, key{encVEX, 1, 0x2d}, key{encEVEX, 1, 0x2c}, key{encEVEX, 1, 0x2d}:
		if p.pp == ppF3 || p.pp == ppF2 {
			return gprReg, nil
		}
		return 0, vecErr(VecUnknown, "map 1 opcode %#02x without f2 or f3", op)
	case key{encEVEX, 1, 0x78}, key{encEVEX, 1, 0x79}:
		if p.pp == ppF3 || p.pp == ppF2 { // VCVT(T)SS2USI, VCVT(T)SD2USI
			return gprReg, nil
		}
	case key{encVEX, 1, 0x50}, key{encVEX, 1, 0xd7}, key{encVEX, 1, 0x93}, key{encVEX, 1, 0xc5}, key{encEVEX, 1, 0xc5}:
		return gprReg, nil
	case key{encVEX, 1, 0x7e}, key{encEVEX, 1, 0x7e}, key{encEVEX, 5, 0x7e}:
		if p.pp == pp66 {
			return gprRM, nil
		}
	case key{encVEX, 3, 0x14}, key{encVEX, 3, 0x15}, key{encVEX, 3, 0x16}, key{encVEX, 3, 0x17},
		key{encEVEX, 3, 0x14}, key{encEVEX, 3, 0x15}, key{encEVEX, 3, 0x16}, key{encEVEX, 3, 0x17}:
		return gprRM, nil
	case key{encVEX, 3, 0x61}, key{encVEX, 3, 0x63}:
		return gprRCX, nil
	case key{encEVEX, 5, 0x2c}, key{encEVEX, 5, 0x2d}, key{encEVEX, 5, 0x78}, key{encEVEX, 5, 0x79}:
		if p.pp == ppF3 { // VCVT(T)SH2SI, VCVT(T)SH2USI
			return gprReg, nil
		}
		if p.pp == ppF2 {
			return 0, vecErr(VecUnknown, "map 5 opcode %#02x with f2", op)
		}
	case key{encVEX, 2, 0xe0}, key{encVEX, 2, 0xe1}, key{encVEX, 2, 0xe2}, key{encVEX, 2, 0xe3},
		key{encVEX, 2, 0xe4}, key{encVEX, 2, 0xe5}, key{encVEX, 2, 0xe6}, key{encVEX, 2, 0xe7},
		key{encVEX, 2, 0xe8}, key{encVEX, 2, 0xe9}, key{encVEX, 2, 0xea}, key{encVEX, 2, 0xeb},
		key{encVEX, 2, 0xec}, key{encVEX, 2, 0xed}, key{encVEX, 2, 0xee}, key{encVEX, 2, 0xef}:
		return gprReg, nil // CMPccXADD: the old memory value
	case key{encVEX, 3, 0xf0}: // RORX
		if p.pp == ppF2 {
			return gprReg, nil
		}
		return 0, vecErr(VecUnknown, "VEX map 3 opcode f0 without f2")
	case key{encVEX, 2, 0xf2}, key{encVEX, 2, 0xf3}, key{encVEX, 2, 0xf5}, key{encVEX, 2, 0xf6}, key{encVEX, 2, 0xf7}:
		return bmiDest(p.pp, op, reg)
	}
	return gprNone, nil
}

// bmiDest is the destination of a BMI1/BMI2 instruction (VEX map 2,
// f2-f7), or an error for a pp or ModRM.reg the SDM does not define.
func bmiDest(pp int, op byte, reg int) (int, error) {
	ok := false
	dest := gprReg
	switch op {
	case 0xf2: // ANDN
		ok = pp == ppNone
	case 0xf3: // BLSR /1, BLSMSK /2, BLSI /3: the result goes to vvvv
		ok = pp == ppNone && reg >= 1 && reg <= 3
		dest = gprVVVV
	case 0xf5: // BZHI, PEXT, PDEP
		ok = pp != pp66
	case 0xf6: // MULX (high half in reg, low half in vvvv)
		ok = pp == ppF2
	case 0xf7: // BEXTR, SHLX, SARX, SHRX
		ok = true
	}
	if !ok {
		return 0, vecErr(VecUnknown, "VEX map 2 opcode %#02x with pp %d, reg %d", op, pp, reg)
	}
	return dest, nil
}

// vecStores says whether the opcode, with a memory operand, writes it.
func vecStores(p vecPrefix, op byte, reg int) (bool, error) {
	switch p.m {
	case 1:
		switch op {
		case 0x11, 0x13, 0x17, 0x29, 0x2b, 0x7f, 0xe7:
			return true, nil
		case 0x7e, 0xd6:
			return p.pp == pp66, nil
		case 0x91: // KMOV m, k (VEX only: EVEX's is not in the table)
			return true, nil
		case 0xae: // VLDMXCSR /2, VSTMXCSR /3
			if reg != 2 && reg != 3 {
				return false, vecErr(VecUnknown, "VEX map 1 opcode ae /%d", reg)
			}
			return reg == 3, nil
		}
	case 2:
		if p.enc == encEVEX {
			return evexMap2Stores(p, op), nil
		}
		switch op {
		case 0x2e, 0x2f, 0x8e: // VMASKMOVPS/PD, VPMASKMOVD/Q stores
			return true, nil
		case 0x49: // LDTILECFG (none), STTILECFG (66); TILERELEASE, TILEZERO have no memory
			return p.pp == pp66, nil
		case 0x4b: // TILESTORED (f3); the others load a tile
			return p.pp == ppF3, nil
		}
		if op >= 0xe0 && op <= 0xef { // CMPccXADD
			return true, nil
		}
	case 3:
		switch op {
		case 0x14, 0x15, 0x16, 0x17, 0x19, 0x1d, 0x39:
			return true, nil
		case 0x1b, 0x3b:
			return p.enc == encEVEX, nil
		}
	case 5:
		switch op {
		case 0x11: // VMOVSH m16, xmm
			return p.pp == ppF3, nil
		case 0x7e: // VMOVW m16, xmm
			return p.pp == pp66, nil
		}
	}
	return false, nil
}

// evexMap2Stores: the down-converting moves VPMOV[S|US]xy (f3 10-15,
// 20-25, 30-35), the compresses and the scatters.
func evexMap2Stores(p vecPrefix, op byte) bool {
	lo, hi := op&15, op>>4
	if p.pp == ppF3 && lo <= 5 && (hi == 1 || hi == 2 || hi == 3) {
		return true
	}
	if p.pp == pp66 {
		switch op {
		case 0x63, 0x8a, 0x8b, 0xa0, 0xa1, 0xa2, 0xa3:
			return true
		}
	}
	return false
}

// evexStoreN is N of the disp8*N compression of an EVEX store (the
// tuple types of the SDM's tables 2-34 and 2-35 for the store rows of
// vecStores), or 0 for an instruction that is not one.
func evexStoreN(p vecPrefix, op byte) int {
	vl := 16 << p.ll
	switch p.m {
	case 1:
		switch op {
		case 0x11:
			switch p.pp {
			case ppF3:
				return 4
			case ppF2:
				return 8
			}
			return vl
		case 0x29, 0x2b, 0x7f, 0xe7:
			return vl
		case 0x13, 0x17, 0xd6:
			return 8
		case 0x7e:
			return 4 << p.w
		}
	case 2:
		if !evexMap2Stores(p, op) {
			return 0
		}
		if p.pp == ppF3 { // half, quarter and eighth memory
			return vl / [6]int{2, 4, 8, 2, 4, 2}[op&15]
		}
		if op == 0x63 { // VPCOMPRESSB/W
			return 1 << p.w
		}
		return 4 << p.w
	case 3:
		switch op {
		case 0x14:
			return 1
		case 0x15:
			return 2
		case 0x16:
			return 4 << p.w
		case 0x17:
			return 4
		case 0x19, 0x39:
			return 16
		case 0x1b, 0x3b:
			return 32
		case 0x1d:
			return vl / 2
		}
	case 5:
		if op == 0x11 || op == 0x7e {
			return 2
		}
	}
	return 0
}
