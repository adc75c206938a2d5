package codecheck

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tally sums the Results of several builds.
type tally struct {
	builds, pcs, judged, wrong, covered, described int
	notJudged, left                                map[string]int
}

func newTally() *tally { return &tally{notJudged: map[string]int{}, left: map[string]int{}} }

func (t *tally) add(r *Result) {
	t.builds++
	t.pcs += r.PCs
	t.judged += r.Judged
	t.wrong += r.WrongPCs()
	t.covered += r.Covered
	t.described += r.Described
	for k, n := range r.NotJudged {
		t.notJudged[k] += n
	}
	for k, n := range r.Left {
		t.left[k] += n
	}
}

// String is the figures the brief asks for: PCs judged, wrong, the
// described share of the CFI-covered PCs, the rest by reason.
func (t *tally) String() string {
	var b strings.Builder
	share := 0.0
	if t.covered > 0 {
		share = 100 * float64(t.described) / float64(t.covered)
	}
	fmt.Fprintf(&b, "%d builds: %d PCs in Funcs, %d judged, %d wrong; CFI covers %d PCs, described %d (%.1f%%)",
		t.builds, t.pcs, t.judged, t.wrong, t.covered, t.described, share)
	for _, k := range sortedKeys(t.notJudged) {
		fmt.Fprintf(&b, "\n  not judged: %s: %d", k, t.notJudged[k])
	}
	for _, k := range sortedKeys(t.left) {
		fmt.Fprintf(&b, "\n  left out: %s: %d", k, t.left[k])
	}
	return b.String()
}

// checkBuild judges one build with the real analysis: no wrong row.
func checkBuild(t *testing.T, path, name string, sum *tally) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Check(b, Linked())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	sum.add(res)
	if len(res.Wrong) > 0 {
		t.Errorf("%s: %d wrong fields at %d PCs\n%s", name, len(res.Wrong), res.WrongPCs(), res)
		return
	}
	t.Logf("%s: %d PCs judged of %d, described %d of %d CFI-covered", name, res.Judged, res.PCs, res.Described, res.Covered)
}

// TestAgainstCFI builds testdata/flow.c (and stubs.s, no C library)
// with gcc and clang at -O0/-O2/-O3/-Os, with and without frame
// pointers, and judges the analysis of each against its CFI.
func TestAgainstCFI(t *testing.T) {
	sum := newTally()
	for _, cc := range []string{"gcc", "clang"} {
		if _, err := exec.LookPath(cc); err != nil {
			t.Logf("%s not found", cc)
			continue
		}
		for _, opt := range []string{"-O0", "-O2", "-O3", "-Os"} {
			for _, fp := range []string{"-fno-omit-frame-pointer", "-fomit-frame-pointer"} {
				out := filepath.Join(t.TempDir(), "flow")
				args := []string{opt, fp, "-fpie", "-fasynchronous-unwind-tables", "-nostdlib", "-static", "-Wl,-e,main",
					"-o", out, filepath.Join("testdata", "flow.c"), filepath.Join("testdata", "stubs.s")}
				if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", cc, args, err, b)
				}
				checkBuild(t, out, cc+" "+opt+" "+fp, sum)
			}
		}
	}
	if sum.builds == 0 {
		t.Skip("neither gcc nor clang found")
	}
	t.Logf("%v", sum)
	if sum.judged < 500 {
		t.Errorf("only %d PCs judged", sum.judged)
	}
}

