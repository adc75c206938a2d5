// Package goprologue finds where a Go function keeps its caller's frame
// pointer, which SFrame records and Go's tables do not: .gopclntab's
// pcsp table gives the stack pointer (hence the CFA and the return
// address), but the frame pointer's save and restore are only in the
// instructions. Analyze decodes them with golang.org/x/arch (x86asm,
// arm64asm) and follows every path from the entry; it uses the pcsp rows
// only for where SP is, never to guess the frame pointer.
//
// A Rule at PC holds for the instructions from PC (before the one at PC
// runs) up to the next rule. The CFA is the SP at the entry plus 8 on
// amd64 (above the return address) and the SP at the entry on arm64.
//
// # What is followed
//
// Each instruction's effect is taken from its decoding: a store of the
// frame pointer register (BP, R29) to a stack address known from SP
// and the pcsp rows (or, on arm64, from a register set from SP and
// constants in the same block) saves it; a load back from that slot
// restores it; any other write to it while it is not saved loses it.
// Branches, calls, returns, traps and jumps through registers shape the
// paths. Besides:
//
//   - A call returns only if the pcsp rows leave room for the frame where
//     it returns (past NOPs): Go puts the morestack block right after a
//     CALL runtime.gopanic; NOPL that ends the body.
//   - Instructions no path reaches (the deferreturn block, run after a
//     recovered panic; a jump table's targets) run in the frame when the
//     pcsp rows leave room for it, else without; paths from them end
//     where they meet others.
//   - Bytes past the pcsp rows (padding) must not be reached.
//   - While the frame pointer is saved, every constant move of SP must
//     match the pcsp rows.
//
// # Shapes recognised
//
// amd64, the caller's frame pointer at CFA-16 in every shape:
//
//   - Go 1.26 (and the assembler's frames): PUSHQ BP; MOVQ SP, BP;
//     SUBQ $n, SP, saved from the MOVQ; epilogues ADDQ $n, SP; POPQ BP;
//     RET, in the register from the RET.
//   - Go 1.19: SUBQ $fs, SP; MOVQ BP, fs-8(SP); LEAQ fs-8(SP), BP, saved
//     from the LEAQ; epilogues MOVQ fs-8(SP), BP; ADDQ $fs, SP; RET, in
//     the register from the ADDQ.
//   - Both: the stack check (CMPQ SP, 16(R14); JBE, or through R12 for
//     large frames) and the morestack block after the body run without
//     the frame; several epilogues each followed by code in the frame.
//
// arm64, the caller's frame pointer at CFA-fs-8 (just below the SP of
// the body, fs being the frame size), varying per function:
//
//   - MOVD.W R30, -fs(RSP); MOVD R29, -8(RSP); SUB $8, RSP, R29, saved
//     from the SUB; epilogues MOVD -8(RSP), R29; MOVD.P fs(RSP), R30
//     (Go 1.26) or LDP -8(RSP), (R29, R30); ADD $fs, RSP, RSP (Go 1.19).
//   - Large frames: MOVD $fs, R27; SUB R27, RSP, R20 (or SUB $fs, RSP,
//     R20); STP (R29, R30), -8(R20); MOVD R20, RSP, saved from just after
//     the STP; epilogues LDP -8(RSP), (R29, R30) then MOVD $fs, R27; ADD
//     R27, RSP, RSP (Go 1.26) or two ADDs (Go 1.19, whose pcsp rows lag
//     the first: allowed once the frame pointer is restored).
//   - Leaf functions with a frame: ADD $fs-8, RSP, R29; ADD $fs, RSP, RSP
//     (Go 1.26) or ADD $fs, RSP, RSP; SUB $8, RSP, R29 (Go 1.19) set R29
//     to CFA-8, which is the caller's frame pointer by Go's convention
//     (a caller's R29 is its SP less 8); taken as the restore.
//
// Frameless: a function that never saves and never writes the frame
// pointer (leaf functions, NOFRAME assembly) keeps it in its register.
//
// # Not followed
//
// An Unrecognized result names a reason (Reason* constants) and the
// instruction. In Go 1.19 and 1.26 binaries they are all assembly: stack
// switches and realignment (gogo, mcall, morestack, systemstack,
// asmcgocall, time.now's VDSO call, rt0_go, sigfwd: fp-sp-write),
// runtime.mstart setting BP to 0 (fp-clobbered), mcall's jump off its
// frame (fp-not-restored). Reachable instructions that do not decode give
// a *DecodeError: x86asm v0.33.0 lacks ADX (math/big.addMulVVWW,
// crypto/internal/fips140/bigmod) and gives no opcode for ADCX, which is
// taken as an error. Two gaps of x/arch v0.33.0 are worked around:
// x86asm gives VZEROUPPER 2 bytes too many, and arm64asm does not decode
// the ARMv8.1 atomics, CAS or MSR DIT, whose written registers are taken
// from their encoding class (see rawARM64).
//
// The go command of Go 1.26.8 (14,864 functions): 12,471 Go functions
// described, 2,145 frameless, none unrecognized; of its 248 assembly
// functions, 70 described, 157 frameless, 16 unrecognized, 5 undecodable.
// Every Go function of test programs built by Go 1.26 and 1.19 for
// amd64 and arm64, optimized or not, is described or frameless
// (TestGoBinaries), and the rules hold at run time under gdb (TestGDB).
package goprologue
