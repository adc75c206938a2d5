package judge

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A Check is one judged property of a harness run: Status is "ok", "FAIL"
// or "info" (reported, not judged).
type Check struct {
	Status, Name, Text string
}

func (c Check) String() string { return c.Status + " " + c.Name + " | " + c.Text }

func judged(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// pct is 100*a/b with one decimal and a percent sign, "-" when b is 0.
func pct(a, b int) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", share(a, b))
}

// ParseVerifyLog reads the kernel harness's verify.log: a line "verify
// FILE pass|fail OUTPUT" per file `cfi2sframe verify --for kernel` ran on.
// It returns the status by file name.
func ParseVerifyLog(r io.Reader) (map[string]string, error) {
	m := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "verify" {
			m[f[1]] = f[2]
		}
	}
	return m, sc.Err()
}

// ParseVerifyLimits reads the "limits FILE JSON" lines of the kernel
// harness's verify.log: `cfi2sframe verify --for kernel --json` on FILE,
// on one line. It returns by file the addresses at which verify noted the
// limit rule (return-at-end: the return address of a call that ends a
// function, which the kernel looks up as it is; its PC is that address).
func ParseVerifyLimits(r io.Reader, rule string) (map[string]map[uint64]bool, error) {
	m := map[string]map[uint64]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<26)
	for ln := 1; sc.Scan(); ln++ {
		l := sc.Text()
		if !strings.HasPrefix(l, "limits ") {
			continue
		}
		file, js, ok := strings.Cut(strings.TrimPrefix(l, "limits "), " ")
		if !ok {
			return nil, fmt.Errorf("verify.log line %d: limits line without JSON", ln)
		}
		var rs []struct {
			Limits []struct {
				Rule string `json:"rule"`
				PC   uint64 `json:"pc"`
			} `json:"limits"`
		}
		if err := json.Unmarshal([]byte(js), &rs); err != nil {
			return nil, fmt.Errorf("verify.log line %d (%s): %v", ln, file, err)
		}
		pcs := map[uint64]bool{}
		for _, r := range rs {
			for _, v := range r.Limits {
				if v.Rule == rule {
					pcs[v.PC] = true
				}
			}
		}
		m[file] = pcs
	}
	return m, sc.Err()
}

