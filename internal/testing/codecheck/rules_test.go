package codecheck

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/codeentry"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// analysed is a file's code and the Funcs codeflow.Analyze gives for it.
type analysed struct {
	code  *codeflow.Code
	funcs []codeflow.Func
}

func analyse(t *testing.T, b []byte) *analysed {
	t.Helper()
	f, err := elfread.NewFileBytes(b, "test")
	if err != nil {
		t.Fatal(err)
	}
	code, _, err := codeentry.Load(f, codeentry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &analysed{code: codeflow.InferNoReturn(code)}
	codeflow.Analyze(code, func(fn codeflow.Func) { a.funcs = append(a.funcs, fn) }, func(codeflow.Skip) {})
	sort.Slice(a.funcs, func(i, j int) bool { return a.funcs[i].Start < a.funcs[j].Start })
	return a
}

// ruleAt gives the row of funcs at pc, as verify gives the FREs'.
func ruleAt(funcs []codeflow.Func) func(uint64) (codeflow.Row, bool) {
	return func(pc uint64) (codeflow.Row, bool) {
		i := sort.Search(len(funcs), func(i int) bool { return funcs[i].End > pc })
		if i == len(funcs) || funcs[i].Start > pc {
			return codeflow.Row{}, false
		}
		rs := funcs[i].Rows
		j := sort.Search(len(rs), func(j int) bool { return rs[j].PC > pc }) - 1
		if j < 0 {
			return codeflow.Row{}, false
		}
		return rs[j], true
	}
}

// checkAll runs CheckRules over every Func: the number checked and the
// problems.
func checkAll(a *analysed) (int, []codeflow.Problem) {
	at := ruleAt(a.funcs)
	var all []codeflow.Problem
	for _, fn := range a.funcs {
		all = append(all, codeflow.CheckRules(a.code, fn.Start, fn.End, at)...)
	}
	return len(a.funcs), all
}

func gccBuild(t *testing.T, cc string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("%s: %v", cc, err)
	}
	out := filepath.Join(t.TempDir(), "prog")
	args = append(args, "-o", out)
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckRulesPass: what Analyze gives follows from the instructions,
// by CheckRules, on the corpus and on compilers' output. The only rule
// the check may not re-derive is the corpus's jump_table_far jump, whose
// bound lies in a block placed after it (unproven: 1).
func TestCheckRulesPass(t *testing.T) {
	flow := "testdata"
	x86 := func(cc string, opts ...string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			args := append(opts, "-fpie", "-nostdlib", "-static", "-Wl,-e,main",
				filepath.Join(flow, "flow.c"), filepath.Join(flow, "stubs.s"))
			return gccBuild(t, cc, args...)
		}
	}
	a64 := func(opts ...string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			src := filepath.Join(t.TempDir(), "t.c")
			if err := os.WriteFile(src, []byte(a64Source), 0o644); err != nil {
				t.Fatal(err)
			}
			return gccBuild(t, "aarch64-linux-gnu-gcc", append(opts, src)...)
		}
	}
	corpusFile := func(name string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return readCorpus(t, name) }
	}
	for _, tc := range []struct {
		name     string
		file     func(t *testing.T) []byte
		unproven int
	}{
		// jump_table_far's check comes after its table on the
		// straight-line path: the table is bounded by its content.
		{"x86_64-nocfi", corpusFile("x86_64-nocfi"), 1},
		{"aarch64-nocfi", corpusFile("aarch64-nocfi"), 0},
		{"gcc-O0-fp", x86("gcc", "-O0", "-fno-omit-frame-pointer"), 0},
		{"gcc-O2", x86("gcc", "-O2", "-fomit-frame-pointer"), 0},
		{"gcc-O2-fp", x86("gcc", "-O2", "-fno-omit-frame-pointer"), 0},
		{"clang-O2-fp", x86("clang", "-O2", "-fno-omit-frame-pointer"), 0},
		{"clang-O1", x86("clang", "-O1", "-fomit-frame-pointer"), 0},
		{"aarch64-gcc-O2-pac", a64("-O2", "-mbranch-protection=pac-ret"), 0},
		{"aarch64-gcc-O0-bkey", a64("-O0", "-mbranch-protection=pac-ret+b-key"), 0},
		{"aarch64-gcc-O3-nofp", a64("-O3", "-fomit-frame-pointer"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := analyse(t, tc.file(t))
			n, probs := checkAll(a)
			t.Logf("%d ranges checked, %d problems", n, len(probs))
			if n == 0 {
				t.Fatal("nothing checked")
			}
			unproven := 0
			for i, p := range probs {
				if p.What == codeflow.ProblemNotDerivable {
					unproven++
					continue
				}
				if i < 10 {
					t.Errorf("%s", p)
				}
			}
			if unproven != tc.unproven {
				t.Errorf("%d rules not re-derivable, want %d: %v", unproven, tc.unproven, probs)
			}
		})
	}
}

