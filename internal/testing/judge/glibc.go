package judge

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// GlibcChecks are the checks Glibc makes of the glibc harness's runs, in
// its order. A run that skipped or lost one fails rather than passing
// with fewer (e2e's TestGlibcAcceptance requires each, "ok").
var GlibcChecks = []string{
	"reference: glibc's DWARF fallback, chain",
	"reference: glibc's DWARF fallback, signal",
	"ours --for glibc, chain, full depth",
	"ours --for glibc + our libc, chain, full depth",
	"ours V2, chain, array of the DWARF length",
	"ours V2 --pcrel, chain, array of the DWARF length",
	"ours V2 --pcrel, chain, full depth (RA-undefined FRE)",
	"control: no .sframe, chain",
	"control: GNU as 2.44 --gsframe, chain, full",
	"ours --for glibc, signal, full depth",
	"ours --for glibc + our libc, signal, full depth",
	"ours V2, signal, array of the DWARF length",
	"ours V2 --pcrel, signal, array of the DWARF length",
	"ours V2 --pcrel, signal, full depth (RA-undefined FRE)",
	"control: no .sframe, signal",
	"control: GNU as 2.44 --gsframe, signal, full",
	"control: damaged FRE, verify",
	"control: damaged FRE, chain",
	"control: damaged FRE, signal",
}

// GlibcV3Checks are the further checks Glibc makes when the runs were made
// with a patched glibc (scripts/glibc-acceptance.sh --patch, e.g. glibc's
// SFrame V3 reader as posted to libc-alpha; the file reader in the output
// directory names the patch): our V3 output, with the built libc and with
// a libc we converted to V3, with and without signal FDEs, mirroring the
// V2 checks, and their controls in V3.
var GlibcV3Checks = []string{
	"ours V3, chain, full depth",
	"ours V3 + our V3 libc, chain, full depth",
	"ours V3 --signal-frames=false + our libc, chain, full depth",
	"control: GNU as 2.47 --gsframe (V3), chain, full",
	"ours V3, signal, full depth",
	"ours V3 + our V3 libc, signal, full depth",
	"ours V3 --signal-frames=false + our libc, signal, full depth",
	"control: GNU as 2.47 --gsframe (V3), signal, full",
	"control: damaged V3 FRE, verify",
	"control: damaged V3 FRE, chain",
	"control: damaged V3 FRE, signal",
}

