package codeentry

import (
	"debug/elf"
	"encoding/binary"
	"sort"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// A linear sweep decodes each text range from its start, one instruction
// after the other. On AArch64 every word is an instruction (but for the
// $d data ranges, skipped). On x86-64 a sweep that decodes data as code
// can run out of step with the real instructions for a few bytes; what
// it finds is used so that a mistake costs an entry, not a wrong one:
// a call target counts only where the sweep itself started an
// instruction (a call found in out-of-step bytes rarely targets one),
// and jumps only take candidates away (RejectJumpTarget). The risk left:
// a "call" decoded from data (GCC puts none in .text; hand-written
// assembly may) whose target happens to be an instruction start.

// insn is what the sweep needs of one instruction.
type insn struct {
	len    int
	pad    bool   // padding: nop forms, int3, ud2; AArch64 nop, udf
	stop   bool   // no path runs on to the next instruction
	call   uint64 // a direct call's target
	jump   uint64 // a direct jump's or branch's target
	isCall bool
	isJump bool
	endbr  bool // endbr64 or endbr32
	// Addresses the instruction holds (refs.go judges them): lea is an
	// x86-64 RIP-relative lea's target, imm a mov immediate's value (a
	// non-PIE's absolute address), table the displacement of an
	// absolute memory operand indexed by 8 (a non-PIC jump table's
	// base); adrp and add are the halves of an AArch64 address (adrp:
	// the page, in register reg; add: reg+imm into dst).
	lea, imm, table uint64
	a64             a64Half
	// data is the address a memory operand names (RIP-relative, or an
	// absolute displacement): what dataRefs gathers.
	data uint64
}

// padCand is the first instruction after a run of padding.
type padCand struct {
	addr     uint64
	run      int    // bytes of padding before it
	predStop bool   // the instruction before the run ends its path, or there is none
	predCall uint64 // the instruction before the run calls this (0: it does not)
}

// sweepResult is what the sweep found.
type sweepResult struct {
	m      elf.Machine
	img    *image
	starts [][]uint64 // by text range: a bit per byte where an instruction starts
	calls  map[uint64]bool
	jumps  map[uint64]bool
	pads   []padCand
	// stopped has a bit per instruction start (as starts) whose previous
	// instruction, padding aside, ends its path.
	stopped [][]uint64
	// refs are the addresses the code takes (refs.go), tables the bases
	// of the non-PIC jump tables it indexes.
	refs, tables map[uint64]bool
	padAt        map[uint64]int // pads by address, made when first needed
	// callNext counts calls to the next instruction (not functions).
	callNext int
	// data are the addresses instructions name (memory operands, mov
	// immediates; x86-64), unsorted, for dataRefs.
	data []uint64
}

// sweep decodes every text range but the PLTs and data, in parts on
// all CPUs (sweeppar.go), with the result of one decode from each
// range's start.
func sweep(img *image, data []Span, m elf.Machine) *sweepResult {
	sw := newSweep(img, m)
	sw.sweepParts(data, partSize)
	return sw
}

// newSweep is a sweep of img that found nothing yet, with a bitmap for
// each range the sweep decodes.
func newSweep(img *image, m elf.Machine) *sweepResult {
	sw := &sweepResult{m: m, img: img, starts: make([][]uint64, len(img.text)),
		stopped: make([][]uint64, len(img.text)),
		calls:   map[uint64]bool{}, jumps: map[uint64]bool{}, refs: map[uint64]bool{}, tables: map[uint64]bool{}}
	for i, r := range img.text {
		if img.inPLT(r.addr) {
			continue
		}
		sw.starts[i] = make([]uint64, (len(r.data)+63)/64)
		sw.stopped[i] = make([]uint64, (len(r.data)+63)/64)
	}
	return sw
}

// sweepState is what the sweep carries from one instruction to the
// next: the padding run before it, whether the instruction before the
// run ends its path or calls (predCall), and AArch64's last adrp.
type sweepState struct {
	run      int
	predStop bool
	predCall uint64
	pair     a64Pair
}

// sweepOut is what a sweep found, in address order: the targets of
// calls and jumps, the addresses taken and tables read (noteRefs), the
// padding candidates, and the calls to the next instruction.
type sweepOut struct {
	calls, jumps, refs, tables []uint64
	data                       []uint64 // sweepResult.data
	pads                       []padCand
	callNext                   int
}

// step sweeps what is at offset off of range r (an instruction, or a
// byte or word that is data or does not decode) in state st, adding to
// out what it finds; it gives the next offset and whether an
// instruction starts at off, and whether its predecessor ended its path
// (stopped).
func (sw *sweepResult) step(r region, data []Span, off int, st *sweepState, out *sweepOut) (nextOff int, start, stopped bool) {
	decode := decodeAMD64
	skip := 1 // how far to move past bytes that do not decode
	if sw.m == elf.EM_AARCH64 {
		decode, skip = decodeARM64, 4
	}
	pc := r.addr + uint64(off)
	if inSpans(data, pc) {
		*st = sweepState{}
		return off + skip, false, false
	}
	in, ok := decode(r.data[off:], pc)
	if !ok {
		*st = sweepState{}
		return off + skip, false, false
	}
	stopped = st.predStop
	noteRefs(sw.m, &in, &st.pair, out)
	switch {
	case in.pad:
		st.run += in.len
	default:
		if st.run > 0 && sw.aligned(pc, st.run) {
			out.pads = append(out.pads, padCand{addr: pc, run: st.run, predStop: st.predStop, predCall: st.predCall})
		}
		st.run = 0
		st.predStop, st.predCall = in.stop, 0
		if in.isCall {
			st.predCall = in.call
			if in.call == pc+uint64(in.len) {
				out.callNext++
			} else {
				out.calls = append(out.calls, in.call)
			}
		}
		if in.isJump {
			out.jumps = append(out.jumps, in.jump)
		}
	}
	return off + in.len, true, stopped
}

// aligned says a padding run of run bytes ending at pc looks like the
// alignment of a function: at least 2 bytes (one word on AArch64) up to
// a 16-byte (AArch64: 8-byte) boundary.
func (sw *sweepResult) aligned(pc uint64, run int) bool {
	if sw.m == elf.EM_AARCH64 {
		return run >= 4 && pc%8 == 0
	}
	return run >= 2 && pc%16 == 0
}

// decodeAMD64 decodes the instruction at b; ok is false for bytes that
// do not decode. The common forms are read by isa.QuickAMD64, the rest
// by x86asm (decodeAMD64Full), with the same result.
func decodeAMD64(b []byte, pc uint64) (insn, bool) {
	q, ok := isa.QuickAMD64(b)
	if !ok {
		return decodeAMD64Full(b, pc)
	}
	out := insn{len: q.Len}
	target := pc + uint64(q.Len) + uint64(q.Rel)
	switch q.Kind {
	case isa.QNop:
		out.pad = true
	case isa.QInt3:
		out.pad, out.stop = true, true
	case isa.QRet:
		out.stop = true
	case isa.QJump:
		out.stop, out.isJump, out.jump = true, true, target
	case isa.QJcc:
		out.isJump, out.jump = true, target
	case isa.QCall:
		out.isCall, out.call = true, target
	}
	return out, true
}

// decodeAMD64Full is decodeAMD64 by x86asm alone.
func decodeAMD64Full(b []byte, pc uint64) (insn, bool) {
	if len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb) {
		// endbr64/endbr32: x86asm v0.30.0 gives them no opcode and a
		// length of 1.
		return insn{len: 4, endbr: true}, true
	}
	in, err := isa.AMD64(b)
	if err != nil || in.Op == 0 {
		return insn{}, false
	}
	n := isa.LenAMD64(in, b)
	if n <= 0 {
		return insn{}, false
	}
	out := insn{len: n}
	amd64Refs(&in, pc, &out)
	switch in.Op {
	case x86asm.NOP:
		out.pad = true
	case x86asm.INT:
		out.pad = n == 1 && b[0] == 0xcc
		out.stop = out.pad
	case x86asm.UD2, x86asm.UD1, x86asm.HLT, x86asm.RET:
		out.stop = true
		out.pad = in.Op == x86asm.UD2
	case x86asm.JMP:
		out.stop = true
		if rel, ok := in.Args[0].(x86asm.Rel); ok {
			out.isJump, out.jump = true, pc+uint64(n)+uint64(int64(rel))
		}
	case x86asm.CALL:
		if rel, ok := in.Args[0].(x86asm.Rel); ok {
			out.isCall, out.call = true, pc+uint64(n)+uint64(int64(rel))
		}
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JNE,
		x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JO, x86asm.JNO,
		x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS, x86asm.JCXZ, x86asm.JECXZ,
		x86asm.JRCXZ, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		if rel, ok := in.Args[0].(x86asm.Rel); ok {
			out.isJump, out.jump = true, pc+uint64(n)+uint64(int64(rel))
		}
	}
	return out, true
}

