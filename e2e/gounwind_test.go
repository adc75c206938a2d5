package e2e

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// goSample is one stop of the Go program under gdb
// (testdata/gounwind/step.py).
type goSample struct {
	sample
	// GDB is gdb's backtrace: each frame's PC and SP (the CFA of the
	// frame it called).
	GDB []struct {
		PC, SP uint64
		Name   string
	} `json:"gdb"`
	StackLo     uint64 `json:"stack_lo"` // the goroutine's stack
	StackHi     uint64 `json:"stack_hi"`
	StackGuard0 uint64 `json:"stackguard0"`
}

// goFrame is one frame of a walk: its PC and SP.
type goFrame struct{ PC, SP uint64 }

// stackPreempt is g.stackguard0 when the runtime asks a goroutine to
// yield at its next stack check (runtime/stack.go).
const stackPreempt = 0xfffffffffffffade

// goTally counts what one Go's run compared.
type goTally struct {
	stops, stacks, frames int
	// fps: caller frames whose frame pointer the walk recovered and
	// checked against the one the frame had when it made its call.
	fps int
	// pastGoexit: gdb's backtrace has one more frame, at PC 0, past
	// runtime.goexit, where the SFrame walk ends (check).
	pastGoexit int
	// spWrite: stops at runtime.morestack's first instruction, where
	// the walk ends and gdb's goes on (check).
	spWrite int
	// Stops at morestack's first instruction, by why the stack check
	// failed: the stack was too small, or the runtime asked the
	// goroutine to yield.
	grow, yield int
}

// fpKey is a call, by its return address and its SP as a distance below
// the stack's top (which morestack keeps when it moves the stack).
type fpKey struct{ ret, depth uint64 }

// goChecker checks the stops of one run, in order.
type goChecker struct {
	t       *testing.T
	openObj func(string) *object
	n       goTally
	// callerFP is the frame pointer of each call's caller, as the
	// callee's first instruction has it (stackRel), for the calls of the
	// trace being checked.
	callerFP map[fpKey]uint64
	funcs    map[*object]map[uint64]bool // function entries
}

// TestUnwindGoStacks is the gdb stepping check for Go: a Go program built
// with DWARF (so that gdb unwinds with Go's own .debug_frame) is
// converted, its .sframe coming from .gopclntab, and run under gdb, which
// stops at every instruction of a call chain of functions of different
// shapes (no frame, a small one, a large one whose stack check is the
// large-frame form, a method wrapper called through an interface, a
// closure) on the main goroutine and on another, through each one's
// morestack block (the stepper asks the goroutine to yield at its first
// call of each), and where a recursion's and a new goroutine's stack
// checks fail for want of stack (testdata/gounwind). Each captured stack
// is walked with SFrame alone and compared frame by frame (PC and SP)
// with gdb's backtrace, and each caller's frame pointer with the one its
// call left; the walk must end at runtime.goexit, which the table marks
// outermost. With the Go running the tests and each older one installed
// (gobuild.OldGos).
func TestUnwindGoStacks(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("runs x86-64 Linux programs under gdb")
	}
	gdb := need(t, "gdb")
	need(t, "go")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata/gounwind")
	prog, err := os.ReadFile(filepath.Join(src, "main.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, goCmd := range append([]string{""}, gobuild.OldGos()...) {
		c := gobuild.Config{Go: goCmd, GOARCH: "amd64", Files: map[string]string{"main.go": string(prog)}}
		t.Run(c.String(), func(t *testing.T) {
			v := gobuild.Version(goCmd)
			if goMinor(v) < 17 {
				t.Skipf("%s: the stepper follows the goroutine by R14, its g register in Go's register ABI (Go 1.17 on)", v)
			}
			dir := filepath.Join(tmp, c.String())
			os.MkdirAll(dir, 0o755)
			bin := gobuild.Build(t, dir, c)
			out := bin + ".sf"
			if b, err := exec.Command(c2s, "-q", bin, "-o", out).CombinedOutput(); err != nil {
				t.Fatalf("cfi2sframe: %v\n%s", err, b)
			}
			// gdb unwinds with Go's own call-frame information.
			if ef, err := elf.Open(out); err != nil || ef.Section(".debug_frame") == nil {
				t.Fatalf("%s: no .debug_frame (%v)", out, err)
			} else {
				ef.Close()
			}
			samples := runGoStepper(t, gdb, filepath.Join(src, "step.py"), out, dir)
			ck := &goChecker{t: t, openObj: objectOpener(t), funcs: map[*object]map[uint64]bool{}}
			for i := range samples {
				if i == 0 || traceOf(samples[i-1].Tag) != traceOf(samples[i].Tag) {
					ck.callerFP = map[fpKey]uint64{}
				}
				last := i+1 == len(samples) || traceOf(samples[i+1].Tag) != traceOf(samples[i].Tag)
				ck.check(&samples[i], last)
			}
			n := ck.n
			t.Logf("%s: %d stops, %d stacks compared, %d frames (%d frame pointers); gdb past runtime.goexit: %d, on from runtime.morestack: %d; morestack: %d to grow the stack, %d to yield",
				v, n.stops, n.stacks, n.frames, n.fps, n.pastGoexit, n.spWrite, n.grow, n.yield)
			// Two stacks grow (main.b's frame on the new goroutine's
			// stack, main.rec's recursion), and step.py asks the
			// goroutine to yield at the first call of each function
			// with a stack check.
			if n.stops < 300 || n.grow < 2 || n.yield < 5 {
				t.Errorf("%d stops, %d at morestack to grow the stack, %d to yield; want 300 or more, 2 or more, 5 or more", n.stops, n.grow, n.yield)
			}
		})
	}
}

