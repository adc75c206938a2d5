package judge

import (
	"bufio"
	"debug/elf"
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
	sframeLine  = regexp.MustCompile(`(?i)sframe`)
	removedLine = regexp.MustCompile(`removing bad .sframe section`)
	refusedLine = regexp.MustCompile(`sframe: .*(safe_read_fre|safe_read_fde|not sorted)`)
	// registeredLine is sfreg.so's line for an object whose .sframe
	// sframe_register took.
	registeredLine = regexp.MustCompile(`^sfreg: (\S+): sframe .*: registered$`)
)

// registered lists the objects the run's preloaded sfreg.so registered
// with sframe_register, by file name.
func registered(r *Run) []string {
	if r == nil {
		return nil
	}
	var objs []string
	for _, l := range r.Stderr {
		if m := registeredLine.FindStringSubmatch(l); m != nil {
			objs = append(objs, filepath.Base(m[1]))
		}
	}
	return objs
}

// isPreloaded reports whether label is a run with sfreg.so preloaded
// (LABEL+pre).
func isPreloaded(label string) bool { return strings.HasSuffix(label, "+pre") }

// hasOwnLibraries reports whether label's program is dyn, which runs with
// libraries of its variant (libchain.so and libc.so.6, converted for ours
// and for-kernel), whose .sframe only sfreg.so registers: without it, the
// libraries' frames are walked by the frame pointer (docs/acceptance.md,
// limit 5).
func hasOwnLibraries(label string) bool { return strings.HasPrefix(label, "dyn.") }

// endsWithCalls reports whether label's program is noreturn, whose callers
// end with a call (limit 4): its ours, for-kernel and gnu runs get a check
// of their own, of the callers' ends.
func endsWithCalls(label string) bool { return strings.HasPrefix(label, "noreturn.") }

// Variant is what a run's label says of its program, after its last dot:
// "ours" (cfi2sframe's default output), "for-kernel", "gnu" (GNU as
// --gsframe), "plain" (no .sframe), "damaged-lookup", "damaged-validate".
// The labels are PROG.VARIANT (x86-64) or PROG.BUILD.VARIANT (AArch64,
// BUILD saying the linker, static or dynamic, and PAC; see
// scripts/kernel-acceptance.sh), and "+pre" after them for a run with
// sfreg.so preloaded (dyn.ours+pre), whose variant is the same.
func Variant(label string) string {
	label = strings.TrimSuffix(label, "+pre")
	return label[strings.LastIndex(label, ".")+1:]
}