// GlibcReader is what the file reader of the harness's output directory
// dir says of the glibc the runs used ("patched SHA256 FILE"), "" when
// there is none (an unpatched glibc: the V2 checks only).
func GlibcReader(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "reader"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// A Trace is the output of one run of the glibc harness's test program
// (e2e/testdata/glibc/main.c), its standard error included: "frames N",
// then "frame I MODULE+OFFSET SYMBOL" per frame, and after an SFrame run
// "libgcc_s reachable" or "libgcc_s unreachable".
type Trace string

// Count is N of the "frames N" line, "" if there is none.
func (t Trace) Count() string {
	for _, l := range strings.Split(string(t), "\n") {
		if n, ok := strings.CutPrefix(l, "frames "); ok {
			return n
		}
	}
	return ""
}

// Frames are the "frame" lines without "frame I ".
func (t Trace) Frames() []string {
	var fs []string
	for _, l := range strings.Split(string(t), "\n") {
		if rest, ok := strings.CutPrefix(l, "frame "); ok {
			_, f, _ := strings.Cut(rest, " ")
			fs = append(fs, f)
		}
	}
	return fs
}

// has reports whether a line of t starts with prefix.
func (t Trace) has(prefix string) bool {
	for _, l := range strings.Split(string(t), "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// last is t's last line.
func (t Trace) last() string {
	s := strings.TrimRight(string(t), "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// SameFrames reports whether a and b have the same frames.
func SameFrames(a, b Trace) bool {
	return strings.Join(a.Frames(), "\n") == strings.Join(b.Frames(), "\n")
}

// atLeast reports whether count is an integer of at least n; a count that
// is no integer is neither at least nor below n (as the shell's test).
func atLeast(count string, n int) (ok, valid bool) {
	c, err := strconv.Atoi(count)
	return err == nil && c >= n, err == nil
}

// lastSymbol is the symbol of t's last frame ("" without frames).
func lastSymbol(t Trace) string {
	fs := t.Frames()
	if len(fs) == 0 {
		return ""
	}
	if _, sym, ok := strings.Cut(fs[len(fs)-1], " "); ok {
		sym, _, _ = strings.Cut(sym, " ")
		return sym
	}
	return fs[len(fs)-1]
}

// EqualCheck judges an SFrame run s against the DWARF run d of the same
// binary: libgcc_s must have been out of reach of s, d must have at least
// 3 frames, and the frames must be the same.
func EqualCheck(name string, s, d Trace) Check {
	if !s.has("libgcc_s unreachable") {
		return Check{"FAIL", name, "libgcc_s.so.1 was reachable (or the run failed): " + s.last()}
	}
	if ok, valid := atLeast(d.Count(), 3); valid && !ok {
		return Check{"FAIL", name, fmt.Sprintf("the DWARF reference has %s frames", d.Count())}
	}
	if SameFrames(s, d) {
		return Check{"ok", name, fmt.Sprintf("%s SFrame frames = DWARF, last %s", s.Count(), lastSymbol(s))}
	}
	return Check{"FAIL", name, fmt.Sprintf("SFrame %s frames, DWARF %s: %s", s.Count(), d.Count(), diffHead(d.Frames(), s.Frames(), 3))}
}

// CountCheck judges an SFrame run s that must give want frames with
// libgcc_s out of reach (0: glibc discarded the walk).
func CountCheck(name string, s Trace, want int) Check {
	n := s.Count()
	if s.has("libgcc_s unreachable") && n == strconv.Itoa(want) {
		return Check{"ok", name, n + " SFrame frames"}
	}
	if n == "" {
		n = "none"
	}
	return Check{"FAIL", name, fmt.Sprintf("want %d SFrame frames, got %s: %s", want, n, s.last())}
}

// ReferenceCheck judges glibc's own DWARF fallback s (the program without
// .sframe, libgcc_s on the library path) against the test program's copy
// of it d.
func ReferenceCheck(name string, s, d Trace) Check {
	if ok, _ := atLeast(d.Count(), 3); ok && s.has("libgcc_s reachable") && SameFrames(s, d) {
		return Check{"ok", name, s.Count() + " frames = the test's DWARF trace"}
	}
	return Check{"FAIL", name, fmt.Sprintf("glibc %s frames, test %s: %s", s.Count(), d.Count(), s.last())}
}

// DamagedCheck judges the SFrame run s of a program whose FREs were
// damaged, d the DWARF run of it: glibc must discard the walk (0 frames)
// rather than return the trace or a wrong one.
func DamagedCheck(name string, s, d Trace) Check {
	switch {
	case s.Count() == "0":
		return Check{"ok", name, fmt.Sprintf("0 SFrame frames: glibc discarded the walk (DWARF: %s)", d.Count())}
	case SameFrames(s, d):
		return Check{"FAIL", name, s.Count() + " SFrame frames = DWARF: the damaged FREs were not used, the control tests nothing"}
	}
	var fs strings.Builder
	for _, f := range s.Frames() {
		fs.WriteString(f + " ")
	}
	return Check{"FAIL", name, fmt.Sprintf("wrong trace: %s frames: %s", s.Count(), cut(fs.String(), 200))}
}

var disagreements = regexp.MustCompile(`[0-9]* disagreements`)

// VerifyCheck judges `cfi2sframe verify` on the intact program and on the
// damaged one (their outputs and whether each passed): the intact one must
// pass, the damaged one fail, naming the damaged function.
func VerifyCheck(name, intact string, intactOK bool, damaged string, damagedOK bool, fn string) Check {
	switch {
	case !intactOK:
		return Check{"FAIL", name, "verify fails on the intact file: " + Trace(intact).last()}
	case damagedOK:
		return Check{"FAIL", name, "verify passed the damaged file"}
	}
	first := ""
	for _, l := range strings.Split(damaged, "\n") {
		if strings.Contains(l, fn) {
			if _, rest, ok := strings.Cut(l, " "); ok {
				first = cut(rest, 80)
			} else {
				first = cut(l, 80)
			}
			break
		}
	}
	return Check{"ok", name, fmt.Sprintf("intact file passes; damaged: %s, first: %s",
		strings.Join(disagreements.FindAllString(damaged, -1), "\n"), first)}
}

// cut is s's first n bytes.
func cut(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// diffHead is the first n "<" and ">" lines of diff(1) between a and b,
// joined by spaces, each followed by one.
func diffHead(a, b []string, n int) string {
	// The longest common subsequence, then the differences in order,
	// the deleted lines of a change before its added ones.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for (i < len(a) || j < len(b)) && len(out) < n {
		if i < len(a) && j < len(b) && a[i] == b[j] {
			i, j = i+1, j+1
			continue
		}
		// One hunk: the lines of a and b up to the next common line.
		var del, add []string
		for (i < len(a) || j < len(b)) && !(i < len(a) && j < len(b) && a[i] == b[j]) {
			if j >= len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]) {
				del = append(del, "< "+a[i])
				i++
			} else {
				add = append(add, "> "+b[j])
				j++
			}
		}
		out = append(out, del...)
		out = append(out, add...)
	}
	if len(out) > n {
		out = out[:n]
	}
	var s strings.Builder
	for _, l := range out {
		s.WriteString(l + " ")
	}
	return s.String()
}

// glibcScenarios are the two ways the test program takes its trace.
var glibcScenarios = []string{"chain", "signal"}

// Glibc judges the outputs scripts/glibc-acceptance.sh check leaves in
// dir: runs/VARIANT.MODE.SCENARIO.SIZE, one run of VARIANT's program
// (MODE sframe: glibc's backtrace(); dwarf: libgcc_s's unwinder; SIZE full:
// an array of 256, dwarflen: of the length of the glibc variant's DWARF
// trace), and verify/{glibc,damaged} with verify/NAME.exit, cfi2sframe
// verify's output and exit status on the intact and the damaged program.
// With a patched glibc (GlibcReader) it judges the V3 runs too
// (GlibcV3Checks, after GlibcChecks). It returns the check lines and the
// checks.
func Glibc(dir string) (string, []Check, error) {
	var missing []string
	run := func(variant, mode, sc, size string) Trace {
		name := strings.Join([]string{variant, mode, sc, size}, ".")
		b, err := os.ReadFile(filepath.Join(dir, "runs", name))
		if err != nil {
			missing = append(missing, name)
		}
		return Trace(b)
	}
	var cs []Check
	for _, sc := range glibcScenarios {
		cs = append(cs, ReferenceCheck("reference: glibc's DWARF fallback, "+sc,
			run("plain-libgcc", "sframe", sc, "full"), run("plain", "dwarf", sc, "full")))
	}
	for _, sc := range glibcScenarios {
		eq := func(name, variant, size string) {
			cs = append(cs, EqualCheck(name, run(variant, "sframe", sc, size), run(variant, "dwarf", sc, size)))
		}
		eq("ours --for glibc, "+sc+", full depth", "glibc", "full")
		eq("ours --for glibc + our libc, "+sc+", full depth", "libc-ours", "full")
		eq("ours V2, "+sc+", array of the DWARF length", "v2", "dwarflen")
		eq("ours V2 --pcrel, "+sc+", array of the DWARF length", "pcrel", "dwarflen")
		cs = append(cs, CountCheck("ours V2 --pcrel, "+sc+", full depth (RA-undefined FRE)", run("pcrel", "sframe", sc, "full"), 0))
		cs = append(cs, CountCheck("control: no .sframe, "+sc, run("plain", "sframe", sc, "full"), 0))
		eq("control: GNU as 2.44 --gsframe, "+sc+", full", "gnu", "full")
	}
	verify := func(name string) (string, bool) {
		out, err1 := os.ReadFile(filepath.Join(dir, "verify", name))
		st, err2 := os.ReadFile(filepath.Join(dir, "verify", name+".exit"))
		if err1 != nil || err2 != nil {
			missing = append(missing, "verify/"+name)
		}
		return string(out), strings.TrimSpace(string(st)) == "0"
	}
	intact, intactOK := verify("glibc")
	damaged, damagedOK := verify("damaged")
	cs = append(cs, VerifyCheck("control: damaged FRE, verify", intact, intactOK, damaged, damagedOK, "nofp_level"))
	for _, sc := range glibcScenarios {
		cs = append(cs, DamagedCheck("control: damaged FRE, "+sc, run("damaged", "sframe", sc, "full"), run("damaged", "dwarf", sc, "full")))
	}
	if GlibcReader(dir) != "" {
		for _, sc := range glibcScenarios {
			eq := func(name, variant string) {
				cs = append(cs, EqualCheck(name, run(variant, "sframe", sc, "full"), run(variant, "dwarf", sc, "full")))
			}
			eq("ours V3, "+sc+", full depth", "v3")
			eq("ours V3 + our V3 libc, "+sc+", full depth", "v3-libc")
			eq("ours V3 --signal-frames=false + our libc, "+sc+", full depth", "v3-nosig")
			eq("control: GNU as 2.47 --gsframe (V3), "+sc+", full", "gnu3")
		}
		intact, intactOK := verify("v3")
		damaged, damagedOK := verify("damaged3")
		cs = append(cs, VerifyCheck("control: damaged V3 FRE, verify", intact, intactOK, damaged, damagedOK, "nofp_level"))
		for _, sc := range glibcScenarios {
			name := "control: damaged V3 FRE, " + sc
			c := DamagedCheck(name, run("damaged3", "sframe", sc, "full"), run("damaged3", "dwarf", sc, "full"))
			// 0 frames says something only of a reader that walks the
			// intact V3 program: one that rejects V3 gives 0 too.
			if intact, d := run("v3", "sframe", sc, "full"), run("v3", "dwarf", sc, "full"); c.Status == "ok" && !SameFrames(intact, d) {
				c = Check{"FAIL", name, fmt.Sprintf("the intact V3 program gives %s SFrame frames, DWARF %s: the control tests nothing", intact.Count(), d.Count())}
			}
			cs = append(cs, c)
		}
	}
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("%s: no output of %s", dir, strings.Join(missing, ", "))
	}
	var b strings.Builder
	fails := 0
	for _, c := range cs {
		b.WriteString(c.String() + "\n")
		if c.Status != "ok" {
			fails++
		}
	}
	fmt.Fprintf(&b, "== %d failed\n", fails)
	return b.String(), cs, nil
}