// runGoStepper runs the converted program bin under gdb, which steps
// through three traces (step.py): main.a on the main goroutine,
// main.worker on another, and main.rec from where its stack check fails
// for want of stack. It returns the stops, in order.
func runGoStepper(t *testing.T, gdb, script, bin, dir string) []goSample {
	t.Helper()
	dump := filepath.Join(dir, "dump.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gdb, "-batch", "-nx", "-iex", "set auto-load off",
		"-ex", "source "+script,
		"-ex", "set pagination off",
		// gdb's main for Go is main.main; the walks go on to
		// runtime.goexit.
		"-ex", "set backtrace past-main on", "-ex", "set backtrace past-entry on",
		"-ex", "handle SIGURG nostop noprint pass",
		"-ex", "break *'main.a'", "-ex", "run", "-ex", "python trace('main')",
		"-ex", "break *'main.worker'", "-ex", "continue", "-ex", "python trace('worker')",
		"-ex", "python break_at_overflow('main.rec')", "-ex", "continue", "-ex", "python trace('rec', False)",
		"-ex", "kill", bin)
	// No asynchronous preemption: its signal would take the stepped
	// goroutine elsewhere.
	cmd.Env = append(os.Environ(), "GOUNWIND_DUMP="+dump, "GODEBUG=asyncpreemptoff=1")
	b, err := cmd.CombinedOutput()
	done, _ := os.ReadFile(dump + ".done")
	if got := strings.Fields(string(done)); !cmp.Equal(got, []string{"main", "worker", "rec"}) {
		t.Fatalf("gdb ended the traces %q, want main, worker, rec (%v)\n%s", got, err, b)
	}
	f, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var samples []goSample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var s goSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		samples = append(samples, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples
}

// goMinor is N of "go version go1.N.x ...", 0 if none.
func goMinor(version string) int {
	_, v, _ := strings.Cut(version, " go1.")
	i := strings.IndexFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if i >= 0 {
		v = v[:i]
	}
	n, _ := strconv.Atoi(v)
	return n
}

// traceOf is the trace a stop's tag names ("worker+12/runtime.morestack").
func traceOf(tag string) string {
	name, _, _ := strings.Cut(tag, "+")
	return name
}

// goChains are the functions every walk of a trace must pass, in order:
// the stepped function's callers, to the goroutine's first frame. The last
// stop of a trace, in the caller after the return, drops the first.
var goChains = map[string][]string{
	"main":   {"main.a", "main.main", "runtime.main", "runtime.goexit"},
	"worker": {"main.worker", "runtime.goexit"},
	"rec":    {"main.rec", "main.deep", "runtime.goexit"},
}

// check walks s with SFrame alone and compares the walk with gdb's
// backtrace, frame by frame, and the frame pointers it recovers with the
// ones the calls left; last says s is its trace's last stop.
func (ck *goChecker) check(s *goSample, last bool) {
	t, n := ck.t, &ck.n
	t.Helper()
	n.stops++
	if strings.Contains(s.Tag, "/runtime.morestack") {
		if s.StackGuard0 == stackPreempt {
			n.yield++
		} else {
			n.grow++
		}
	}
	ours, names, why := ck.walk(s)
	if strings.HasSuffix(s.Tag, "/runtime.morestack") && why == unwind.ReasonOutermost && len(ours) == 1 &&
		len(s.GDB) > 1 && (goFrame{s.GDB[0].PC, s.GDB[0].SP}) == ours[0].goFrame {
		// A closure's stack check calls runtime.morestack itself (the
		// others call morestack_noctxt, which jumps there). morestack
		// switches SP to the thread's stack, which no pcsp table can
		// say (SPWrite), so our table marks it outermost at every PC
		// (cfi/gosection.go), as Go's own traceback stops at such
		// functions (runtime/traceback.go); gdb, with Go's
		// .debug_frame, unwinds its first instruction, before the
		// switch, where SP is still the goroutine's.
		n.spWrite++
		return
	}
	chain := goChains[traceOf(s.Tag)]
	if last {
		chain = chain[1:]
	}
	if why != unwind.ReasonOutermost || !subsequence(names, chain) || names[len(names)-1] != "runtime.goexit" {
		t.Errorf("%s (pc %#x): walk %v stopped: %v; want %v in order, ending at runtime.goexit", s.Tag, s.Regs["rip"], names, why, chain)
		return
	}
	var theirs, mine []goFrame
	for _, f := range s.GDB {
		theirs = append(theirs, goFrame{f.PC, f.SP})
	}
	for _, f := range ours {
		mine = append(mine, f.goFrame)
	}
	k := min(len(mine), len(theirs))
	if diff := cmp.Diff(theirs[:k], mine[:k]); diff != "" || len(theirs) < len(mine) {
		t.Errorf("%s (pc %#x): SFrame walk %v differs from gdb's backtrace %v (-gdb +sframe):\n%s", s.Tag, s.Regs["rip"], names, gdbNames(s), diff)
		return
	}
	n.stacks++
	n.frames += len(mine)
	switch extra := theirs[k:]; {
	case len(extra) == 0:
	case len(extra) == 1 && extra[0].PC == 0:
		// Go's .debug_frame does not mark runtime.goexit outermost: its
		// FDE has the return address at CFA-8 like any other, so gdb
		// reads the word above a goroutine's first frame, 0, as
		// goexit's return address, shows a frame at PC 0 and stops
		// there. Our table marks goexit outermost (cfi/gosection.go),
		// and the walk ends there.
		n.pastGoexit++
	default:
		t.Errorf("%s (pc %#x): gdb's backtrace %v goes on past the SFrame walk's end %v: %#x", s.Tag, s.Regs["rip"], gdbNames(s), names, extra)
	}
	ck.checkFPs(s, ours, names)
}

// checkFPs checks the frame pointer the walk recovered for each caller
// frame against the one the frame had when it made its call. gdb cannot
// say (Go's .debug_frame has no rule for RBP), but the stops can: at a
// callee's first instruction RBP is still the caller's, so it is noted
// there (callerFP) for that call, and every later stop where the call is
// still on the stack must recover it.
func (ck *goChecker) checkFPs(s *goSample, ours []walkedFrame, names []string) {
	sp, rbp := s.Regs["rsp"], s.Regs["rbp"]
	if ours[0].entry {
		ret, _ := (&stackMem{base: s.Stack, b: mustHex(ck.t, s.Mem)}).ReadWord(sp)
		ck.callerFP[fpKey{ret, s.StackHi - (sp + 8)}] = stackRel(rbp, s)
	}
	for i, f := range ours[1:] {
		want, ok := ck.callerFP[fpKey{f.PC, s.StackHi - f.SP}]
		if !ok {
			continue
		}
		if !f.fpKnown || stackRel(f.fp, s) != want {
			ck.t.Errorf("%s (pc %#x): frame %d (%s, pc %#x) recovers frame pointer %s (known: %v); its call left %s",
				s.Tag, s.Regs["rip"], i+1, names[i+1], f.PC, relString(stackRel(f.fp, s)), f.fpKnown, relString(want))
			continue
		}
		ck.n.fps++
	}
}

// stackRel is v as a distance below the stack's top when it is an
// address in the goroutine's stack (morestack moves the stack and the
// frame pointers into it, keeping that distance), with the top bit set;
// else v.
func stackRel(v uint64, s *goSample) uint64 {
	if s.StackLo <= v && v <= s.StackHi {
		return 1<<63 | (s.StackHi - v)
	}
	return v
}

func relString(v uint64) string {
	if v&(1<<63) != 0 {
		return fmt.Sprintf("stack top-%#x", v&^(1<<63))
	}
	return fmt.Sprintf("%#x", v)
}

func gdbNames(s *goSample) []string {
	var names []string
	for _, f := range s.GDB {
		names = append(names, f.Name)
	}
	return names
}

// walkedFrame is one frame of a walk with SFrame.
type walkedFrame struct {
	goFrame
	fp      uint64 // the frame pointer the walk recovered
	fpKnown bool
	entry   bool // PC is a function's first instruction (the topmost frame only)
}

// walk walks s's stack with SFrame alone: each frame, the symbol of each
// PC, and why the walk stopped.
func (ck *goChecker) walk(s *goSample) ([]walkedFrame, []string, unwind.Reason) {
	t := ck.t
	t.Helper()
	u, fr, objOf := sampleUnwinder(t, &s.sample, ck.openObj)
	var frames []walkedFrame
	var names []string
	for len(frames) < 64 {
		sp, _ := fr.Reg(arch.AMD64.SP())
		fp, ok := fr.Reg(arch.AMD64.FP())
		w := walkedFrame{goFrame: goFrame{fr.PC, sp}, fp: fp, fpKnown: ok}
		pc := fr.PC - uint64(btoi(!fr.Top))
		name := "?"
		if m := u.Space.Find(pc); m != nil {
			o := objOf[m.Obj]
			// The symbol of an assembly function is its ABI0 name.
			name = strings.TrimSuffix(o.sym(pc-m.Bias), ".abi0")
			w.entry = fr.Top && ck.funcEntries(o)[pc-m.Bias]
		}
		frames = append(frames, w)
		names = append(names, name)
		why, m := u.Step(&fr)
		if why == unwind.ReasonOutermost && m != nil {
			// The unwinder also ends a walk at a return address of 0,
			// which a goroutine's first frame finds above it; the walk
			// must end because the table marks the frame outermost.
			if r, err := m.Table.Lookup(pc - m.Bias); err != nil || !r.RAUndefined {
				t.Errorf("%s: the walk ends at %s (pc %#x), whose row %+v (%v) is not outermost", s.Tag, name, fr.PC, r, err)
			}
		}
		if why != unwind.ReasonOK {
			return frames, names, why
		}
	}
	return frames, names, unwind.ReasonOK
}

// funcEntries are the addresses of o's function symbols.
func (ck *goChecker) funcEntries(o *object) map[uint64]bool {
	if m, ok := ck.funcs[o]; ok {
		return m
	}
	m := map[uint64]bool{}
	syms, _ := o.elf.Symbols()
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			m[s.Value] = true
		}
	}
	ck.funcs[o] = m
	return m
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