// plainWhy says why a program without .sframe gives no right chain: the
// kernel falls back to the frame pointer, which the C programs do not
// keep and which goprog's leaf does not save (its caller is skipped); on
// s390x it has no fallback and stops after the first frame.
func plainWhy(label string, m elf.Machine) string {
	if m == elf.EM_S390 {
		return "no frame-pointer fallback on s390x: one frame"
	}
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
// right). The dynamically linked program dyn with sfreg.so preloaded is
// one of ours, which also needs sfreg.so to have registered libchain.so's
// and libc.so.6's sections; without it its libraries are not registered
// (limit 5), and no chain may come out right. noreturn's converted
// variants must also walk every spin_pad chain right through pad_caller's
// end (the FDE extended over it: verify notes nothing there) and no
// spin_next chain wrong, verify having noted return-at-end at
// next_caller's end (limit 4); GNU's are reported.
func KernelChecks(g *Guest, figs map[string]Figures, verify map[string]string, labels []string) []Check {
	var ours, unregistered, anchors, plain, damaged []string
	for _, l := range labels {
		switch Variant(l) {
		case "ours", "for-kernel":
			if hasOwnLibraries(l) && !isPreloaded(l) {
				unregistered = append(unregistered, l)
				continue
			}
			ours = append(ours, l)
		case "gnu":
			anchors = append(anchors, l)
		case "plain":
			plain = append(plain, l)
		case "damaged-lookup", "damaged-validate":
			damaged = append(damaged, l)
		}
	}
	var cs []Check
	klog := func(label string) []string {
		if r := g.Runs[label]; r != nil {
			return r.KLog
		}
		return nil
	}
	for _, label := range ours {
		f := figs[label]
		bad := countMatching(klog(label), sframeLine)
		text := fmt.Sprintf("%d of %d deferred chains (%s) equal the true chain, %d (%s) stop at a known limit, %d wrong; %d true chains never seen; exit %s; %d kernel log lines about sframe; verify --for kernel: %s",
			f.Equal, f.Spin, pct(f.Equal, f.Spin), f.Limit, pct(f.Limit, f.Spin), f.Wrong, f.Missing, f.Exit, bad, verify[label])
		ok := f.Exit == "0" && f.Spin > 0 && f.Wrong == 0 && f.Missing == 0 && bad == 0 && verify[label] == "pass"
		if hasOwnLibraries(label) {
			// The libraries' sections were registered: libchain.so's
			// and libc.so.6's.
			objs := registered(g.Runs[label])
			text += fmt.Sprintf("; registered by sframe_register: %s", strings.Join(objs, " "))
			ok = ok && slices.Contains(objs, "libchain.so") && slices.Contains(objs, "libc.so.6")
		}
		cs = append(cs, Check{judged(ok), "ours " + label, text})
	}
	for _, label := range unregistered {
		f := figs[label]
		text := fmt.Sprintf("libraries not registered (no sframe_register: the frame-pointer fallback in their frames): %d of %d deferred chains equal the true chain, %d stop at a known limit, %d wrong; right through main %d; exit %s",
			f.Equal, f.Spin, f.Limit, f.Wrong, f.ThroughMain, f.Exit)
		cs = append(cs, Check{judged(f.Exit == "0" && f.Spin > 0 && f.Equal == 0), "unregistered " + label, text})
	}
	for _, label := range anchors {
		f := figs[label]
		what := "libc.a's objects have no .sframe"
		if hasOwnLibraries(label) {
			what = "libc.so.6 has no .sframe"
			if isPreloaded(label) {
				what += "; libchain.so's registered"
			}
		}
		cs = append(cs, Check{"info", "anchor " + label, fmt.Sprintf("GNU as 2.47 --gsframe (%s): %d of %d deferred chains (%s) equal the true chain, %d (%s) stop at a known limit, %d wrong; right through main %d (%s); exit %s; verify --for kernel: %s",
			what, f.Equal, f.Spin, pct(f.Equal, f.Spin), f.Limit, pct(f.Limit, f.Spin), f.Wrong, f.ThroughMain, pct(f.ThroughMain, f.Spin), f.Exit, verify[label])})
	}
	for _, label := range plain {
		f := figs[label]
		text := fmt.Sprintf("no .sframe: %d of %d deferred chains equal the true chain, %d right through main (%s); exit %s", f.Equal, f.Spin, f.ThroughMain, plainWhy(label, f.Machine), f.Exit)
		cs = append(cs, Check{judged(f.Exit == "0" && f.Spin > 0 && f.Equal == 0 && f.ThroughMain == 0), "control " + label, text})
	}
	for _, label := range labels {
		if !endsWithCalls(label) || !slices.Contains([]string{"ours", "for-kernel", "gnu"}, Variant(label)) {
			continue
		}
		f := figs[label]
		var pad, next [4]int
		if len(f.PerTruth) == 2 {
			pad, next = f.PerTruth[0], f.PerTruth[1]
		}
		text := fmt.Sprintf("spin_pad (pad_caller ends with the call, padding follows): %d chains, %d equal, %d at a known limit, %d wrong; spin_next (next_caller ends with the call, after_next follows): %d chains, %d equal, %d at a known limit (return-at-end), %d wrong; verify --for kernel noted return-at-end at the end of: %s",
			pad[0], pad[Equal], pad[Limit], pad[Wrong], next[0], next[Equal], next[Limit], next[Wrong], strings.Join(f.EndNoted, " "))
		if Variant(label) == "gnu" {
			cs = append(cs, Check{"info", "noreturn " + label, "GNU as 2.47 --gsframe: " + text})
			continue
		}
		ok := pad[0] > 0 && pad[Equal] == pad[0] && next[0] > 0 && next[Wrong] == 0 &&
			slices.Contains(f.EndNoted, "next_caller") && !slices.Contains(f.EndNoted, "pad_caller")
		cs = append(cs, Check{judged(ok), "noreturn " + label, text})
	}
	for _, label := range damaged {
		f := figs[label]
		if Variant(label) == "damaged-lookup" {
			removed := countMatching(klog(label), removedLine)
			cs = append(cs, Check{judged(verify[label] == "fail" && removed >= 1 && f.Equal == 0), "control " + label,
				fmt.Sprintf("verify --for kernel: %s; kernel: %d 'removing bad .sframe section'; %d of %d chains equal the true chain", verify[label], removed, f.Equal, f.Spin)})
			continue
		}
		refused := countMatching(klog(label), refusedLine)
		cs = append(cs, Check{judged(verify[label] == "fail" && refused >= 1 && f.Equal == 0), "control " + label,
			fmt.Sprintf("verify --for kernel: %s; kernel: %d validation failures at exec; %d of %d chains equal the true chain", verify[label], refused, f.Equal, f.Spin)})
	}
	return cs
}

// Kernel judges the artefacts scripts/kernel-acceptance.sh leaves in dir:
// runs (a label and the program's arguments per line), bin/LABEL (each
// program run), root/ (the guest's files: the libraries a run's mappings
// name), data.txt (the guest's output, see ParseGuest) and
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
	var labels []string
	for _, l := range strings.Split(string(runs), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		label := f[0]
		labels = append(labels, label)
		prog, _, _ := strings.Cut(label, ".")
		run := g.Runs[label]
		if run == nil {
			run = &Run{Label: label, Stats: map[string]string{}}
		}
		st, machine, dynamic, err := runSymtab(dir, label, run.Maps)
		if err != nil {
			return "", nil, err
		}
		truth, err := ParseTruthFor(KernelTruthFor(machine), prog, dynamic)
		if err != nil {
			return "", nil, err
		}
		truth, names := noted(st, truth, limits[label])
		fg, rep := JudgeRun(st, truth, run)
		fg.EndNoted = names
		fg.Machine = machine
		figs[label] = fg
		b.WriteString(rep)
	}
	b.WriteString("\n")
	cs := KernelChecks(g, figs, verify, labels)
	for _, c := range cs {
		b.WriteString(c.String() + "\n")
	}
	return b.String(), cs, nil
}

