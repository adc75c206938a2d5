package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// TestGoPrograms converts Go programs with no call-frame information at
// all (-ldflags='-s -w') and cgo programs whose .eh_frame covers only
// their C parts, from their function tables (.gopclntab): the output
// runs and prints what the input printed, verifies against the CFI the
// table gives and against the kernel's rules, and covers the code
// (report's all-code share), where the input read 0% or was refused.
func TestGoPrograms(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("builds x86-64, AArch64 and s390x Linux programs")
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	qemu := need(t, "qemu-aarch64-static")
	qemuS390X := need(t, "qemu-s390x-static")
	for _, c := range []gobuild.Config{
		{GOARCH: "amd64", Strip: true},
		{GOARCH: "amd64", Strip: true, Cgo: true},
		{GOARCH: "amd64", Strip: true, PIE: true},
		{GOARCH: "arm64", Strip: true},
		{GOARCH: "arm64", Strip: true, Cgo: true},
		// s390x: Go's frames put the caller's SP at the CFA, the ABI's
		// SFrame 160 below it; the CFA is moved (translate's rebase).
		{GOARCH: "s390x", Strip: true},
		{GOARCH: "amd64"}, // with DWARF: the table's FDEs win over Go's .debug_frame
	} {
		t.Run(c.String(), func(t *testing.T) {
			dir := filepath.Join(tmp, strings.NewReplacer("/", "_", " ", "_").Replace(c.String()))
			os.MkdirAll(dir, 0o755)
			bin := gobuild.Build(t, dir, c)
			out := bin + ".sf"
			if o, err := exec.Command(c2s, bin, "-o", out).CombinedOutput(); err != nil {
				t.Fatalf("convert: %v\n%s", err, o)
			}
			runIt := func(p string) string {
				cmd := exec.Command(p, "a", "b")
				switch c.GOARCH {
				case "arm64":
					cmd = exec.Command(qemu, "-L", "/usr/aarch64-linux-gnu", p, "a", "b")
				case "s390x":
					cmd = exec.Command(qemuS390X, p, "a", "b")
				}
				o, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", p, err, o)
				}
				return string(o)
			}
			if a, b := runIt(bin), runIt(out); a != b {
				t.Errorf("the converted program prints %q, the original %q", b, a)
			}
			for _, args := range [][]string{{"verify", out}, {"verify", "--for", "kernel", out}} {
				if o, err := exec.Command(c2s, args...).CombinedOutput(); err != nil {
					t.Errorf("%v: %v\n%s", args, err, o)
				}
			}
			checkGoSFrame(t, out)
			o, err := exec.Command(c2s, "report", "--json", out).Output()
			if err != nil {
				t.Fatal(err)
			}
			var rep struct {
				Total struct {
					CodeBytes  uint64 `json:"code_bytes"`
					SFrameCode uint64 `json:"sframe_covered_code_bytes"`
				} `json:"total"`
			}
			if err := json.Unmarshal(o, &rep); err != nil {
				t.Fatal(err)
			}
			// The rest is padding between functions, the PLT of a cgo
			// program, and the C start-up code without CFI.
			if share := float64(rep.Total.SFrameCode) / float64(rep.Total.CodeBytes); share < 0.9 {
				t.Errorf("SFrame covers %.1f%% of the code; want 90%% or more", 100*share)
			}
		})
	}
}

// checkGoSFrame checks what the function table's CFI gives two
// functions, found by name in the table itself (the binary has no
// symbols): runtime.goexit, where a goroutine's stack begins, is an
// outermost frame; main.main on x86-64 has its CFA at SP+8 at its entry.
func checkGoSFrame(t *testing.T, file string) {
	t.Helper()
	tab, err := sframe.OpenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	pcln, err := gopclntab.Open(ef)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]uint64{}
	for f, err := range pcln.Funcs() {
		if err != nil {
			t.Fatal(err)
		}
		entries[f.Name] = f.Entry
	}
	goexit, ok := entries["runtime.goexit"]
	if !ok {
		t.Fatal("no runtime.goexit in the function table")
	}
	if r, err := tab.Lookup(goexit); err != nil || !r.RAUndefined {
		t.Errorf("runtime.goexit at %#x: %+v, %v; want an outermost row", goexit, r, err)
	}
	if ef.Machine == elf.EM_X86_64 {
		pc := entries["main.main"]
		if r, err := tab.Lookup(pc); err != nil || r.RAUndefined || r.CFA.Offset != 8 {
			t.Errorf("main.main at %#x: %+v, %v; want CFA = SP+8 at its entry", pc, r, err)
		}
	}
}

