package judge

import (
	"bufio"
	"debug/elf"
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
)

// Variant is what a run's label says of its program, after its last dot:
// "ours" (cfi2sframe's default output), "for-kernel", "gnu" (GNU as
// --gsframe), "plain" (no .sframe), "damaged-lookup", "damaged-validate".
// The labels are PROG.VARIANT (x86-64) or PROG.BUILD.VARIANT (AArch64,
// BUILD saying the linker, static or dynamic, and PAC; see
// scripts/kernel-acceptance.sh).
func Variant(label string) string { return label[strings.LastIndex(label, ".")+1:] }

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
// right).
func KernelChecks(g *Guest, figs map[string]Figures, verify map[string]string, labels []string) []Check {
	var ours, anchors, plain, damaged []string
	for _, l := range labels {
		switch Variant(l) {
		case "ours", "for-kernel":
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
		cs = append(cs, Check{judged(ok), "ours " + label, text})
	}
	for _, label := range anchors {
		f := figs[label]
		cs = append(cs, Check{"info", "anchor " + label, fmt.Sprintf("GNU as 2.47 --gsframe (libc.a's objects have no .sframe): %d of %d deferred chains (%s) equal the true chain, %d (%s) stop at a known limit, %d wrong; right through main %d (%s); exit %s; verify --for kernel: %s",
			f.Equal, f.Spin, pct(f.Equal, f.Spin), f.Limit, pct(f.Limit, f.Spin), f.Wrong, f.ThroughMain, pct(f.ThroughMain, f.Spin), f.Exit, verify[label])})
	}
	for _, label := range plain {
		f := figs[label]
		text := fmt.Sprintf("no .sframe: %d of %d deferred chains equal the true chain, %d right through main (%s); exit %s", f.Equal, f.Spin, f.ThroughMain, plainWhy(label, f.Machine), f.Exit)
		cs = append(cs, Check{judged(f.Exit == "0" && f.Spin > 0 && f.Equal == 0 && f.ThroughMain == 0), "control " + label, text})
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
// program run), data.txt (the guest's output, see ParseGuest) and
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
		fg, rep := JudgeRun(st, truth, run)
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
// the objects it had mapped: a library by its copy in dir/bin/lib (the
// harness copies the ones it puts in the guest there), the vDSO and
// anything else by its range alone. It returns the program's machine too,
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
		base := m.Path[strings.LastIndex(m.Path, "/")+1:]
		lib := filepath.Join(dir, "bin", "lib", base)
		if _, err := os.Stat(lib); err != nil || !strings.HasPrefix(m.Path, "/") {
			lib = ""
		}
		if err := st.AddMapping(m, lib); err != nil {
			return nil, 0, false, err
		}
	}
	return st, machine, dynamic, nil
}
