package codecheck

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// PaddingNeverRun are padding instructions (nop forms, int3; AArch64 nop,
// udf #0) after an instruction that ends its path (a jump, a return, a
// trap): no path runs them and no return address points at them, so
// they are counted apart from unreached code, and a row the analysis
// gives them (codeflow joins such padding into the Func around it, with
// the row of the instruction after) is not judged: the CFI's row there
// is the one before, which no unwinder can be asked for. The blind spot:
// a jump into such padding, which compilers do not emit.
const PaddingNeverRun = "padding, never run"

// padStop says what the instruction at b is to neverRun: padding, or an
// instruction that ends its path (no fall to the next).
func padStop(m elf.Machine, b []byte) (pad, stop bool) {
	switch m {
	case elf.EM_X86_64:
		if len(b) > 0 && b[0] == 0xcc {
			return true, false
		}
		in, err := isa.AMD64(b)
		if err != nil {
			return false, false
		}
		switch in.Op {
		case x86asm.NOP:
			return true, false
		case x86asm.JMP, x86asm.RET, x86asm.UD2, x86asm.HLT, x86asm.LJMP:
			return false, true
		}
	case elf.EM_AARCH64:
		if len(b) < 4 {
			return false, false
		}
		if binary.LittleEndian.Uint32(b) == 0 {
			return true, false
		}
		in, err := isa.ARM64(b[:4])
		if err != nil {
			return false, false
		}
		switch in.Op {
		case arm64asm.NOP:
			return true, false
		case arm64asm.BR, arm64asm.RET, arm64asm.BRK, arm64asm.HLT:
			return false, true
		case arm64asm.B: // B.cond has the condition first, B only the target
			_, uncond := in.Args[0].(arm64asm.PCRel)
			return false, uncond
		}
	}
	return false, false
}

// neverRun gives the PCs of pcs, the instruction starts of one run of
// code in address order, that are padding after an instruction that
// ends its path (PaddingNeverRun).
func neverRun(c *codeflow.Code, pcs []uint64) map[uint64]bool {
	var out map[uint64]bool
	stopped, prevEnd := false, uint64(0)
	for i, pc := range pcs {
		if i > 0 && pc != prevEnd {
			stopped = false // undecoded bytes between: nothing known
		}
		b := text(c, pc)
		prevEnd = pc + uint64(instLen(c.Machine, b))
		pad, stop := padStop(c.Machine, b)
		switch {
		case pad && stopped:
			if out == nil {
				out = map[uint64]bool{}
			}
			out[pc] = true
		case !pad:
			stopped = stop
		}
	}
	return out
}

// span is [lo, hi) with what covers it.
type span struct {
	lo, hi uint64
	what   string
}

// paint flattens spans into disjoint ones sorted by lo, the first given
// winning where two overlap.
func paint(in []span) []span {
	var out []span
	for _, s := range in {
		cut := []span{s}
		for _, o := range out {
			var next []span
			for _, c := range cut {
				if c.hi <= o.lo || c.lo >= o.hi {
					next = append(next, c)
					continue
				}
				if c.lo < o.lo {
					next = append(next, span{c.lo, o.lo, c.what})
				}
				if c.hi > o.hi {
					next = append(next, span{o.hi, c.hi, c.what})
				}
			}
			cut = next
		}
		out = append(out, cut...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].lo < out[j].lo })
	return out
}

func spanAt(spans []span, pc uint64) string {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].lo > pc }) - 1
	if i >= 0 && pc < spans[i].hi {
		return spans[i].what
	}
	return ""
}

