package goprologue

import "testing"

var arm64Shapes = []shape{{
	// Go 1.26 main.small (fpprog): MOVD.W R30, -32(RSP); MOVD R29,
	// -8(RSP); SUB $8, RSP, R29, epilogues MOVD -8(RSP), R29; MOVD.P
	// 32(RSP), R30; RET. The slot is CFA-32-8.
	//   0xa9890 MOVD 16(R28), R16; CMP R16, RSP; BLS 14(PC)
	//   0xa989c MOVD.W R30, -32(RSP)
	//   0xa98a0 MOVD R29, -8(RSP)
	//   0xa98a4 SUB $8, RSP, R29; CMP $10, R0; BLE 6(PC); ...; CALL main.leaf
	//   0xa98b8 MOVD -8(RSP), R29; 0xa98bc MOVD.P 32(RSP), R30; 0xa98c0 RET
	//   0xa98c4 MOVD -8(RSP), R29; 0xa98c8 MOVD.P 32(RSP), R30; 0xa98cc RET
	//   0xa98d0 MOVD R0, 8(RSP); MOVD R30, R3; CALL runtime.morestack_noctxt; ...
	//   0xa98e4 three zero words of padding
	name:  "go1.26 MOVD.W",
	arch:  ARM64,
	entry: 0xa9890,
	code:  "900b40f9ff6330ebc9010054fe0f1ef8fd831ff8fd2300d11f2800f1cd000054e1037fb2f3ffff97fd835ff8fe0742f8c0035fd6fd835ff8fe0742f8c0035fd6e00700f9e3031eaa227aff97e00740f9ecffff17000000000000000000000000",
	sp:    []SPRange{{0xa9890, 0xa98a0, 0}, {0xa98a0, 0xa98c0, 32}, {0xa98c0, 0xa98c4, 0}, {0xa98c4, 0xa98cc, 32}, {0xa98cc, 0xa98f0, 0}},
	want: Result{Kind: Described, Rules: []Rule{
		inReg(0xa9890), saved(0xa98a4, -40), inReg(0xa98bc), saved(0xa98c4, -40), inReg(0xa98c8)}},
}, {
	// Go 1.19 main.small (fpprog): the same prologue, epilogues LDP
	// -8(RSP), (R29, R30); ADD $32, RSP, RSP; RET.
	//   0x92438 LDP -8(RSP), (R29, R30); 0x9243c ADD $32, RSP, RSP; 0x92440 RET
	//   0x92444 LDP -8(RSP), (R29, R30); 0x92448 ADD $32, RSP, RSP; 0x9244c RET
	name:  "go1.19 LDP epilogue",
	arch:  ARM64,
	entry: 0x92410,
	code:  "900b40f9ff6330ebc9010054fe0f1ef8fd831ff8fd2300d11f2800f1cd000054e1037fb2f3ffff97fdfb7fa9ff830091c0035fd6fdfb7fa9ff830091c0035fd6e00700f9e3031eaa5a5fff97e00740f9ecffff17000000000000000000000000",
	sp:    []SPRange{{0x92410, 0x92420, 0}, {0x92420, 0x92440, 32}, {0x92440, 0x92444, 0}, {0x92444, 0x9244c, 32}, {0x9244c, 0x92470, 0}},
	want: Result{Kind: Described, Rules: []Rule{
		inReg(0x92410), saved(0x92424, -40), inReg(0x9243c), saved(0x92444, -40), inReg(0x92448)}},
}, {
	// Go 1.26 main.big (fpprog): a 10 KB frame set up through R20 and R27.
	//   0xa9908 MOVD $10032, R27
	//   0xa990c SUB R27, RSP, R20
	//   0xa9910 STP (R29, R30), -8(R20)
	//   0xa9914 MOVD R20, RSP
	//   0xa9918 SUB $8, RSP, R29; ...; CALL main.small; ...
	//   0xa99d0 LDP -8(RSP), (R29, R30); 0xa99d4 MOVD $10032, R27
	//   0xa99d8 ADD R27, RSP, RSP; 0xa99dc RET
	name:  "go1.26 large frame through R20",
	arch:  ARM64,
	entry: 0xa98f0,
	code:  "900b40f91bd684d2f1633beb230700543f0210ebe90600541be684d2f4633bcb9dfa3fa99f020091fd2300d1e1430091c20980d23f7c81a83f7c81a83f7c81a83f7c81a8420400d162ffffb53f0000f9e1031faa05000014227c009be34300916268213821040091027182d23f0002eb4bffff54e107409121600e91e3430091d80980d27044c1ac304481ac7044c1ac304481ac180700d178ffffb5790040f9390000f9e0031faae1031faa06000014e307409163600e91646860388100018b000400911f0002eb4bffff54e19313f9e00301aab3ffff97e19353f90000018bfdfb7fa91be684d2ff633b8bc0035fd6e00700f9e3031eaade79ff97e00740f9c0ffff17000000000000000000000000",
	sp:    []SPRange{{0xa98f0, 0xa9918, 0}, {0xa9918, 0xa99dc, 10032}, {0xa99dc, 0xa9a00, 0}},
	want:  Result{Kind: Described, Rules: []Rule{inReg(0xa98f0), saved(0xa9914, -10040), inReg(0xa99d4)}},
}, {
	// Go 1.26 main.leaf built with -N -l (fpprog): a leaf's epilogue
	// sets R29 to the caller's by Go's convention rather than loading it.
	//   0xc0170 MOVD.W R30, -32(RSP); 0xc0174 MOVD R29, -8(RSP); 0xc0178 SUB $8, RSP, R29
	//   0xc0194 ADD $24, RSP, R29; 0xc0198 ADD $32, RSP, RSP; 0xc019c RET
	name:  "go1.26 leaf epilogue ADD $fs-8, RSP, R29",
	arch:  ARM64,
	entry: 0xc0170,
	code:  "fe0f1ef8fd831ff8fd2300d1e01700f9e11b00f9ff0b00f9017c019b200c0091e00b00f9fd630091ff830091c0035fd6",
	sp:    []SPRange{{0xc0170, 0xc0174, 0}, {0xc0174, 0xc019c, 32}, {0xc019c, 0xc01a0, 0}},
	want:  Result{Kind: Described, Rules: []Rule{inReg(0xc0170), saved(0xc0178, -40), inReg(0xc0198)}},
}, {
	// Go 1.19 main.leaf built with -N -l (fpprog): the leaf's epilogue
	// pops the frame first, then sets R29 from the entry's SP.
	//   0xa54dc ADD $32, RSP, RSP; 0xa54e0 SUB $8, RSP, R29; 0xa54e4 RET
	name:  "go1.19 leaf epilogue SUB $8, RSP, R29",
	arch:  ARM64,
	entry: 0xa54b0,
	code:  "fe0f1ef8fd831ff8fd2300d1e01700f9e11b00f9ff0b00f9e11b40f9e21740f9417c019b200c0091e00b00f9ff830091fd2300d1c0035fd60000000000000000",
	sp:    []SPRange{{0xa54b0, 0xa54b4, 0}, {0xa54b4, 0xa54e0, 32}, {0xa54e0, 0xa54f0, 0}},
	want:  Result{Kind: Described, Rules: []Rule{inReg(0xa54b0), saved(0xa54b8, -40), inReg(0xa54e4)}},
}, {
	// Go 1.26 internal/godebug.update.deferwrap1: LDADDAL (0xb8e20003),
	// which arm64asm does not decode, between the prologue and epilogue.
	//   0x9ba18 TBZ $0, R2, 5(PC); MOVD $-1, R2
	//   0x9ba20 LDADDAL W2, W3, [X0]
	//   0x9ba4c MOVD -8(RSP), R29; 0x9ba50 MOVD.P 32(RSP), R30; 0x9ba54 RET
	name:  "go1.26 LSE atomic",
	arch:  ARM64,
	entry: 0x9b9f0,
	code:  "900b40f9ff6330eb09030054fe0f1ef8fd831ff8fd2300d1400740f91b0080393b0900d062b75339a2000036020080920300e2b86300028b060000140200809203fc5f886300028b03fc1b88bbffffb563000034e10303aabecdff97fd835ff8fe0742f8c0035fd6e3031eaaa1b1ff97e4ffff17000000000000000000000000",
	sp:    []SPRange{{0x9b9f0, 0x9ba00, 0}, {0x9ba00, 0x9ba54, 32}, {0x9ba54, 0x9ba70, 0}},
	want:  Result{Kind: Described, Rules: []Rule{inReg(0x9b9f0), saved(0x9ba04, -40), inReg(0x9ba50)}},
}, {
	// Go 1.26 sync/atomic.CompareAndSwapUintptr (asm, frameless): CASAL
	// (0xc8fbfc02) on one path, LDAXR/STLXR on the other.
	name:  "go1.26 CAS, frameless",
	arch:  ARM64,
	entry: 0x8ed30,
	code:  "9b0900f063b75339c3000036fb0301aa02fcfbc87f0301ebe3179f9a070000141bfc5fc87f0301eb6100005402fc1bc89bffffb5e3179f9ae00303aac0035fd6",
	sp:    []SPRange{{0x8ed30, 0x8ed70, 0}},
	want:  Result{Kind: Frameless},
}, {
	// Go 1.26 gogo (asm): MOVD R6, R28; CALL runtime.save_g; MOVD (R5),
	// R0; MOVD R0, RSP: a switch to another goroutine's stack.
	name:  "gogo",
	arch:  ARM64,
	entry: 0x87490,
	code:  "fc0306aa7b0f0094a00040f91f000091bd1440f9be1040f9ba0c40f9bf0000f9bf1400f9bf1000f9bf0c00f9ff031feba60440f9c0001fd60000000000000000",
	sp:    []SPRange{{0x87490, 0x874d0, 0}},
	want:  Result{Kind: Unrecognized, Reason: ReasonSPWrite, PC: 0x8749c, Inst: "MOVD R0, RSP"},
}, {
	// Synthetic: NOOP; a zero word; RET. The zero word is reached.
	name:   "zero word",
	arch:   ARM64,
	entry:  0x1000,
	code:   "1f2003d500000000c0035fd6",
	sp:     []SPRange{{0x1000, 0x100c, 0}},
	errPC:  0x1004,
	errSub: "0x1004",
}}

