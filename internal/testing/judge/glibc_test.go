package judge

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The glibc harness's program (e2e/testdata/glibc), built as
// scripts/glibc-acceptance.sh builds it with the host's gcc. The host's
// glibc has no SFrame unwinder: its backtrace() ("sframe" runs) walks with
// libgcc_s's DWARF unwinder, which it can reach, so its traces are the
// DWARF ones.
var (
	glibcOnce sync.Once
	glibcDir  string
	glibcErr  error
)

func glibcProgram(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		skip(t, "no gcc")
	}
	glibcOnce.Do(func() {
		src := filepath.Join("..", "..", "..", "e2e", "testdata", "glibc")
		if glibcDir, glibcErr = os.MkdirTemp("", "judge-test-glibc"); glibcErr != nil {
			return
		}
		o := func(n string) string { return filepath.Join(glibcDir, n) }
		for _, args := range [][]string{
			{"-O2", "-fPIC", "-shared", "-fomit-frame-pointer", "-o", o("libdeep.so"), filepath.Join(src, "lib.c")},
			{"-O2", "-c", "-fno-omit-frame-pointer", "-o", o("fp.o"), filepath.Join(src, "fp.c")},
			{"-O2", "-c", "-fomit-frame-pointer", "-o", o("nofp.o"), filepath.Join(src, "nofp.c")},
			{"-O2", "-c", "-fomit-frame-pointer", "-o", o("main.o"), filepath.Join(src, "main.c")},
			{"-rdynamic", "-o", o("prog"), o("main.o"), o("fp.o"), o("nofp.o"), "-L" + glibcDir, "-ldeep"},
		} {
			if glibcErr = run("gcc", args...); glibcErr != nil {
				return
			}
		}
	})
	if glibcErr != nil {
		t.Fatal(glibcErr)
	}
	return glibcDir
}

// trace runs the program as the harness does (MODE SCENARIO SIZE
// LIBGCC_S), its library directory on LD_LIBRARY_PATH unless noLib, and
// returns its output and error output.
func trace(t *testing.T, noLib bool, args ...string) Trace {
	t.Helper()
	dir := glibcProgram(t)
	libgcc, err := exec.Command("gcc", "-print-file-name=libgcc_s.so.1").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(dir, "prog"), append(args, strings.TrimSpace(string(libgcc)))...)
	if !noLib {
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
	}
	out, _ := cmd.CombinedOutput()
	return Trace(out)
}

// unreachable is s as glibc with SFrame prints it, libgcc_s out of reach:
// the host's loader always reaches it.
func unreachable(t *testing.T, s Trace) Trace {
	t.Helper()
	if !strings.HasSuffix(string(s), "libgcc_s reachable\n") {
		t.Fatalf("not an sframe run:\n%s", s)
	}
	return Trace(strings.TrimSuffix(string(s), "reachable\n") + "unreachable\n")
}

// noFrames is what glibc with SFrame prints when it discards its walk.
const noFrames = Trace("frames 0\nlibgcc_s unreachable\n")