// cover sorts every instruction start inside an FDE by what became of
// it: padding never run (whether a Func covers it or not), described by
// a Func, left out for a Skip's reason, unreached in a function a Func
// covers in part, or reached by nothing. A Function's PCs leave its
// never-run padding out.
func (res *Result) cover(c *codeflow.Code, refs []refFunc, funcs []codeflow.Func, name func(uint64) string) {
	var in []span
	for _, f := range funcs {
		in = append(in, span{f.Start, f.End, OutcomeDescribed})
	}
	// Skips in the order given: the first reason found for a byte holds.
	for _, s := range res.Skips {
		in = append(in, span{s.Start, s.End, string(s.Reason)})
	}
	spans := paint(in)
	for i := range refs {
		ref := &refs[i]
		bounds := make([]uint64, len(ref.rows))
		for j, r := range ref.rows {
			bounds[j] = r.loc
		}
		pcs, undecoded, _ := starts(c, ref.start, ref.end, bounds)
		res.Undecoded += undecoded
		pad := neverRun(c, pcs)
		fn := Function{Name: name(ref.start), Start: ref.start, End: ref.end, PCs: len(pcs) - len(pad)}
		left := map[string]int{}
		for _, pc := range pcs {
			if pad[pc] {
				res.Left[PaddingNeverRun]++
				continue
			}
			switch what := spanAt(spans, pc); what {
			case OutcomeDescribed:
				fn.Described++
			case "":
				left[""]++
			default:
				left[what]++
			}
		}
		for what, n := range left {
			if what == "" {
				what = OutcomeNoEntry
				if fn.Described > 0 {
					what = Unreached
				}
			}
			res.Left[what] += n
		}
		res.Covered += fn.PCs + len(pad)
		res.Described += fn.Described
		fn.Outcome = outcome(fn, left)
		res.Functions = append(res.Functions, fn)
	}
}

// outcome names what became of a function: described, partly, or the
// reason most of its instructions were left out for.
func outcome(fn Function, left map[string]int) string {
	switch {
	case fn.PCs > 0 && fn.Described == fn.PCs:
		return OutcomeDescribed
	case fn.Described > 0:
		return OutcomePartly
	}
	best, most := OutcomeNoEntry, 0
	for what, n := range left {
		if what != "" && (n > most || n == most && what < best) {
			best, most = what, n
		}
	}
	return best
}

// String is the result as a table, for t.Logf and a closing note.
func (r *Result) String() string {
	var b strings.Builder
	pct := func(n, of int) string {
		if of == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
	}
	fmt.Fprintf(&b, "%v: %d Funcs, %d instructions; judged %d (%d through the other pointer), wrong at %d PCs (%d fields)\n",
		r.Machine, r.Funcs, r.PCs, r.Judged, r.Cross, r.WrongPCs(), len(r.Wrong))
	for _, k := range sortedKeys(r.NotJudged) {
		fmt.Fprintf(&b, "  not judged: %-52s %d\n", k, r.NotJudged[k])
	}
	fmt.Fprintf(&b, "CFI covers %d instructions; described %d (%s)\n", r.Covered, r.Described, pct(r.Described, r.Covered))
	for _, k := range sortedKeys(r.Left) {
		fmt.Fprintf(&b, "  left out: %-20s %d\n", k, r.Left[k])
	}
	if r.Undecoded > 0 {
		fmt.Fprintf(&b, "  bytes not decoded (not counted): %d\n", r.Undecoded)
	}
	if len(r.Incomplete) > 0 {
		fmt.Fprintf(&b, "FDEs whose one CFI row ignores the code's pushes: %d, at", len(r.Incomplete))
		for _, a := range r.Incomplete {
			fmt.Fprintf(&b, " %#x", a)
		}
		b.WriteString("\n")
	}
	by := r.ByOutcome()
	fmt.Fprintf(&b, "functions: %d\n", len(r.Functions))
	for _, k := range sortedKeys(by) {
		fmt.Fprintf(&b, "  %-20s %d\n", k, by[k])
	}
	for _, f := range r.Functions {
		if f.Outcome != OutcomeDescribed {
			fmt.Fprintf(&b, "  %#x %-24s %s (%d of %d described)\n", f.Start, f.Name, f.Outcome, f.Described, f.PCs)
		}
	}
	for i, w := range r.Wrong {
		if i == 50 {
			fmt.Fprintf(&b, "  ... %d more wrong\n", len(r.Wrong)-i)
			break
		}
		fmt.Fprintf(&b, "  WRONG %#x %s: %s: ours %s, CFI %s\n", w.PC, w.Func, w.Field, w.Ours, w.CFI)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