// runSymtab resolves the chains of the run label in dir: the program's
// symbols (dir/bin/LABEL), moved to where the run's mappings put it, and
// the objects it had mapped: a library by the file the guest had at its
// path, in dir/root (the initramfs's tree), the vDSO and anything else by
// its range alone. It returns the program's machine too,
// and whether it is dynamically linked (has a PT_INTERP).
func runSymtab(dir, label string, maps []Mapping) (*Symtab, elf.Machine, bool, error) {
	path := filepath.Join(dir, "bin", label)
	f, err := elf.Open(path)
	if err != nil {
		return nil, 0, false, err
	}
	machine := f.Machine
	dynamic := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	f.Close()
	st, err := LoadSymtab(path)
	if err != nil {
		return nil, 0, false, err
	}
	// The program first: RelocateProgram moves every name it has.
	isProg := func(m Mapping) bool { return m.Path[strings.LastIndex(m.Path, "/")+1:] == label }
	for _, m := range maps {
		if isProg(m) {
			if err := st.RelocateProgram(path, m); err != nil {
				return nil, 0, false, err
			}
			break
		}
	}
	for _, m := range maps {
		if isProg(m) {
			continue
		}
		lib := ""
		if strings.HasPrefix(m.Path, "/") {
			lib = filepath.Join(dir, "root", m.Path)
			if fi, err := os.Stat(lib); err != nil || !fi.Mode().IsRegular() {
				lib = ""
			}
		}
		if err := st.AddMapping(m, lib); err != nil {
			return nil, 0, false, err
		}
	}
	return st, machine, dynamic, nil
}
