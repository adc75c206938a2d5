package goprologue

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shape is one function's code as a linker laid it out, its pcsp rows,
// and what Analyze must say of it. The code of the real ones was copied
// from the binaries named in each comment (built from testdata/fpprog or
// part of the runtime, CGO_ENABLED=0), with the disassembly that matters.
type shape struct {
	name   string
	arch   Arch
	entry  uint64
	code   string // hex
	sp     []SPRange
	want   Result
	errPC  uint64 // a DecodeError at this PC is wanted instead
	errSub string
}

func saved(pc uint64, off int64) Rule { return Rule{PC: pc, Saved: true, Offset: off} }
func inReg(pc uint64) Rule            { return Rule{PC: pc} }

var amd64Shapes = []shape{{
	// Go 1.26 main.small: PUSHQ BP; MOVQ SP, BP; SUBQ $0x10, SP, two
	// epilogues ADDQ $0x10, SP; POPQ BP; RET, then the morestack call.
	//   0x4a0fa0 CMPQ SP, 0x10(R14); JBE 0x4a0fca
	//   0x4a0fa6 PUSHQ BP
	//   0x4a0fa7 MOVQ SP, BP; SUBQ $0x10, SP; ...; CALL main.leaf
	//   0x4a0fbe ADDQ $0x10, SP; 0x4a0fc2 POPQ BP; 0x4a0fc3 RET
	//   0x4a0fc4 ADDQ $0x10, SP; 0x4a0fc8 POPQ BP; 0x4a0fc9 RET
	//   0x4a0fca MOVQ AX, 0x8(SP); CALL runtime.morestack_noctxt; ...; JMP main.small
	name:  "go1.26 PUSHQ BP",
	arch:  AMD64,
	entry: 0x4a0fa0,
	code:  "493b66107624554889e54883ec104883f80a7e10bb02000000e8c2ffffff4883c4105dc34883c4105dc34889442408e8ecc8fdff488b442408ebc5",
	sp:    []SPRange{{0x4a0fa0, 0x4a0fa7, 0}, {0x4a0fa7, 0x4a0fae, 8}, {0x4a0fae, 0x4a0fc2, 24}, {0x4a0fc2, 0x4a0fc3, 8}, {0x4a0fc3, 0x4a0fc4, 0}, {0x4a0fc4, 0x4a0fc8, 24}, {0x4a0fc8, 0x4a0fc9, 8}, {0x4a0fc9, 0x4a0fdb, 0}},
	want: Result{Kind: Described, Rules: []Rule{
		inReg(0x4a0fa0), saved(0x4a0fa7, -16), inReg(0x4a0fc3), saved(0x4a0fc4, -16), inReg(0x4a0fc9)}},
}, {
	// Go 1.19 main.small (fpprog): SUBQ $0x18, SP; MOVQ BP, 0x10(SP);
	// LEAQ 0x10(SP), BP, epilogues MOVQ 0x10(SP), BP; ADDQ $0x18, SP; RET.
	//   0x483f66 SUBQ $0x18, SP
	//   0x483f6a MOVQ BP, 0x10(SP)
	//   0x483f6f LEAQ 0x10(SP), BP; ...; JLE 0x483f8f; ...; CALL main.leaf
	//   0x483f85 MOVQ 0x10(SP), BP; 0x483f8a ADDQ $0x18, SP; 0x483f8e RET
	//   0x483f8f MOVQ 0x10(SP), BP; 0x483f94 ADDQ $0x18, SP; 0x483f98 RET
	//   0x483f99 MOVQ AX, 0x8(SP); NOPW; CALL runtime.morestack_noctxt; ...
	name:  "go1.19 MOVQ BP, fs-8(SP)",
	arch:  AMD64,
	entry: 0x483f60,
	code:  "493b661076334883ec1848896c2410488d6c24104883f80a7e15bb0200000090e8bbffffff488b6c24104883c418c3488b6c24104883c418c348894424086690e8fb6efdff488b442408ebb4",
	sp:    []SPRange{{0x483f60, 0x483f6a, 0}, {0x483f6a, 0x483f8e, 24}, {0x483f8e, 0x483f8f, 0}, {0x483f8f, 0x483f98, 24}, {0x483f98, 0x483fac, 0}},
	want: Result{Kind: Described, Rules: []Rule{
		inReg(0x483f60), saved(0x483f6f, -16), inReg(0x483f8a), saved(0x483f8f, -16), inReg(0x483f94)}},
}, {
	// Go 1.19 main.big (fpprog): a 10 KB frame, the stack check through
	// R12, and one epilogue.
	//   0x483fc0 MOVQ SP, R12; SUBQ $0x26a8, R12; JB; CMPQ R12, 0x10(R14); JBE 0x48408d
	//   0x483fda SUBQ $0x2728, SP
	//   0x483fe1 MOVQ BP, 0x2720(SP)
	//   0x483fe9 LEAQ 0x2720(SP), BP; ...; CALL main.small
	//   0x48407d MOVQ 0x2720(SP), BP; 0x484085 ADDQ $0x2728, SP; 0x48408c RET
	name:  "go1.19 large frame",
	arch:  AMD64,
	entry: 0x483fc0,
	code:  "4989e44981eca82600000f82bd0000004d3b66100f86b30000004881ec282700004889ac2420270000488dac2420270000440f117c2410488d7c2418b9700200004889c231c0f348ab31c0eb134889c3480fafc288441c10488d43010f1f4000483d881300007ce5488b5424104889942498130000488dbc24a0130000488d742418b970020000f348a531c031c9eb100fb694049813000048ffc04801d16690483d881300007ce848894c24084889c8e8ebfeffff488b4c24084801c8488bac24202700004881c428270000c34889442408e8096efdff488b4424080f1f4000e91bffffff",
	sp:    []SPRange{{0x483fc0, 0x483fe1, 0}, {0x483fe1, 0x48408c, 10024}, {0x48408c, 0x4840a5, 0}},
	want:  Result{Kind: Described, Rules: []Rule{inReg(0x483fc0), saved(0x483fe9, -16), inReg(0x484085)}},
}, {
	// Go 1.26 main.jump (fpprog): a switch through a jump table; the
	// eight targets are reached only through JMP 0(CX)(AX*8), each with
	// its own epilogue, and run in the frame.
	//   0x4a1eaa PUSHQ BP; MOVQ SP, BP; SUBQ $0x10, SP
	//   0x4a1ebc LEAQ table(IP), CX; 0x4a1ec3 JMP 0(CX)(AX*8)
	//   0x4a1ec6 MOVL $0x1, AX; CALL main.small; ADDQ $0x10, SP; POPQ BP; 0x4a1ed5 RET
	//   0x4a1ed6 ... (and so on for each case)
	name:  "go1.26 jump table",
	arch:  AMD64,
	entry: 0x4a1ea0,
	code:  "493b66100f86ae000000554889e54883ec104883f8070f878f000000488d0dfd210300ff24c1b801000000e8b0feffff4883c4105dc3b801000000bb07000000e87bfeffff4883c4105dc3b816000000e88bfeffff4883c4105dc3b803000000e8bbfeffff4883c4105dc3b8040000004889c3e848feffff4883c4105dc3b819000000e858feffff4883c4105dc3b8360000004883c4105dc3b8060000006690e83bfeffff4883c4105dc348c7c0ffffffff4883c4105dc348894424080f1f00e85bb9fdff488b442408e931ffffff",
	sp:    []SPRange{{0x4a1ea0, 0x4a1eab, 0}, {0x4a1eab, 0x4a1eb2, 8}, {0x4a1eb2, 0x4a1ed4, 24}, {0x4a1ed4, 0x4a1ed5, 8}, {0x4a1ed5, 0x4a1ed6, 0}, {0x4a1ed6, 0x4a1ee9, 24}, {0x4a1ee9, 0x4a1eea, 8}, {0x4a1eea, 0x4a1eeb, 0}, {0x4a1eeb, 0x4a1ef9, 24}, {0x4a1ef9, 0x4a1efa, 8}, {0x4a1efa, 0x4a1efb, 0}, {0x4a1efb, 0x4a1f09, 24}, {0x4a1f09, 0x4a1f0a, 8}, {0x4a1f0a, 0x4a1f0b, 0}, {0x4a1f0b, 0x4a1f1c, 24}, {0x4a1f1c, 0x4a1f1d, 8}, {0x4a1f1d, 0x4a1f1e, 0}, {0x4a1f1e, 0x4a1f2c, 24}, {0x4a1f2c, 0x4a1f2d, 8}, {0x4a1f2d, 0x4a1f2e, 0}, {0x4a1f2e, 0x4a1f37, 24}, {0x4a1f37, 0x4a1f38, 8}, {0x4a1f38, 0x4a1f39, 0}, {0x4a1f39, 0x4a1f49, 24}, {0x4a1f49, 0x4a1f4a, 8}, {0x4a1f4a, 0x4a1f4b, 0}, {0x4a1f4b, 0x4a1f56, 24}, {0x4a1f56, 0x4a1f57, 8}, {0x4a1f57, 0x4a1f6f, 0}},
	want: Result{Kind: Described, Rules: []Rule{
		inReg(0x4a1ea0), saved(0x4a1eab, -16),
		inReg(0x4a1ed5), saved(0x4a1ed6, -16), inReg(0x4a1eea), saved(0x4a1eeb, -16),
		inReg(0x4a1efa), saved(0x4a1efb, -16), inReg(0x4a1f0a), saved(0x4a1f0b, -16),
		inReg(0x4a1f1d), saved(0x4a1f1e, -16), inReg(0x4a1f2d), saved(0x4a1f2e, -16),
		inReg(0x4a1f38), saved(0x4a1f39, -16), inReg(0x4a1f4a), saved(0x4a1f4b, -16),
		inReg(0x4a1f57)}},
}, {
	// Go 1.26 main.index (fpprog): a bounds check's CALL runtime.panicIndex
	// falls into the next block, and CALL runtime.gopanic; NOPL falls into
	// the morestack block, which runs without the frame: the pcsp rows
	// show that gopanic does not return.
	//   0x4a216a PUSHQ BP; MOVQ SP, BP; SUBQ $0x38, SP; ...
	//   0x4a21ae ADDQ $0x38, SP; 0x4a21b2 POPQ BP; 0x4a21b3 RET
	//   0x4a21b4 CALL runtime.panicIndex
	//   0x4a21b9 LEAQ 0x18(SP), CX; ...; 0x4a2219 CALL runtime.gopanic; 0x4a221e NOPL
	//   0x4a221f MOVQ AX, 0x8(SP); ...; CALL runtime.morestack_noctxt; ...
	name:  "go1.26 calls that do not return",
	arch:  AMD64,
	entry: 0x4a2160,
	code:  "493b66100f86b5000000554889e54883ec3848894424484883ff647f3c48897c246048895c245048894424484889f8e8ecfbffff488b4c2450488b54246066904839d1760f488b4c2448480304d14883c4385dc3e827d4fdff488d4c2418440f1139440f117910488d0d52b4000048894c2418488d0d8615030048894c24204889f8e8d95bfdff488d0d72b6000048894c24284889442430488d442418bb020000004889d9e83682ffffe8315cfdff4889c3488d0507b40000e8426efdff90488944240848895c241048894c241848897c2420e888b6fdff488b442408488b5c2410488b4c2418488b7c2420e90fffffff",
	sp:    []SPRange{{0x4a2160, 0x4a216b, 0}, {0x4a216b, 0x4a2172, 8}, {0x4a2172, 0x4a21b2, 64}, {0x4a21b2, 0x4a21b3, 8}, {0x4a21b3, 0x4a21b4, 0}, {0x4a21b4, 0x4a221f, 64}, {0x4a221f, 0x4a2251, 0}},
	want: Result{Kind: Described, Rules: []Rule{
		inReg(0x4a2160), saved(0x4a216b, -16), inReg(0x4a21b3), saved(0x4a21b4, -16), inReg(0x4a221f)}},
}, {
	// Go 1.26 main.leaf (fpprog): IMULQ BX, AX; ADDQ $0x3, AX; RET.
	name:  "go1.26 frameless leaf",
	arch:  AMD64,
	entry: 0x4a0f80,
	code:  "480fafc34883c003c3",
	sp:    []SPRange{{0x4a0f80, 0x4a0f89, 0}},
	want:  Result{Kind: Frameless},
}, {
	// Go 1.26 runtime.mstart (asm, NOFRAME): MOVQ $0x0, BP; CALL
	// runtime.mstart0; RET. BP is set before anything saved it.
	name:  "runtime.mstart",
	arch:  AMD64,
	entry: 0x47d680,
	code:  "48c7c500000000e8743e0000c3",
	sp:    []SPRange{{0x47d680, 0x47d68d, 0}},
	want:  Result{Kind: Unrecognized, Reason: ReasonClobbered, PC: 0x47d680, Inst: "MOVQ $0x0, BP"},
}, {
	// Go 1.26 gogo (asm): MOVQ DX, FS:-0x8; MOVQ DX, R14; MOVQ 0(BX), SP;
	// ... a switch to another goroutine's stack.
	name:  "gogo",
	arch:  AMD64,
	entry: 0x47c9a0,
	code:  "6448891425f8ffffff4989d6488b23488b5318488b6b2848c7030000000048c743180000000048c7432800000000488b5b08ffe3",
	sp:    []SPRange{{0x47c9a0, 0x47c9d4, 0}},
	want:  Result{Kind: Unrecognized, Reason: ReasonSPWrite, PC: 0x47c9ac, Inst: "MOVQ 0(BX), SP"},
}, {
	// Synthetic, VZEROUPPER (c5 f8 77, as in internal/bytealg's AVX2
	// loops) then RET: x86asm v0.33.0 takes the VZEROUPPER to be 4 or
	// 5 bytes long and would swallow the RET.
	name:  "VZEROUPPER; RET",
	arch:  AMD64,
	entry: 0x1000,
	code:  "c5f877c3",
	sp:    []SPRange{{0x1000, 0x1004, 0}},
	want:  Result{Kind: Frameless},
}, {
	// Synthetic, NOPL; ADCXQ 0(AX), R10 (66 4c 0f 38 f6 10, as in
	// math/big.addMulVVWW); RET: x86asm does not know ADCX.
	name:   "ADCX",
	arch:   AMD64,
	entry:  0x2000,
	code:   "90664c0f38f610c3",
	sp:     []SPRange{{0x2000, 0x2008, 0}},
	errPC:  0x2001,
	errSub: "0x2001",
}, {
	// Synthetic: PUSHQ BP; TESTQ AX, AX; JE 1f; POPQ BP; 1: RET. The
	// RET is reached with BP saved and with it popped.
	name:  "two paths, two places",
	arch:  AMD64,
	entry: 0x3000,
	code:  "554885c074015dc3",
	sp:    []SPRange{{0x3000, 0x3001, 0}, {0x3001, 0x3007, 8}, {0x3007, 0x3008, 0}},
	want:  Result{Kind: Unrecognized, Reason: ReasonConflict, PC: 0x3007, Inst: "RET"},
}, {
	// Synthetic: PUSHQ BP; MOVQ SP, BP; POPQ AX; RET: returns with BP
	// pointing into its own frame.
	name:  "returns without restoring BP",
	arch:  AMD64,
	entry: 0x4000,
	code:  "554889e558c3",
	sp:    []SPRange{{0x4000, 0x4001, 0}, {0x4001, 0x4005, 8}, {0x4005, 0x4006, 0}},
	want:  Result{Kind: Unrecognized, Reason: ReasonNotRestored, PC: 0x4005, Inst: "RET"},
}, {
	// Synthetic: PUSHQ BP; ADDQ $0x10, SP (the pcsp rows say 8 more);
	// POPQ BP; RET.
	name:  "pcsp rows that do not follow SP",
	arch:  AMD64,
	entry: 0x5000,
	code:  "554883c4105dc3",
	sp:    []SPRange{{0x5000, 0x5001, 0}, {0x5001, 0x5005, 8}, {0x5005, 0x5006, 8}, {0x5006, 0x5007, 0}},
	want:  Result{Kind: Unrecognized, Reason: ReasonSPMismatch, PC: 0x5001, Inst: "ADDQ $0x10, SP"},
}}

func TestShapes(t *testing.T) {
	for _, c := range append(amd64Shapes, arm64Shapes...) {
		t.Run(c.arch.String()+"/"+c.name, func(t *testing.T) {
			code, err := hex.DecodeString(c.code)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Analyze(c.arch, code, c.entry, c.sp)
			if c.errPC != 0 {
				var de *DecodeError
				if !errors.As(err, &de) || de.PC != c.errPC || !strings.Contains(err.Error(), c.errSub) {
					t.Fatalf("got %v, %v; want a DecodeError at %#x", got, err, c.errPC)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%v\n(-want +got):\n%s", got, diff)
			}
		})
	}
}