// The traces of the program: frames read from the output; glibc's
// backtrace() as its copy in the program; the checks say ok and FAIL where
// the harness did, in its words.
func TestGlibcTraces(t *testing.T) {
	for _, sc := range glibcScenarios {
		s := trace(t, false, "sframe", sc, "256")
		d := trace(t, false, "dwarf", sc, "256")
		n, err := strconv.Atoi(d.Count())
		if err != nil || n < 20 || len(d.Frames()) != n || lastSymbol(d) != "_start" || !strings.HasPrefix(d.Frames()[0], "prog+0x") {
			t.Fatalf("%s: DWARF trace of %q frames, frames %q", sc, d.Count(), d.Frames())
		}
		if len(d.Frames()) < 9 || d.Frames()[1] == d.Frames()[2] {
			t.Fatalf("%s: frames %q", sc, d.Frames())
		}
		sU := unreachable(t, s)
		short := unreachable(t, trace(t, false, "sframe", sc, "5"))
		failed := trace(t, true, "sframe", sc, "256")
		two := trace(t, false, "dwarf", sc, "2")
		tail := "< " + strings.Join(d.Frames()[5:8], " < ") + " "
		for _, c := range []struct {
			got  Check
			want Check
		}{
			{ReferenceCheck("r", s, d), Check{"ok", "r", d.Count() + " frames = the test's DWARF trace"}},
			{ReferenceCheck("r", sU, d), Check{"FAIL", "r", "glibc " + d.Count() + " frames, test " + d.Count() + ": libgcc_s unreachable"}},
			{EqualCheck("e", sU, d), Check{"ok", "e", d.Count() + " SFrame frames = DWARF, last _start"}},
			{EqualCheck("e", s, d), Check{"FAIL", "e", "libgcc_s.so.1 was reachable (or the run failed): libgcc_s reachable"}},
			{EqualCheck("e", failed, d), Check{"FAIL", "e", "libgcc_s.so.1 was reachable (or the run failed): " + failed.last()}},
			{EqualCheck("e", short, d), Check{"FAIL", "e", "SFrame 5 frames, DWARF " + d.Count() + ": " + tail}},
			{EqualCheck("e", sU, two), Check{"FAIL", "e", "the DWARF reference has 2 frames"}},
			{CountCheck("c", noFrames, 0), Check{"ok", "c", "0 SFrame frames"}},
			{CountCheck("c", sU, 0), Check{"FAIL", "c", "want 0 SFrame frames, got " + d.Count() + ": libgcc_s unreachable"}},
			{CountCheck("c", failed, 0), Check{"FAIL", "c", "want 0 SFrame frames, got none: " + failed.last()}},
			{CountCheck("c", s, n), Check{"FAIL", "c", "want " + d.Count() + " SFrame frames, got " + d.Count() + ": libgcc_s reachable"}},
			{DamagedCheck("d", noFrames, d), Check{"ok", "d", "0 SFrame frames: glibc discarded the walk (DWARF: " + d.Count() + ")"}},
			{DamagedCheck("d", sU, d), Check{"FAIL", "d", d.Count() + " SFrame frames = DWARF: the damaged FREs were not used, the control tests nothing"}},
			{DamagedCheck("d", short, d), Check{"FAIL", "d", "wrong trace: 5 frames: " + cut(strings.Join(d.Frames()[:5], " ")+" ", 200)}},
		} {
			if c.got != c.want {
				t.Errorf("%s:\n got %s\nwant %s", sc, c.got, c.want)
			}
		}
		if !strings.Contains(string(failed), "libdeep.so") || failed.Count() != "" {
			t.Errorf("%s: the run without its library: %s", sc, failed)
		}
	}
}

// diffHead says what diff(1) says, on real traces that differ: cut short,
// and the other scenario's.
func TestDiffHead(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		skip(t, "no diff")
	}
	chain := trace(t, false, "dwarf", "chain", "256")
	signal := trace(t, false, "dwarf", "signal", "256")
	short := trace(t, false, "sframe", "signal", "7")
	dir := t.TempDir()
	for i, pair := range [][2]Trace{{chain, signal}, {signal, chain}, {signal, short}, {short, signal}, {chain, short}, {chain, chain}} {
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		if os.WriteFile(a, []byte(strings.Join(pair[0].Frames(), "\n")+"\n"), 0o644) != nil ||
			os.WriteFile(b, []byte(strings.Join(pair[1].Frames(), "\n")+"\n"), 0o644) != nil {
			t.Fatal("cannot write")
		}
		want, err := exec.Command("bash", "-c", `diff "$1" "$2" | grep '^[<>]' | head -3 | tr '\n' ' '`, "-", a, b).Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := diffHead(pair[0].Frames(), pair[1].Frames(), 3); got != string(want) {
			t.Errorf("pair %d: %q, diff says %q", i, got, want)
		}
	}
}

// verify's real outputs, intact and damaged (our --for glibc output of the
// program with nofp_level's CFA offsets raised by 64, as the harness
// damages it): testdata/verify-*.txt, captured from cfi2sframe verify.
func TestVerifyCheck(t *testing.T) {
	intact, err1 := os.ReadFile("testdata/verify-intact.txt")
	damaged, err2 := os.ReadFile("testdata/verify-damaged.txt")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	for _, c := range []struct {
		intactOK, damagedOK bool
		want                Check
	}{
		{true, false, Check{"ok", "v", "intact file passes; damaged: 5 disagreements, first: nofp_level+0x0 [0x17c0,0x17c1): CFA: sframe says rsp+72, CFI says rsp+8"}},
		{false, false, Check{"FAIL", "v", "verify fails on the intact file: glibc/prog: 14 functions, 1672 bytes checked: 0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 1 skipped as cfi2sframe skips them (1 outermost), 0 layout problems"}},
		{true, true, Check{"FAIL", "v", "verify passed the damaged file"}},
	} {
		if got := VerifyCheck("v", string(intact), c.intactOK, string(damaged), c.damagedOK, "nofp_level"); got != c.want {
			t.Errorf("\n got %s\nwant %s", got, c.want)
		}
	}
}