// TestClassifyARM64 checks the words arm64asm does not decode: LSE
// atomics and CAS from Go binaries, MSR DIT, and words of no class.
func TestClassifyARM64(t *testing.T) {
	for _, c := range []struct {
		word   uint32
		class  string
		writes []int
	}{
		{0xb8e20003, "atomic", []int{3}}, // LDADDAL W2, W3, [X0] (internal/godebug)
		{0xf8e18002, "atomic", []int{2}}, // SWPAL X1, X2, [X0] (sync/atomic.SwapUintptr)
		{0x38e13003, "atomic", []int{3}}, // LDSETALB W1, W3, [X0] (runtime.(*mspan).incPinCounter)
		{0xb8ff8001, "atomic", []int{1}}, // SWPAL WZR, W1, [X0] (runtime.newextram)
		{0xb8e2001f, "atomic", nil},      // LDADDAL W2, WZR, [X0] (STADDAL): writes no register
		{0x88fbfca4, "CAS", []int{27}},   // CASAL W27, W4, [X5] (internal/godebug.update)
		{0xc8fbfc02, "CAS", []int{27}},   // CASAL X27, X2, [X0] (sync/atomic.CompareAndSwapUintptr)
		{0xd503415f, "MSR", nil},         // MSR DIT, #1 (internal/runtime/sys.EnableDIT)
		{0x00000000, "", nil},            // UDF #0: padding
		{0xa9bf7bfd, "", nil},            // STP X29, X30, [SP,#-16]!: not of these classes
		{0xc87ffc02, "", nil},            // LDAXP: an exclusive pair, not a CAS
	} {
		r, ok := classifyARM64(c.word)
		if ok != (c.class != "") || r.class != c.class || len(r.writes) != len(c.writes) {
			t.Errorf("%#08x: %v %v, want class %q writing %v", c.word, r, ok, c.class, c.writes)
			continue
		}
		for i := range c.writes {
			if r.writes[i] != c.writes[i] {
				t.Errorf("%#08x writes %v, want %v", c.word, r.writes, c.writes)
			}
		}
	}
}