// TestARM64AgainstGCC builds testdata/flow_arm64.c with
// aarch64-linux-gnu-gcc at each level, with and without frame pointers,
// without PAC and with pac-ret (A and B keys), and judges the analysis
// of the whole program (the C library's start files too) against its
// CFI.
func TestARM64AgainstGCC(t *testing.T) {
	gcc, err := exec.LookPath("aarch64-linux-gnu-gcc")
	if err != nil {
		t.Skip("aarch64-linux-gnu-gcc not found")
	}
	sum := newTally()
	dir := t.TempDir()
	for _, opt := range []string{"-O0", "-O2", "-O3", "-Os"} {
		for _, fp := range []string{"-fno-omit-frame-pointer", "-fomit-frame-pointer"} {
			for _, pac := range []string{"", "-mbranch-protection=pac-ret", "-mbranch-protection=pac-ret+b-key"} {
				name := strings.Join(strings.Fields(opt+" "+fp+" "+pac), " ")
				out := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
				args := []string{opt, fp, "-fasynchronous-unwind-tables", "-o", out, filepath.Join("testdata", "flow_arm64.c")}
				if pac != "" {
					args = append(args, pac)
				}
				if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s %v: %v\n%s", gcc, args, err, b)
				}
				checkBuild(t, out, name, sum)
			}
		}
	}
	t.Logf("%v", sum)
	if sum.judged < 500 {
		t.Errorf("only %d PCs judged", sum.judged)
	}
}

// TestARM64Switches builds testdata/switch_arm64.c (byte, half and word
// jump tables, 32- and 64-bit indexes, switches in loops) with
// aarch64-linux-gnu-gcc, with and without pac-ret, and judges the
// analysis against its CFI: no wrong row, and the jump tables resolved
// (none of the code left out as code-indirect-jump) but at -Os, where
// GCC hoists loop's table address above the loop, out of the path the
// check is found on (not resolved: left out). Clang 14 is not
// judged here: its AArch64 CFI is synchronous (one row after the whole
// prologue, none for epilogues), wrong at the prologue's and the
// returns' PCs where the rows are right.
func TestARM64Switches(t *testing.T) {
	gcc, err := exec.LookPath("aarch64-linux-gnu-gcc")
	if err != nil {
		t.Skip("aarch64-linux-gnu-gcc not found")
	}
	sum, notOs := newTally(), newTally()
	dir := t.TempDir()
	for _, opt := range []string{"-O1", "-O2", "-O3 -fomit-frame-pointer", "-Os"} {
		for _, pac := range []string{"", "-mbranch-protection=pac-ret", "-mbranch-protection=pac-ret+b-key"} {
			name := strings.Join(strings.Fields(opt+" "+pac), " ")
			out := filepath.Join(dir, strings.NewReplacer(" ", "_", "=", "_", "+", "_").Replace(name))
			args := append(strings.Fields(name), "-fasynchronous-unwind-tables", "-o", out, filepath.Join("testdata", "switch_arm64.c"))
			if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s %v: %v\n%s", gcc, args, err, b)
			}
			checkBuild(t, out, name, sum)
			if opt != "-Os" {
				checkBuild(t, out, name, notOs)
			}
		}
	}
	t.Logf("%v", sum)
	if n := notOs.left["code-indirect-jump"]; n > 0 {
		t.Errorf("%d PCs left out as code-indirect-jump: a jump table not resolved", n)
	}
	if sum.covered == 0 || sum.described*10 < sum.covered*8 {
		t.Errorf("described %d of %d CFI-covered PCs, want 80%% or more", sum.described, sum.covered)
	}
}

// TestComputedGotos builds testdata/gotos.c, an interpreter whose
// labels' addresses a stripped PIE relocates, with gcc and clang at -O2
// and judges it: a label walked from an entry's state, as if the
// pointer named a function, must not give rows (its walk ends in jumps
// that look like tail calls from there, with no return).
func TestComputedGotos(t *testing.T) {
	sum := newTally()
	for _, cc := range []string{"gcc", "clang"} {
		if _, err := exec.LookPath(cc); err != nil {
			t.Logf("%s not found", cc)
			continue
		}
		dir := t.TempDir()
		out, stripped := filepath.Join(dir, "gotos"), filepath.Join(dir, "gotos.stripped")
		for _, args := range [][]string{
			{cc, "-O2", "-fPIE", "-pie", "-o", out, filepath.Join("testdata", "gotos.c")},
			{"strip", "-o", stripped, out},
		} {
			if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, b)
			}
		}
		checkBuild(t, stripped, cc+" -O2 -pie, stripped", sum)
	}
	if sum.builds == 0 {
		t.Skip("neither gcc nor clang found")
	}
	t.Logf("%v", sum)
}
