package goprologue

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gdbFuncs are the test program's functions whose rules the gdb test
// checks at run time. main.big's loops run thousands of times, so only
// its instructions near a rule's change, its calls and returns are
// watched; the others at every instruction.
var gdbFuncs = map[string]bool{
	"main.leaf": false, "main.small": false, "main.jump": false,
	"main.recovering": false, "main.recovering.func1": false,
	"main.index": false, "main.(*counter).add": false, "main.apply": false,
	"main.main.func1": false, "main.(*counter).add-fm": false,
	"main.main": false, "main.big": true,
}

// TestGDB runs the amd64 test program under gdb with a breakpoint on the
// watched instructions. At a function's entry it notes BP, the caller's
// frame pointer; at every other watched instruction, where the rules say
// the frame pointer is saved, the word at CFA+offset (CFA being SP plus
// the pcsp delta plus 8) must be that value, and where they say it is in
// its register, BP must be. The deferreturn block (a recovered panic)
// and the targets of the jump table run too.
func TestGDB(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gdb")
	}
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Skip("gdb is not installed: the run-time check of the rules is skipped")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("the gdb check runs the amd64 program natively")
	}
	for _, goCmd := range toolchains(t) {
		for _, noOpt := range []bool{false, true} {
			name := strings.TrimPrefix(goVersion(goCmd), "go version ")
			name, _, _ = strings.Cut(name, " ")
			if noOpt {
				name += "/N-l"
			}
			t.Run(name, func(t *testing.T) {
				bin := buildProgram(t, goCmd, "amd64", noOpt)
				checkWithGDB(t, gdb, bin, analyzeBinary(t, bin))
			})
		}
	}
}

// watch is one watched instruction.
type watch struct {
	fn   *goFunc
	rule Rule
}

// gdbPrelude defines, in gdb's Python, a breakpoint that writes "H pc
// sp bp slot" for each hit and lets the program go on: gdb's own command
// lists take milliseconds a hit, long enough for Go's scheduler to ask
// every function to yield in its stack check, again and again.
const gdbPrelude = `set pagination off
set confirm off
handle SIGURG nostop noprint pass
python
import gdb
hits = open(%q, "w")
class Watch(gdb.Breakpoint):
    def __init__(self, pc, slot):
        super().__init__("*%%#x" %% pc, internal=True)
        self.slot = slot
    def stop(self):
        f = gdb.selected_frame()
        pc, sp, bp, v = int(f.read_register("rip")), int(f.read_register("rsp")), int(f.read_register("rbp")), 0
        if self.slot is not None:
            v = int.from_bytes(gdb.selected_inferior().read_memory(sp + self.slot, 8).tobytes(), "little")
        hits.write("H %%x %%x %%x %%x\n" %% (pc, sp, bp, v))
        return False
`

func checkWithGDB(t *testing.T, gdb, bin string, s *survey) {
	watches := map[uint64]watch{}
	hitsPath := bin + ".hits"
	var script strings.Builder
	fmt.Fprintf(&script, gdbPrelude, hitsPath)
	for i := range s.funcs {
		g := &s.funcs[i]
		sparse, ok := gdbFuncs[g.name]
		if !ok {
			continue
		}
		r := s.results[i]
		if s.errs[i] != nil || r.Kind == Unrecognized {
			t.Fatalf("%s: %v %v", g.name, r, s.errs[i])
		}
		for _, pc := range watchedPCs(s, g, r, sparse) {
			rl := ruleAt(r.Rules, pc)
			watches[pc] = watch{fn: g, rule: rl}
			slot := "None" // SP-relative address of the slot
			if rl.Saved {
				slot = strconv.FormatInt(spAt(g.sp, pc)+8+rl.Offset, 10)
			}
			fmt.Fprintf(&script, "Watch(%#x, %s)\n", pc, slot)
		}
	}
	script.WriteString("end\nrun\npython hits.close()\nquit\n")
	path := bin + ".gdb"
	if err := os.WriteFile(path, []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gdb, "-nx", "-batch", "-x", path, "--args", bin, "3")
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("exited normally")) {
		t.Fatalf("gdb: %v\n%s", err, tail(out))
	}
	hits, err := os.ReadFile(hitsPath)
	if err != nil {
		t.Fatal(err)
	}
	checkHits(t, hits, watches)
}

