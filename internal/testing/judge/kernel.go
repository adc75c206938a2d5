package judge

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// A Chain is one distinct call chain the reader recorded and how often.
type Chain struct {
	Count int
	IPs   []uint64
}

// A Run is what the reader (e2e/testdata/kernel/reader.c) and the guest's
// init wrote for one program: between "run LABEL" and "end LABEL" the
// deferred chains (D lines), the ordinary samples' chains (S lines), the
// program's executable mappings (M lines) and the "stat" lines; after it,
// up to the next run, what the run wrote to standard error (R lines: the
// preloaded sfreg.so's registrations) and the kernel log of the run (K
// lines).
type Run struct {
	Label    string
	Deferred []Chain
	Samples  []Chain
	Stats    map[string]string
	Stderr   []string
	KLog     []string
	Maps     []Mapping // the program's executable mappings (M lines)
}

// Guest is the data the kernel harness's guest wrote to its second serial
// port: the kernel's version ("boot" line), the dynamic debug line, the
// boot log lines about sframe or unwind (B lines) and the runs.
type Guest struct {
	Boot, Dyndbg string
	BootLog      []string
	Runs         map[string]*Run
}

// ParseGuest reads the guest's data (its CR LF line ends already made LF).
// Lines it does not know (the programs' own output) are skipped; a D or S
// line it cannot read is an error.
func ParseGuest(r io.Reader) (*Guest, error) {
	g := &Guest{Runs: map[string]*Run{}}
	var owner, in *Run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for ln := 1; sc.Scan(); ln++ {
		l := sc.Text()
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "boot" && g.Boot == "":
			g.Boot = strings.TrimPrefix(l, "boot ")
			continue
		case f[0] == "dyndbg" && g.Dyndbg == "":
			g.Dyndbg = strings.TrimPrefix(l, "dyndbg ")
			continue
		case f[0] == "B":
			g.BootLog = append(g.BootLog, strings.TrimPrefix(l, "B "))
			continue
		case f[0] == "run" && len(f) > 1:
			if owner = g.Runs[f[1]]; owner == nil {
				owner = &Run{Label: f[1], Stats: map[string]string{}}
				g.Runs[f[1]] = owner
			}
			in = owner
			continue
		case f[0] == "K":
			if owner != nil {
				owner.KLog = append(owner.KLog, strings.TrimPrefix(l, "K "))
			}
			continue
		case f[0] == "R" && in == nil:
			if owner != nil {
				owner.Stderr = append(owner.Stderr, strings.TrimPrefix(strings.TrimPrefix(l, "R"), " "))
			}
			continue
		}
		if in == nil {
			continue
		}
		switch f[0] {
		case "end":
			in = nil
		case "stat":
			if len(f) > 2 {
				in.Stats[f[1]] = f[2]
			}
		case "M":
			m, err := parseMapping(l)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", ln, err)
			}
			in.Maps = append(in.Maps, m)
		case "D", "S":
			c, err := parseChain(f)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", ln, err)
			}
			if f[0] == "D" {
				in.Deferred = append(in.Deferred, c)
			} else {
				in.Samples = append(in.Samples, c)
			}
		}
	}
	return g, sc.Err()
}

// parseMapping reads the line "M LO HI OFFSET PATH" (numbers in hex; the
// path is the rest of the line, spaces and all).
func parseMapping(l string) (Mapping, error) {
	f := strings.SplitN(l, " ", 5)
	if len(f) != 5 || f[4] == "" {
		return Mapping{}, fmt.Errorf("mapping line with %d fields, want 5 (M LO HI OFFSET PATH)", len(f))
	}
	var v [3]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[1+i], 16, 64)
		if err != nil {
			return Mapping{}, fmt.Errorf("bad number %q in M line", f[1+i])
		}
		v[i] = n
	}
	if v[1] <= v[0] {
		return Mapping{}, fmt.Errorf("empty mapping %s-%s in M line", f[1], f[2])
	}
	return Mapping{Lo: v[0], Hi: v[1], Off: v[2], Path: f[4]}, nil
}

// parseChain reads "D|S COUNT NR IP..." (IPs in hex).
func parseChain(f []string) (Chain, error) {
	if len(f) < 3 {
		return Chain{}, fmt.Errorf("%s line without count and length", f[0])
	}
	cnt, err1 := strconv.Atoi(f[1])
	n, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || n < 0 || len(f) != 3+n {
		return Chain{}, fmt.Errorf("bad %s line: count %q, length %q, %d addresses", f[0], f[1], f[2], len(f)-3)
	}
	c := Chain{Count: cnt, IPs: make([]uint64, n)}
	for i := range n {
		v, err := strconv.ParseUint(f[3+i], 16, 64)
		if err != nil {
			return Chain{}, fmt.Errorf("bad address %q in %s line", f[3+i], f[0])
		}
		c.IPs[i] = v
	}
	return c, nil
}

// Figures are the counts the harness reports for one run; the chains
// counted are deferred ones unless named otherwise.
type Figures struct {
	Exit         string // the program's exit status ("" if the reader wrote none)
	Deferred     int    // all deferred chains
	Spin         int    // Equal + Limit + Wrong: in the spinning functions
	Equal, Limit int
	Wrong, Other int
	ThroughMain  int
	Missing      int         // true chains never seen right (Equal or Limit)
	PerTruth     [][4]int    // per true chain: chains, equal, limit, wrong
	Samples      int         // ordinary samples
	SamplesSpin  int         // of which in the spinning functions
	SamplesEqual int         // of which equal to the true chain
	KernelLog    []string    // the run's kernel log lines about sframe or unwind
	Machine      elf.Machine // the program's (set by Kernel)
	// EndNoted are the true chains' frames at whose function's end
	// verify --for kernel noted return-at-end (limit 4).
	EndNoted []string
}