// a64Source gives AArch64 frames of several kinds: leaf, frame record,
// variable-length array, a switch, calls that do not return.
const a64Source = `
#include <stdlib.h>
extern int ext(int);
__attribute__((noinline)) int leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) int fact(int n) { return n <= 1 ? 1 : n * fact(n - 1); }
__attribute__((noinline)) int vla(int n) { int a[n]; for (int i = 0; i < n; i++) a[i] = leaf(i); return a[n / 2]; }
__attribute__((noinline)) int sw(int x) {
	switch (x) { case 0: return leaf(1); case 1: return fact(2) + 3; case 2: return 7; case 3: return leaf(x) * 2;
	case 4: return 11; case 5: return fact(x); default: return 0; }
}
__attribute__((noinline)) int big(int x) { volatile char buf[5000]; buf[x] = 1; return buf[x / 2] + leaf(x); }
__attribute__((noinline)) void die(int x) { if (x > 100) abort(); }
int main(int argc, char **argv) { die(argc); return sw(argc) + vla(argc + 2) + big(argc) + fact(argc); }
`

// mutation changes one row of a Func and says where CheckRules must
// report it: pick finds the row (index k of fn's rows, k > 0), apply
// changes the Func, at is the PC a Problem must name.
type mutation struct {
	name string
	file string
	what codeflow.ProblemKind
	pick func(a *analysed, fn *codeflow.Func, k int) bool
	// apply changes fn's row k; it returns the PC the problem is at.
	apply func(a *analysed, fn *codeflow.Func, k int) uint64
}

func ruleDiffers(x, y *codeflow.Row) bool {
	return x.Base != y.Base || x.CFAOff != y.CFAOff || x.FP != y.FP || x.RA != y.RA || x.RASigned != y.RASigned
}

// insnLen is the length of the instruction at pc.
func insnLen(a *analysed, pc uint64) int {
	if a.code.Machine == elf.EM_AARCH64 {
		return 4
	}
	for _, r := range a.code.Text {
		if pc >= r.Addr && pc < r.Addr+uint64(len(r.Data)) {
			b := r.Data[pc-r.Addr:]
			if bytes.HasPrefix(b, []byte{0xf3, 0x0f, 0x1e, 0xfa}) {
				return 4
			}
			in, err := isa.AMD64(b)
			if err != nil {
				return 0
			}
			return isa.LenAMD64(in, b)
		}
	}
	return 0
}