// watchedPCs are the instructions of g to break at.
func watchedPCs(s *survey, g *goFunc, r Result, sparse bool) []uint64 {
	insns := arches[s.arch].decode(g.code, g.entry, new(scratch))
	near := map[int]bool{}
	for k, in := range insns {
		if in.err != nil || !spKnownAt(g.sp, in.pc) {
			continue
		}
		if !sparse || k == 0 {
			near[k] = true
			continue
		}
		e := arches[s.arch].effect(in, spAt(g.sp, in.pc), map[int]value{})
		if e.flow == flowCall || e.flow == flowReturn {
			near[k] = true
		}
		for _, rl := range r.Rules {
			if rl.PC == in.pc {
				for d := -2; d <= 2; d++ {
					near[k+d] = true
				}
			}
		}
	}
	var pcs []uint64
	for k, in := range insns {
		if near[k] && in.err == nil && spKnownAt(g.sp, in.pc) {
			pcs = append(pcs, in.pc)
		}
	}
	return pcs
}

// checkHits reads gdb's "H pc sp bp slot" lines and checks each against
// the BP its function had at entry. When the goroutine's stack has grown
// since, the runtime has copied it and moved every frame pointer into it
// by the same distance as SP, which the expected value follows.
func checkHits(t *testing.T, out []byte, watches map[uint64]watch) {
	t.Helper()
	type entry struct{ sp, bp uint64 }
	entries := map[string]entry{}
	checked := map[string]int{}
	pcs := map[uint64]bool{}
	saved, inReg, moved, bad := 0, 0, 0, 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 || f[0] != "H" {
			continue
		}
		var v [4]uint64
		for i := range v {
			var err error
			if v[i], err = strconv.ParseUint(f[i+1], 16, 64); err != nil {
				t.Fatalf("gdb line %q: %v", sc.Text(), err)
			}
		}
		pc, sp, bp, slot := v[0], v[1], v[2], v[3]
		w, ok := watches[pc]
		if !ok {
			t.Fatalf("gdb stopped at %#x, which is not watched", pc)
		}
		if pc == w.fn.entry {
			entries[w.fn.name] = entry{sp, bp}
			continue
		}
		e, ok := entries[w.fn.name]
		if !ok {
			t.Fatalf("%s: %#x ran before the entry", w.fn.name, pc)
		}
		want := e.bp
		if d := sp + uint64(spAt(w.fn.sp, pc)) - e.sp; d != 0 {
			want += d
			moved++
		}
		got, where := bp, "BP"
		if w.rule.Saved {
			got, where = slot, fmt.Sprintf("CFA%+d", w.rule.Offset)
			saved++
		} else {
			inReg++
		}
		if got != want {
			if bad++; bad <= 10 {
				t.Errorf("%s at %#x: %s holds %#x, the caller's frame pointer is %#x", w.fn.name, pc, where, got, want)
			}
		}
		checked[w.fn.name]++
		pcs[pc] = true
	}
	t.Logf("%d checks at %d instructions (%d with the frame pointer saved, %d in its register, %d after the stack moved), by function: %v",
		saved+inReg, len(pcs), saved, inReg, moved, checked)
	if saved == 0 || inReg == 0 {
		t.Errorf("no check of a saved frame pointer or of one in its register; gdb wrote:\n%s", tail(out))
	}
	for _, name := range []string{"main.small", "main.jump", "main.recovering", "main.big", "main.main"} {
		if checked[name] == 0 {
			t.Errorf("%s was never checked", name)
		}
	}
}

// tail is the end of gdb's output, for a failure message.
func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}