// decodeARM64 decodes the word at b.
func decodeARM64(b []byte, pc uint64) (insn, bool) {
	if len(b) < 4 {
		return insn{}, false
	}
	if binary.LittleEndian.Uint32(b) == 0 {
		// udf #0: what the linker fills gaps with.
		return insn{len: 4, pad: true, stop: true}, true
	}
	in, err := isa.ARM64(b[:4])
	if err != nil {
		return insn{}, false
	}
	out := insn{len: 4}
	arm64Refs(&in, pc, &out)
	switch in.Op {
	case arm64asm.NOP:
		out.pad = true
	case arm64asm.RET, arm64asm.BR, arm64asm.BRK, arm64asm.HLT, arm64asm.ERET:
		out.stop = true
	case arm64asm.B:
		// B and B.cond share the op; B.cond has the condition first.
		rel, ok := in.Args[0].(arm64asm.PCRel)
		if !ok {
			rel, ok = in.Args[1].(arm64asm.PCRel)
		} else {
			out.stop = true
		}
		if ok {
			out.isJump, out.jump = true, pc+uint64(int64(rel))
		}
	case arm64asm.BL:
		if rel, ok := in.Args[0].(arm64asm.PCRel); ok {
			out.isCall, out.call = true, pc+uint64(int64(rel))
		}
	case arm64asm.CBZ, arm64asm.CBNZ, arm64asm.TBZ, arm64asm.TBNZ:
		for _, a := range in.Args {
			if rel, ok := a.(arm64asm.PCRel); ok {
				out.isJump, out.jump = true, pc+uint64(int64(rel))
			}
		}
	}
	return out, true
}