// noted keeps of the true chains' AtEnd frames those at whose end verify
// --for kernel noted return-at-end (pcs, the file's notes; nil: none), so
// that the model of the kernel and what it did are tied: a chain that
// goes wrong after a return address verify did not predict is wrong. It
// returns the truth so edited and the names of the true chains' frames
// (AtEnd or not) whose end verify noted.
func noted(st *Symtab, truth []Truth, pcs map[uint64]bool) ([]Truth, []string) {
	var names []string
	out := make([]Truth, len(truth))
	for i, t := range truth {
		t.AtEnd = slices.DeleteFunc(slices.Clone(t.AtEnd), func(n string) bool {
			e, ok := st.End(n)
			return !ok || !pcs[e]
		})
		out[i] = t
		for _, n := range t.Frames {
			if e, ok := st.End(n); ok && pcs[e] && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return out, names
}

func countMatching(lines []string, re *regexp.Regexp) int {
	n := 0
	for _, l := range lines {
		if re.MatchString(l) {
			n++
		}
	}
	return n
}

var (
	sframeLine    = regexp.MustCompile(`(?i)sframe`)
	removedLine   = regexp.MustCompile(`removing bad .sframe section`)
	refusedLine   = regexp.MustCompile(`sframe: .*(safe_read_fre|safe_read_fde|not sorted)`)
	kernelOurs    = []string{"chain.ours", "drap.ours", "plt.ours", "chain.for-kernel", "drap.for-kernel", "signal.for-kernel", "plt.for-kernel", "goprog.for-kernel", "signal.ours", "dyn.ours+pre", "dyn.for-kernel+pre", "noreturn.ours", "noreturn.for-kernel"}
	kernelAnchors = []string{"chain.gnu", "drap.gnu", "signal.gnu", "plt.gnu", "dyn.gnu+pre", "dyn.gnu", "noreturn.gnu"}
	kernelPlain   = []string{"chain.plain", "drap.plain", "signal.plain", "plt.plain", "goprog.plain", "dyn.plain+pre", "dyn.plain", "noreturn.plain"}
	// kernelNoreturn are the runs of noreturn whose callers' ends
	// (limit 4) are judged: ours must walk spin_pad's chains right
	// through pad_caller's end (the FDE extended over it: verify notes
	// nothing there) and spin_next's to next_caller's end, which verify
	// must have noted; GNU's are reported.
	kernelNoreturn = []string{"noreturn.ours", "noreturn.for-kernel", "noreturn.gnu"}
	// kernelUnregistered are the runs of a dynamically linked program
	// whose libraries have .sframe that nothing registers (no sfreg.so
	// preloaded): their frames are walked by the frame pointer
	// (docs/acceptance.md, limit 5).
	kernelUnregistered = []string{"dyn.ours", "dyn.for-kernel"}
	registeredLine     = regexp.MustCompile(`^sfreg: (\S+): sframe .*: registered$`)
)

// registered lists the objects the run's preloaded sfreg.so registered
// with sframe_register, by file name.
func registered(r *Run) []string {
	var objs []string
	if r == nil {
		return nil
	}
	for _, l := range r.Stderr {
		if m := registeredLine.FindStringSubmatch(l); m != nil {
			objs = append(objs, filepath.Base(m[1]))
		}
	}
	return objs
}

// isPreloaded reports whether label is a run with sfreg.so preloaded.
func isPreloaded(label string) bool { return strings.HasSuffix(label, "+pre") }

// plainWhy says why a program without .sframe gives no right chain: the
// kernel falls back to the frame pointer, which the C programs do not
// keep and which goprog's leaf does not save (its caller is skipped).
func plainWhy(label string) string {
	if strings.HasPrefix(label, "goprog.") {
		return "the frame-pointer fallback, which skips the caller of a leaf without a frame"
	}
	return "the frame-pointer fallback on -fomit-frame-pointer code"
}

// KernelChecks judges the runs by their figures: our outputs (every chain
// in the spinning functions right or at a known limit, every true chain
// seen, exit 0, no kernel log line about sframe, verify --for kernel
// passes; the default output of signal only reported, it has no signal
// FDE), GNU as --gsframe's (reported), the programs without .sframe (no
// chain right, none right through main) and the two damaged copies
// (verify fails, the kernel removes or refuses the section, no chain
// right). The dynamically linked program with sfreg.so preloaded is one of
// ours, which also needs sfreg.so to have registered libchain.so's and
// libc.so.6's sections; without it its libraries are not registered
// (limit 5), and no chain may come out right.
func KernelChecks(g *Guest, figs map[string]Figures, verify map[string]string) []Check {
	var cs []Check
	klog := func(label string) []string {
		if r := g.Runs[label]; r != nil {
			return r.KLog
		}
		return nil
	}
	for _, label := range kernelOurs {
		f := figs[label]
		bad := countMatching(klog(label), sframeLine)
		text := fmt.Sprintf("%d of %d deferred chains (%s) equal the true chain, %d (%s) stop at a known limit, %d wrong; %d true chains never seen; exit %s; %d kernel log lines about sframe; verify --for kernel: %s",
			f.Equal, f.Spin, pct(f.Equal, f.Spin), f.Limit, pct(f.Limit, f.Spin), f.Wrong, f.Missing, f.Exit, bad, verify[label])
		ok := f.Exit == "0" && f.Spin > 0 && f.Wrong == 0 && f.Missing == 0 && bad == 0 && verify[label] == "pass"
		if isPreloaded(label) {
			// The libraries' sections were registered: libchain.so's
			// and libc.so.6's.
			objs := registered(g.Runs[label])
			text += fmt.Sprintf("; registered by sframe_register: %s", strings.Join(objs, " "))
			ok = ok && slices.Contains(objs, "libchain.so") && slices.Contains(objs, "libc.so.6")
		}
		cs = append(cs, Check{judged(ok), "ours " + label, text})
	}
	for _, label := range kernelUnregistered {
		f := figs[label]
		text := fmt.Sprintf("libraries not registered (no sframe_register: the frame-pointer fallback in their frames): %d of %d deferred chains equal the true chain, %d stop at a known limit, %d wrong; right through main %d; exit %s",
			f.Equal, f.Spin, f.Limit, f.Wrong, f.ThroughMain, f.Exit)
		cs = append(cs, Check{judged(f.Exit == "0" && f.Spin > 0 && f.Equal == 0), "unregistered " + label, text})
	}
	for _, label := range kernelAnchors {
		f := figs[label]
		what := "libc.a's objects have no .sframe"
		if strings.HasPrefix(label, "dyn.") {
			what = "libc.so.6 has no .sframe"
			if isPreloaded(label) {
				what += "; libchain.so's registered"
			}
		}
		cs = append(cs, Check{"info", "anchor " + label, fmt.Sprintf("GNU as 2.47 --gsframe (%s): %d of %d deferred chains (%s) equal the true chain, %d (%s) stop at a known limit, %d wrong; right through main %d (%s); exit %s; verify --for kernel: %s",
			what, f.Equal, f.Spin, pct(f.Equal, f.Spin), f.Limit, pct(f.Limit, f.Spin), f.Wrong, f.ThroughMain, pct(f.ThroughMain, f.Spin), f.Exit, verify[label])})
	}
	for _, label := range kernelPlain {
		f := figs[label]
		text := fmt.Sprintf("no .sframe: %d of %d deferred chains equal the true chain, %d right through main (%s); exit %s", f.Equal, f.Spin, f.ThroughMain, plainWhy(label), f.Exit)
		cs = append(cs, Check{judged(f.Exit == "0" && f.Spin > 0 && f.Equal == 0 && f.ThroughMain == 0), "control " + label, text})
	}
	for _, label := range kernelNoreturn {
		f := figs[label]
		var pad, next [4]int
		if len(f.PerTruth) == 2 {
			pad, next = f.PerTruth[0], f.PerTruth[1]
		}
		text := fmt.Sprintf("spin_pad (pad_caller ends with the call, padding follows): %d chains, %d equal, %d at a known limit, %d wrong; spin_next (next_caller ends with the call, after_next follows): %d chains, %d equal, %d at a known limit (return-at-end), %d wrong; verify --for kernel noted return-at-end at the end of: %s",
			pad[0], pad[Equal], pad[Limit], pad[Wrong], next[0], next[Equal], next[Limit], next[Wrong], strings.Join(f.EndNoted, " "))
		if label == "noreturn.gnu" {
			cs = append(cs, Check{"info", "noreturn " + label, "GNU as 2.47 --gsframe: " + text})
			continue
		}
		ok := pad[0] > 0 && pad[Equal] == pad[0] && next[0] > 0 && next[Wrong] == 0 &&
			slices.Contains(f.EndNoted, "next_caller") && !slices.Contains(f.EndNoted, "pad_caller")
		cs = append(cs, Check{judged(ok), "noreturn " + label, text})
	}
	label := "chain.damaged-lookup"
	f := figs[label]
	removed := countMatching(klog(label), removedLine)
	cs = append(cs, Check{judged(verify[label] == "fail" && removed >= 1 && f.Equal == 0), "control " + label,
		fmt.Sprintf("verify --for kernel: %s; kernel: %d 'removing bad .sframe section'; %d of %d chains equal the true chain", verify[label], removed, f.Equal, f.Spin)})
	label = "chain.damaged-validate"
	f = figs[label]
	refused := countMatching(klog(label), refusedLine)
	cs = append(cs, Check{judged(verify[label] == "fail" && refused >= 1 && f.Equal == 0), "control " + label,
		fmt.Sprintf("verify --for kernel: %s; kernel: %d validation failures at exec; %d of %d chains equal the true chain", verify[label], refused, f.Equal, f.Spin)})
	return cs
}

// objectsMapped counts the files among a run's mappings.
func objectsMapped(maps []Mapping) int {
	seen := map[string]bool{}
	for _, m := range maps {
		seen[m.Path] = true
	}
	return len(seen)
}

// Kernel judges the artefacts scripts/kernel-acceptance.sh leaves in dir:
// runs (a label and the program's arguments per line), bin/LABEL (each
// program run), root/ (the guest's files: a dynamically linked program's
// objects, found through its run's mappings), data.txt (the guest's output, see ParseGuest) and
// verify.log (see ParseVerifyLog). It returns the report the harness
// prints (the kernel, the boot log, verify's verdicts, each run's figures,
// the checks) and the checks.
func Kernel(dir string) (string, []Check, error) {
	runs, err := os.ReadFile(filepath.Join(dir, "runs"))
	if err != nil {
		return "", nil, err
	}
	data, err := os.Open(filepath.Join(dir, "data.txt"))
	if err != nil {
		return "", nil, err
	}
	defer data.Close()
	g, err := ParseGuest(data)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %v", data.Name(), err)
	}
	vf, err := os.ReadFile(filepath.Join(dir, "verify.log"))
	if err != nil {
		return "", nil, err
	}
	verify, _ := ParseVerifyLog(strings.NewReader(string(vf)))
	limits, err := ParseVerifyLimits(strings.NewReader(string(vf)), "return-at-end")
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nkernel: %s\n", g.Boot)
	if g.Dyndbg != "" {
		fmt.Fprintf(&b, "dynamic debug: %s\n", g.Dyndbg)
	}
	for _, l := range g.BootLog {
		fmt.Fprintf(&b, "boot log: %s\n", l)
	}
	b.WriteString("\nverify --for kernel:\n")
	if len(vf) > 0 {
		for _, l := range strings.Split(strings.TrimSuffix(string(vf), "\n"), "\n") {
			if strings.HasPrefix(l, "limits ") {
				continue // verify --json's notes: see the runs'
			}
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("\n")
	figs := map[string]Figures{}
	for _, l := range strings.Split(string(runs), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		label := f[0]
		prog, _, _ := strings.Cut(label, ".")
		truth, err := ParseTruth(KernelTruth, prog)
		if err != nil {
			return "", nil, err
		}
		run := g.Runs[label]
		if run == nil {
			run = &Run{Label: label, Stats: map[string]string{}}
		}
		var st *Symtab
		if objectsMapped(run.Maps) > 1 {
			// A dynamically linked program: its objects where the
			// reader saw them, read from the guest's root.
			st, err = LoadMapped(filepath.Join(dir, "root"), run.Maps)
		} else {
			st, err = LoadSymtab(filepath.Join(dir, "bin", label))
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", label, err)
		}
		truth, names := noted(st, truth, limits[label])
		fg, rep := JudgeRun(st, truth, run)
		fg.EndNoted = names
		figs[label] = fg
		b.WriteString(rep)
	}
	b.WriteString("\n")
	cs := KernelChecks(g, figs, verify)
	for _, c := range cs {
		b.WriteString(c.String() + "\n")
	}
	return b.String(), cs, nil
}