// TestTraceGo samples a CPU-bound Go program (gobuild.Spin: 16
// goroutines in a recursive main.fib) converted from its function
// table, with trace --check dwarf: with DWARF (Go's linker's
// .debug_frame is then what the walks are checked against, frame by
// frame), with cgo, stripped (no DWARF: the table's own FDEs), and with
// DWARF by the oldest Go installed (Debian's). At least 99% of the walks
// must reach an outermost frame, and of the program's own samples to
// runtime.goexit; no frame may disagree (checkGoStacks for the rest).
func TestTraceGo(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("traces x86-64 Linux processes")
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	skipWithoutPtrace(t, c2s)
	spin := map[string]string{"main.go": gobuild.Spin}
	configs := []gobuild.Config{
		{GOARCH: "amd64", Files: spin},
		{GOARCH: "amd64", Cgo: true, Files: spin},
		{GOARCH: "amd64", Strip: true, Files: spin},
	}
	if old := gobuild.OldGos(); len(old) > 0 { // Debian's golang-go, the oldest
		configs = append(configs, gobuild.Config{Go: old[0], GOARCH: "amd64", Files: spin})
	}
	for _, c := range configs {
		t.Run(c.String(), func(t *testing.T) {
			dir := filepath.Join(tmp, c.String())
			os.MkdirAll(dir, 0o755)
			bin := gobuild.Build(t, dir, c)
			prog, folded := bin+".sf", bin+".folded"
			if o, err := exec.Command(c2s, "-q", bin, "-o", prog).CombinedOutput(); err != nil {
				t.Fatalf("convert: %v\n%s", err, o)
			}
			out, err := exec.Command(c2s, "trace", "--check", "dwarf", "-F", "499", "--folded", folded, "--", prog, "1s").CombinedOutput()
			if err != nil {
				t.Fatalf("trace: %v\n%s", err, out)
			}
			s := parseTraceSummary(t, string(out))
			if s.samples < 100 || float64(s.outermost) < 0.99*float64(s.samples) {
				t.Errorf("%d of %d walks reach an outermost frame; want 99%% of at least 100:\n%s", s.outermost, s.samples, out)
			}
			if s.compared == 0 || s.agree != s.compared {
				t.Errorf("DWARF check: %d of %d frames agree; want all:\n%s", s.agree, s.compared, out)
			}
			if !c.Strip && !strings.Contains(string(out), "in Go functions (Go's linker's .debug_frame)") {
				t.Errorf("the DWARF check does not say what it left out of Go's .debug_frame:\n%s", out)
			}
			checkGoStacks(t, readFolded(t, folded), string(out))
		})
	}
}

// checkGoStacks checks the folded stacks of gobuild.Spin: at least 99% of
// the samples in the program's own code (main.fib) walk to
// runtime.goexit, where a goroutine's stack begins, and main.fib is the
// hottest leaf of the goroutines' stacks. (The rest of the samples are
// the runtime's threads, idle or in the scheduler: their walks end at
// runtime.mstart or runtime.mcall. A walk through runtime.asyncPreempt,
// which the runtime calls from a signal with the interrupted PC as its
// return address, looks that PC up minus one, as for any return address:
// where that byte is another row's, the walk ends early.)
func checkGoStacks(t *testing.T, stacks map[string]int, out string) {
	t.Helper()
	norm := func(f string) string { return strings.TrimSuffix(f, ".abi0") }
	own, ownGoexit := 0, 0
	leaf := map[string]int{}
	for stack, n := range stacks {
		frames := strings.Split(stack, ";")
		rooted := norm(frames[0]) == "runtime.goexit"
		if strings.Contains(stack, ";main.fib") {
			own += n
			if rooted {
				ownGoexit += n
			}
		}
		if rooted {
			leaf[norm(frames[len(frames)-1])] += n
		}
	}
	if own == 0 || float64(ownGoexit) < 0.99*float64(own) {
		t.Errorf("%d of %d samples in main.fib walk to runtime.goexit; want 99%%:\n%s", ownGoexit, own, out)
	}
	hot, most := "", 0
	for f, n := range leaf {
		if n > most {
			hot, most = f, n
		}
	}
	if hot != "main.fib" {
		t.Errorf("the goroutines' hottest leaf is %s (%d samples); want main.fib (%d): %v", hot, most, leaf["main.fib"], leaf)
	}
}