// TestCheckRulesMutations: a row changed by hand gives a Problem at its PC.
func TestCheckRulesMutations(t *testing.T) {
	changed := func(fn *codeflow.Func, k int) bool { return ruleDiffers(&fn.Rows[k-1], &fn.Rows[k]) }
	for _, m := range []mutation{{
		name: "CFA off by 8", file: "x86_64-nocfi", what: codeflow.ProblemCFA,
		pick: func(_ *analysed, fn *codeflow.Func, k int) bool { return changed(fn, k) },
		apply: func(_ *analysed, fn *codeflow.Func, k int) uint64 {
			fn.Rows[k].CFAOff += 8
			return fn.Rows[k].PC
		},
	}, {
		name: "FP slot wrong", file: "x86_64-nocfi", what: codeflow.ProblemFP,
		pick: func(_ *analysed, fn *codeflow.Func, k int) bool {
			return changed(fn, k) && fn.Rows[k].FP.Where == codeflow.OnStack
		},
		apply: func(_ *analysed, fn *codeflow.Func, k int) uint64 {
			fn.Rows[k].FP.Off -= 8
			return fn.Rows[k].PC
		},
	}, {
		name: "row one instruction late", file: "x86_64-nocfi", what: codeflow.ProblemCFA,
		pick: func(a *analysed, fn *codeflow.Func, k int) bool {
			end := fn.End
			if k+1 < len(fn.Rows) {
				end = fn.Rows[k+1].PC
			}
			n := insnLen(a, fn.Rows[k].PC)
			return changed(fn, k) && fn.Rows[k].CFAOff != fn.Rows[k-1].CFAOff && n > 0 && fn.Rows[k].PC+uint64(n) < end
		},
		apply: func(a *analysed, fn *codeflow.Func, k int) uint64 {
			pc := fn.Rows[k].PC
			fn.Rows[k].PC += uint64(insnLen(a, pc))
			return pc
		},
	}, {
		name: "row dropped after a push", file: "x86_64-nocfi", what: codeflow.ProblemCFA,
		pick: func(_ *analysed, fn *codeflow.Func, k int) bool {
			p, r := &fn.Rows[k-1], &fn.Rows[k]
			return p.Base == codeflow.BaseSP && r.Base == codeflow.BaseSP && r.CFAOff == p.CFAOff+8
		},
		apply: func(_ *analysed, fn *codeflow.Func, k int) uint64 {
			pc := fn.Rows[k].PC
			fn.Rows = slices.Delete(fn.Rows, k, k+1)
			return pc
		},
	}, {
		name: "AArch64 CFA off by 16", file: "aarch64-nocfi", what: codeflow.ProblemCFA,
		pick: func(_ *analysed, fn *codeflow.Func, k int) bool { return changed(fn, k) },
		apply: func(_ *analysed, fn *codeflow.Func, k int) uint64 {
			fn.Rows[k].CFAOff += 16
			return fn.Rows[k].PC
		},
	}, {
		name: "AArch64 RA slot wrong", file: "aarch64-nocfi", what: codeflow.ProblemRA,
		pick: func(_ *analysed, fn *codeflow.Func, k int) bool {
			return changed(fn, k) && fn.Rows[k].RA.Where == codeflow.OnStack
		},
		apply: func(_ *analysed, fn *codeflow.Func, k int) uint64 {
			fn.Rows[k].RA.Off += 8
			return fn.Rows[k].PC
		},
	}, {
		name: "AArch64 signing flipped", file: "aarch64-nocfi", what: codeflow.ProblemSigned,
		pick: func(_ *analysed, fn *codeflow.Func, k int) bool {
			return fn.Rows[k].RASigned != fn.Rows[k-1].RASigned
		},
		apply: func(_ *analysed, fn *codeflow.Func, k int) uint64 {
			fn.Rows[k].RASigned = !fn.Rows[k].RASigned
			return fn.Rows[k].PC
		},
	}} {
		t.Run(m.name, func(t *testing.T) { runMutation(t, m) })
	}
}

// runMutation applies m to each of the first few rows it picks, one at a
// time, and wants a Problem of its kind at its PC each time.
func runMutation(t *testing.T, m mutation) {
	a := analyse(t, readCorpus(t, m.file))
	tried := 0
	for i := range a.funcs {
		for k := 1; k < len(a.funcs[i].Rows) && tried < 5; k++ {
			if !m.pick(a, &a.funcs[i], k) {
				continue
			}
			tried++
			orig := a.funcs[i]
			fn := orig
			fn.Rows = slices.Clone(orig.Rows)
			at := m.apply(a, &fn, k)
			a.funcs[i] = fn
			probs := codeflow.CheckRules(a.code, fn.Start, fn.End, ruleAt(a.funcs))
			a.funcs[i] = orig
			if !slices.ContainsFunc(probs, func(p codeflow.Problem) bool { return p.PC == at && p.What == m.what }) {
				t.Errorf("func %#x row %d: no %s problem at %#x; got %v", fn.Start, k, m.what, at, probs)
			}
		}
	}
	if tried == 0 {
		t.Fatal("no row to mutate")
	}
}