var sframeOrUnwind = regexp.MustCompile(`(?i)sframe|unwind`)

// JudgeRun classifies every chain of run against truth, resolved through
// st, and returns the figures and the report the harness prints for it.
func JudgeRun(st *Symtab, truth []Truth, run *Run) (Figures, string) {
	fg := Figures{Exit: run.Stats["exit"], PerTruth: make([][4]int, len(truth))}
	good := make([]bool, len(truth))
	var examples []string
	for _, c := range run.Deferred {
		v := Classify(st, truth, c.IPs)
		fg.Deferred += c.Count
		switch v.Class {
		case Equal:
			fg.Equal += c.Count
		case Limit:
			fg.Limit += c.Count
		case Wrong:
			fg.Wrong += c.Count
		case Other:
			fg.Other += c.Count
		}
		if v.ThroughMain {
			fg.ThroughMain += c.Count
		}
		if v.Truth >= 0 {
			good[v.Truth] = good[v.Truth] || v.Class == Equal || v.Class == Limit
			p := &fg.PerTruth[v.Truth]
			p[0] += c.Count
			if v.Class != Other {
				p[v.Class] += c.Count
			}
		}
		if v.Class != Equal {
			var s strings.Builder
			for _, ip := range c.IPs {
				s.WriteString(" " + st.Name(ip))
			}
			examples = append(examples, fmt.Sprintf("    %6d x %-6s %s:%s", c.Count, v.Class, v.Why, s.String()))
		}
	}
	fg.Spin = fg.Equal + fg.Limit + fg.Wrong
	for _, c := range run.Samples {
		v := Classify(st, truth, c.IPs)
		fg.Samples += c.Count
		if v.Class != Other {
			fg.SamplesSpin += c.Count
		}
		if v.Class == Equal {
			fg.SamplesEqual += c.Count
		}
	}
	for i, g := range good {
		if !g && !truth[i].Optional() {
			fg.Missing++
		}
	}
	for _, l := range run.KLog {
		if sframeOrUnwind.MatchString(l) {
			fg.KernelLog = append(fg.KernelLog, l)
		}
	}
	return fg, fg.report(run, truth, examples)
}

func (fg Figures) report(run *Run, truth []Truth, examples []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: exit %s; %d deferred chains (%d samples marked deferred, %d lost): in the spinning functions %d, equal to the true chain %d (%.1f%%), stopped at a known limit %d (%.1f%%), wrong %d; right through main %d (%.1f%%); outside the spinning functions %d\n",
		run.Label, fg.Exit, fg.Deferred, awkInt(run.Stats["deferred-marks"]), awkInt(run.Stats["deferred-lost"]),
		fg.Spin, fg.Equal, share(fg.Equal, fg.Spin), fg.Limit, share(fg.Limit, fg.Spin), fg.Wrong,
		fg.ThroughMain, share(fg.ThroughMain, fg.Spin), fg.Other)
	for i, t := range truth {
		p := fg.PerTruth[i]
		if t.Optional() {
			if p[0] > 0 {
				fmt.Fprintf(&b, "  innermost %s, called from %s (seldom sampled): %d chains, %d equal, %d at a known limit, %d wrong\n", t.Frames[0], calledFrom(t), p[0], p[Equal], p[Limit], p[Wrong])
			}
			continue
		}
		fmt.Fprintf(&b, "  innermost %s: %d chains, %d equal, %d at a known limit, %d wrong\n", t.Frames[0], p[0], p[Equal], p[Limit], p[Wrong])
	}
	fmt.Fprintf(&b, "  ordinary samples (frame-pointer walk at the sample): %d, in the spinning functions %d, equal to the true chain %d (%.1f%%)\n",
		fg.Samples, fg.SamplesSpin, fg.SamplesEqual, share(fg.SamplesEqual, fg.SamplesSpin))
	if n, ok := run.Stats["deferred-threads"]; ok {
		fmt.Fprintf(&b, "  threads sampled: %s; samples of threads other than the first: %d\n", n, awkInt(run.Stats["deferred-other-threads"]))
	}
	for i, e := range examples {
		if i == 12 {
			fmt.Fprintf(&b, "    ... %d more distinct chains\n", len(examples)-12)
			break
		}
		b.WriteString(e + "\n")
	}
	if len(fg.KernelLog) == 0 {
		b.WriteString("  kernel log: no line about sframe/unwind\n")
	}
	for _, l := range fg.KernelLog {
		b.WriteString("  kernel log: " + l + "\n")
	}
	for _, l := range run.Stderr {
		if strings.HasPrefix(l, "sfreg:") {
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

// calledFrom is the second frame of an optional true chain, its caller,
// which tells it from the required one with the same innermost frame.
func calledFrom(t Truth) string {
	if len(t.Frames) > 1 {
		return t.Frames[1]
	}
	return "nothing"
}

// share is 100*a/b, 0 when b is 0.
func share(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// awkInt is a stat's value as awk's %d prints it: its leading digits, 0
// when it has none.
func awkInt(s string) int {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(s[:end])
	return n
}