// TestGoDiagnostics: --diagnostics names the Go functions whose CFI the
// function table cannot give in full, each with its note code
// (runtime.morestack switches stacks, runtime.goexit is where a
// goroutine's stack begins), as remarks: not skipped, and the output,
// the exit status and the summary are those of a run without
// --diagnostics.
func TestGoDiagnostics(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("builds x86-64 and AArch64 Linux programs")
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	for _, c := range []gobuild.Config{
		{GOARCH: "amd64", Strip: true},
		{GOARCH: "amd64", Strip: true, Cgo: true},
		{GOARCH: "arm64", Strip: true},
	} {
		t.Run(c.String(), func(t *testing.T) {
			bin := gobuild.Build(t, tmp, c)
			convert := func(args ...string) (out []byte, stdout, stderr string) {
				t.Helper()
				o := filepath.Join(tmp, c.String()+fmt.Sprint(len(args))+".sf")
				cmd := exec.Command(c2s, append(args, bin, "-o", o)...)
				var so, se strings.Builder
				cmd.Stdout, cmd.Stderr = &so, &se
				if err := cmd.Run(); err != nil {
					t.Fatalf("%v: %v\n%s", args, err, se.String())
				}
				b, err := os.ReadFile(o)
				if err != nil {
					t.Fatal(err)
				}
				return b, so.String(), se.String()
			}
			plain, _, summary := convert()
			withJSON, stdout, jsonSummary := convert("--diagnostics", "json")
			withText, _, text := convert("--diagnostics", "text")
			if !bytes.Equal(plain, withJSON) || !bytes.Equal(plain, withText) {
				t.Errorf("--diagnostics changes the output")
			}
			// The summary line ends both; its file name differs.
			last := func(s string) string {
				lines := strings.Split(strings.TrimSpace(s), "\n")
				_, after, _ := strings.Cut(lines[len(lines)-1], ": ")
				return after
			}
			if last(summary) != last(jsonSummary) || last(summary) != last(text) || !strings.Contains(summary, " 0 skipped") {
				t.Errorf("summaries: %q without --diagnostics, %q with json, %q with text", last(summary), last(jsonSummary), last(text))
			}
			var rec struct {
				Diagnostics []translate.Diagnostic `json:"diagnostics"`
			}
			if err := json.Unmarshal([]byte(stdout), &rec); err != nil {
				t.Fatalf("%v\n%s", err, stdout)
			}
			got := map[string]translate.Reason{}
			for _, d := range rec.Diagnostics {
				if d.Skipped || !strings.HasPrefix(string(d.Reason), "go-") {
					t.Errorf("%s: %s, skipped %v: want go- notes only", d.Symbol, d.Reason, d.Skipped)
				}
				got[d.Symbol] = d.Reason
			}
			for name, want := range map[string]translate.Reason{
				"runtime.morestack":   "go-stack-switch",
				"runtime.systemstack": "go-stack-switch",
				"runtime.goexit":      "go-outermost",
				"runtime.mstart":      "go-outermost",
			} {
				if got[name] != want {
					t.Errorf("%s: %q, want %q", name, got[name], want)
				}
			}
			if _, ok := got["main.main"]; ok {
				t.Errorf("main.main has a note")
			}
			if !strings.Contains(text, "runtime.morestack [") || !strings.Contains(text, ": go-stack-switch: ") {
				t.Errorf("--diagnostics text:\n%s", text)
			}
		})
	}
}

// TestGoShared: in a cgo program whose .eh_frame describes two Go
// functions too (two of its C FDEs moved onto runtime.morestack and
// main.main), the conversion takes them from .eh_frame, so
// runtime.morestack has no Go note in --diagnostics, and verify names
// them with the section it checked them against and counts them, in text
// and JSON, without failing; it counts the Go functions .gopclntab and
// the build's .debug_frame both describe too.
func TestGoShared(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("builds x86-64 Linux cgo programs")
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	bin := gobuild.Build(t, tmp, gobuild.Config{GOARCH: "amd64", Cgo: true, EHFrameOver: []string{"runtime.morestack", "main.main"}})
	out := bin + ".sf"
	o, err := exec.Command(c2s, "--diagnostics", "text", bin, "-o", out).CombinedOutput()
	if err != nil {
		t.Fatalf("convert: %v\n%s", err, o)
	}
	if strings.Contains(string(o), "runtime.morestack [") || !strings.Contains(string(o), "runtime.systemstack [") {
		t.Errorf("--diagnostics: runtime.morestack (from .eh_frame) has a Go note, or runtime.systemstack has none:\n%s", o)
	}
	o, err = exec.Command(c2s, "verify", out).Output()
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, o)
	}
	for _, want := range []string{
		": runtime.morestack [", ": main.main [",
		": described by both .eh_frame and .gopclntab: checked against .eh_frame,",
		": 2 functions described by both .eh_frame and .gopclntab: checked against .eh_frame,",
		" functions described by both .gopclntab and .debug_frame: checked against .gopclntab,",
	} {
		if !strings.Contains(string(o), want) {
			t.Errorf("verify does not say %q:\n%s", want, o)
		}
	}
	o, err = exec.Command(c2s, "verify", "--json", out).Output()
	if err != nil {
		t.Fatalf("verify --json: %v\n%s", err, o)
	}
	var res []struct {
		Shared   map[string]int `json:"shared"`
		Findings []struct {
			Kind   string `json:"kind"`
			Symbol string `json:"symbol"`
			CFI    string `json:"cfi"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(o, &res); err != nil || len(res) != 1 {
		t.Fatalf("verify --json: %v\n%s", err, o)
	}
	if res[0].Shared[".eh_frame over .gopclntab"] != 2 || res[0].Shared[".gopclntab over .debug_frame"] < 1000 {
		t.Errorf("verify --json: shared %v", res[0].Shared)
	}
	named := 0
	for _, f := range res[0].Findings {
		if f.Kind == "shared" && (f.Symbol == "main.main" || f.Symbol == "runtime.morestack") && f.CFI == ".eh_frame" {
			named++
		}
	}
	if named != 2 {
		t.Errorf("verify --json names %d of main.main and runtime.morestack as checked against .eh_frame:\n%s", named, o)
	}
}