// glibcRecords writes into dir what scripts/glibc-acceptance.sh check
// leaves there after runs that went as docs/readers.md says, from the
// program's real traces (the SFrame walks with libgcc_s out of reach; 0
// frames where glibc discards the walk).
func glibcRecords(t *testing.T, dir string, patched bool) {
	t.Helper()
	for _, d := range []string{"runs", "verify"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, tr Trace) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(tr), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sc := range glibcScenarios {
		s := trace(t, false, "sframe", sc, "256")
		d := trace(t, false, "dwarf", sc, "256")
		write("runs/plain-libgcc.sframe."+sc+".full", s)
		for _, v := range []string{"plain", "glibc", "libc-ours", "gnu", "damaged", "pcrel"} {
			write("runs/"+v+".dwarf."+sc+".full", d)
			switch v {
			case "plain", "damaged", "pcrel":
				write("runs/"+v+".sframe."+sc+".full", noFrames)
			default:
				write("runs/"+v+".sframe."+sc+".full", unreachable(t, s))
			}
		}
		for _, v := range []string{"v2", "pcrel"} {
			write("runs/"+v+".sframe."+sc+".dwarflen", unreachable(t, trace(t, false, "sframe", sc, d.Count())))
			write("runs/"+v+".dwarf."+sc+".dwarflen", trace(t, false, "dwarf", sc, d.Count()))
		}
		if !patched {
			continue
		}
		for _, v := range []string{"v3", "v3-libc", "v3-nosig", "gnu3", "damaged3"} {
			write("runs/"+v+".dwarf."+sc+".full", d)
			if v == "damaged3" {
				write("runs/"+v+".sframe."+sc+".full", noFrames)
			} else {
				write("runs/"+v+".sframe."+sc+".full", unreachable(t, s))
			}
		}
	}
	verify := map[string]string{"glibc": "0", "damaged": "1"}
	if patched {
		write("reader", "patched 0123 /tmp/v3.patch\n")
		verify["v3"], verify["damaged3"] = "0", "1"
	}
	for name, exit := range verify {
		b, err := os.ReadFile("testdata/verify-" + map[string]string{"glibc": "intact", "damaged": "damaged", "v3": "intact", "damaged3": "damaged"}[name] + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		write("verify/"+name, Trace(b))
		write("verify/"+name+".exit", Trace(exit+"\n"))
	}
}

// Records of runs that went as predicted pass every check, in the
// harness's order; a missing record is an error, not a check passed.
func TestGlibc(t *testing.T) {
	for _, patched := range []bool{false, true} {
		t.Run(map[bool]string{false: "unpatched", true: "patched"}[patched], func(t *testing.T) { testGlibc(t, patched) })
	}
}

func testGlibc(t *testing.T, patched bool) {
	dir := t.TempDir()
	glibcRecords(t, dir, patched)
	report, checks, err := Glibc(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := GlibcChecks
	if patched {
		names = append(append([]string(nil), GlibcChecks...), GlibcV3Checks...)
	}
	if len(checks) != len(names) {
		t.Fatalf("%d checks, want %d:\n%s", len(checks), len(names), report)
	}
	for i, c := range checks {
		if c.Name != names[i] || c.Status != "ok" {
			t.Errorf("check %d: %s, want ok %s", i, c, names[i])
		}
	}
	if !strings.HasSuffix(report, "\n== 0 failed\n") {
		t.Errorf("report:\n%s", report)
	}
	if err := os.Remove(filepath.Join(dir, "runs", "v2.dwarf.signal.dwarflen")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Glibc(dir); err == nil || !strings.Contains(err.Error(), "v2.dwarf.signal.dwarflen") {
		t.Errorf("without a record: %v", err)
	}
	if !patched {
		return
	}
	// A reader that rejects V3: every V3 walk gives 0 frames, and the
	// damaged control, 0 frames too, tests nothing.
	for _, sc := range glibcScenarios {
		for _, v := range []string{"v3", "v3-libc", "v3-nosig", "gnu3"} {
			if err := os.WriteFile(filepath.Join(dir, "runs", v+".sframe."+sc+".full"), []byte(noFrames), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The record removed above, back (empty: only the V3 checks matter here).
	if err := os.WriteFile(filepath.Join(dir, "runs", "v2.dwarf.signal.dwarflen"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, checks, err = Glibc(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks[len(GlibcChecks):] {
		want := "FAIL"
		if c.Name == "control: damaged V3 FRE, verify" {
			want = "ok"
		}
		if c.Status != want {
			t.Errorf("a reader rejecting V3: %s, want %s", c, want)
		}
	}
	if err := os.Remove(filepath.Join(dir, "runs", "v3-nosig.sframe.chain.full")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Glibc(dir); err == nil || !strings.Contains(err.Error(), "v3-nosig.sframe.chain.full") {
		t.Errorf("without a V3 record: %v", err)
	}
}