// isStart says the sweep started an instruction at addr.
func (sw *sweepResult) isStart(addr uint64) bool {
	i := sw.img.textAt(addr)
	if i < 0 || sw.starts[i] == nil {
		return false
	}
	off := addr - sw.img.text[i].addr
	return sw.starts[i][off/64]&(1<<(off%64)) != 0
}

// jumpedTo says a direct jump or branch targets addr.
func (sw *sweepResult) jumpedTo(addr uint64) bool { return sw.jumps[addr] }

// callEntries gives the call targets that are instruction starts (or in
// a PLT, which the collector counts as such and leaves out).
func (sw *sweepResult) callEntries(c *collector) {
	c.notes.Rejected[RejectNextInsn] += sw.callNext
	for t := range sw.calls {
		if !sw.isStart(t) && !sw.img.inPLT(t) {
			c.notes.Found[codeflow.FromCall]++
			c.notes.Rejected[RejectBoundary]++
			continue
		}
		c.add(t, 0, codeflow.FromCall)
	}
}

// padLen is the length of the padding instruction at b, 0 if it is not
// one.
func padLen(m elf.Machine, b []byte, pc uint64) int {
	decode := decodeAMD64
	if m == elf.EM_AARCH64 {
		decode = decodeARM64
	}
	in, ok := decode(b, pc)
	if !ok || !in.pad {
		return 0
	}
	return in.len
}

// gapEntries gives the first instruction past the padding at the start
// of each gap between described ranges in the text. With nothing
// described there are no gaps: each text range's start is then a weak
// (padding) candidate.
func (sw *sweepResult) gapEntries(c *collector, img *image, described []Span) {
	src := codeflow.FromGap
	if len(described) == 0 {
		src = codeflow.FromPadding
	}
	for _, r := range img.text {
		if img.inPLT(r.addr) {
			continue
		}
		lo := r.addr
		for lo < r.end() {
			// Skip the described ranges at lo, then find the gap's end.
			j := sort.Search(len(described), func(j int) bool { return described[j].Hi > lo })
			if j < len(described) && described[j].Lo <= lo {
				lo = described[j].Hi
				continue
			}
			hi := r.end()
			if j < len(described) && described[j].Lo < hi {
				hi = described[j].Lo
			}
			a := lo
			// At a range's start there is no code before to pad after:
			// a nop there is the function's first instruction (AArch64's
			// .init and .fini begin with one).
			for a < hi && a > r.addr {
				n := padLen(sw.m, r.data[a-r.addr:], a)
				if n == 0 {
					break
				}
				a += uint64(n)
			}
			if a < hi {
				c.add(a, 0, src)
			}
			lo = hi
		}
	}
}

// paddingEntries gives the instructions after alignment padding whose
// predecessor ends its path (returns, jumps, traps, or calls a function
// that does not return): code that runs into padding is a function that
// goes on past it (a loop head aligned), not the end of one.
func (sw *sweepResult) paddingEntries(c *collector, noret map[uint64]bool) {
	for _, p := range sw.pads {
		if !p.predStop && (p.predCall == 0 || !noret[p.predCall]) {
			c.notes.Found[codeflow.FromPadding]++
			c.notes.Rejected[RejectFallthrough]++
			continue
		}
		c.add(p.addr, 0, codeflow.FromPadding)
	}
}
