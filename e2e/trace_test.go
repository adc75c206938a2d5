package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// traceBuild builds the command and testdata/trace (a CPU-bound program
// with a DRAP/alloca function, PLT calls into an -fomit-frame-pointer
// library, a SIGPROF handler spinning in the library, optional threads)
// into the directory plain, neither converted.
func traceBuild(t *testing.T) (c2s, plain, tmp string) {
	t.Helper()
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("traces x86-64 Linux processes")
	}
	need(t, "gcc")
	tmp = t.TempDir()
	os.Chmod(tmp, 0o755)
	c2s = buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata/trace")
	plain = filepath.Join(tmp, "plain")
	os.MkdirAll(plain, 0o755)
	gcc := func(args ...string) {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	gcc("-O2", "-fomit-frame-pointer", "-fPIC", "-shared", "-o", filepath.Join(plain, "libtr.so"), filepath.Join(src, "lib.c"))
	gcc("-O2", "-mstackrealign", "-pthread", "-o", filepath.Join(plain, "prog"), filepath.Join(src, "prog.c"), "-L"+plain, "-ltr")
	return c2s, plain, tmp
}

// traceSetup builds the test program (traceBuild), converts it, the
// library and libc, and returns the command, the converted program and
// the environment that loads the converted libraries.
func traceSetup(t *testing.T) (c2s, prog string, env []string) {
	t.Helper()
	c2s, plain, tmp := traceBuild(t)
	ours := filepath.Join(tmp, "ours")
	os.MkdirAll(ours, 0o755)
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no x86-64 libc.so.6")
	}
	for in, out := range map[string]string{
		filepath.Join(plain, "prog"): "prog", filepath.Join(plain, "libtr.so"): "libtr.so", libc: "libc.so.6",
	} {
		if b, err := exec.Command(c2s, "-q", "--force", in, "-o", filepath.Join(ours, out)).CombinedOutput(); err != nil {
			t.Fatalf("cfi2sframe %s: %v\n%s", in, err, b)
		}
	}
	return c2s, filepath.Join(ours, "prog"), append(os.Environ(), "LD_LIBRARY_PATH="+ours)
}

// traceSummary is what the tests read from trace's summary.
type traceSummary struct {
	samples, threads, outermost int
	agree, compared             int
	ending                      map[string]int
	text                        string
}

var (
	reSamples   = regexp.MustCompile(`(?m)^process \d+: (\d+) samples from (\d+) threads?`)
	reOutermost = regexp.MustCompile(`(?m)^walked to the outermost frame: (\d+) `)
	reEnding    = regexp.MustCompile(`(?m)^  ending in (\S+) +(\d+) `)
	reCheck     = regexp.MustCompile(`(?m)^DWARF check: (\d+) of (\d+) frames agree`)
)

func parseTraceSummary(t *testing.T, out string) traceSummary {
	t.Helper()
	s := traceSummary{ending: map[string]int{}, text: out}
	m := reSamples.FindStringSubmatch(out)
	o := reOutermost.FindStringSubmatch(out)
	if m == nil || o == nil {
		t.Fatalf("no summary in trace's output:\n%s", out)
	}
	s.samples, _ = strconv.Atoi(m[1])
	s.threads, _ = strconv.Atoi(m[2])
	s.outermost, _ = strconv.Atoi(o[1])
	for _, e := range reEnding.FindAllStringSubmatch(out, -1) {
		s.ending[e[1]], _ = strconv.Atoi(e[2])
	}
	if c := reCheck.FindStringSubmatch(out); c != nil {
		s.agree, _ = strconv.Atoi(c[1])
		s.compared, _ = strconv.Atoi(c[2])
	}
	return s
}

// readFolded returns the folded stacks (root first) and their counts.
func readFolded(t *testing.T, name string) map[string]int {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		i := strings.LastIndexByte(sc.Text(), ' ')
		n, err := strconv.Atoi(sc.Text()[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", sc.Text())
		}
		out[sc.Text()[:i]] += n
	}
	return out
}

// TestTrace runs trace on the test program (traceSetup): started by trace
// and traced to its exit, and running, sampled with -p.
func TestTrace(t *testing.T) {
	c2s, prog, env := traceSetup(t)
	skipWithoutPtrace(t, c2s)
	t.Run("program", func(t *testing.T) { _ = traceProgram(t, c2s, prog, env) })
	t.Run("running process", func(t *testing.T) { traceRunningProcess(t, c2s, prog, env) })
}

// skipWithoutPtrace skips the test when this process may not trace its
// own child (a container without CAP_SYS_PTRACE whose seccomp profile
// refuses ptrace, say): trace then fails with one line saying so.
func skipWithoutPtrace(t *testing.T, c2s string) {
	t.Helper()
	// A program that lives long enough to be seized: one that has
	// already exited (true) is refused the same way, by chance.
	out, err := exec.Command(c2s, "trace", "--", "sleep", "0.2").CombinedOutput()
	if err != nil && strings.Contains(string(out), "cannot trace process") {
		t.Skipf("ptrace is not allowed here: %s", strings.TrimSpace(string(out)))
	}
}

// TestTraceUnconverted traces the test program and its library as gcc
// built them, neither converted, with the system's libc (not converted
// either): trace converts each in memory at attach, and the walks must
// reach _start through every hard place as with converted files
// (traceProgram), agree with DWARF at every frame compared, and the
// summary must list the conversions with their sizes and times. With
// --no-convert the walks stop at the program, as before.
func TestTraceUnconverted(t *testing.T) {
	c2s, plain, _ := traceBuild(t)
	skipWithoutPtrace(t, c2s)
	prog, env := filepath.Join(plain, "prog"), append(os.Environ(), "LD_LIBRARY_PATH="+plain)
	for _, f := range []string{prog, filepath.Join(plain, "libtr.so"), "/lib/x86_64-linux-gnu/libc.so.6"} {
		if out, err := exec.Command(c2s, "dump", f).CombinedOutput(); err == nil || !strings.Contains(string(out), "sframe") {
			t.Fatalf("%s has SFrame already (dump: %v, %.200s): nothing would be converted", f, err, out)
		}
	}
	s := traceProgram(t, c2s, prog, env)
	if s.agree != s.compared {
		t.Errorf("DWARF agreement %d of %d frames, want every frame", s.agree, s.compared)
	}
	// One line per object converted: its path, the section's size and the time.
	reConv := regexp.MustCompile(`(?m)^  (\S+) +(\d+) bytes +([0-9.]+) ms \(([0-9.]+) ms CPU\) (at attach|when first seen)$`)
	conv := map[string]string{}
	for _, m := range reConv.FindAllStringSubmatch(s.text, -1) {
		conv[filepath.Base(m[1])] = m[0]
		if n, _ := strconv.Atoi(m[2]); n < 64 {
			t.Errorf("conversion of %s: %s bytes", m[1], m[2])
		}
	}
	for _, f := range []string{"prog", "libtr.so", "libc.so.6", "[vdso]"} {
		if conv[f] == "" {
			t.Errorf("the summary lists no conversion of %s", f)
		}
	}
	if !regexp.MustCompile(`(?m)^SFrame built in memory from CFI for \d+ objects? without \.sframe: \d+ bytes in [0-9.]+ ms`).MatchString(s.text) {
		t.Errorf("no total of the conversions in the summary")
	}

	// --no-convert: only files with .sframe are walked (the vDSO is still
	// converted), so every walk stops in the unconverted program or library.
	cmd := exec.Command(c2s, "trace", "--no-convert", "--", prog, "1")
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("trace --no-convert: %v\n%s", err, b)
	}
	t.Logf("--no-convert:\n%s", b)
	ns := parseTraceSummary(t, string(b))
	if ns.samples == 0 || ns.outermost != 0 {
		t.Errorf("--no-convert: %d of %d samples walked to the outermost frame, want none", ns.outermost, ns.samples)
	}
	if !strings.Contains(ns.text, "object without .sframe: "+prog+" (no .sframe)") {
		t.Errorf("--no-convert: the walks do not stop in the program for want of .sframe")
	}
	for _, m := range reConv.FindAllStringSubmatch(ns.text, -1) {
		if m[1] != "[vdso]" {
			t.Errorf("--no-convert converted %s", m[1])
		}
	}
}

// traceProgram traces the test program started by trace (-- PROG) to its
// exit, with the DWARF check, and checks the sample count, the share
// walked to _start, the pprof profile as go tool pprof reads it, the
// agreement with DWARF, and that samples caught in each hard place (the
// signal handler, the DRAP/alloca function, a PLT stub, the
// -fomit-frame-pointer library, the vDSO) walked through the expected
// callers to _start.
func traceProgram(t *testing.T, c2s, prog string, env []string) traceSummary {
	dir := t.TempDir()
	folded, pprof := filepath.Join(dir, "out.folded"), filepath.Join(dir, "cpu.pb.gz")
	const hz, secs = 499, 3
	cmd := exec.Command(c2s, "trace", "-F", strconv.Itoa(hz), "--check", "dwarf", "--folded", folded, "--pprof", pprof, "--", prog, strconv.Itoa(secs))
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("trace: %v\n%s", err, b)
	}
	s := parseTraceSummary(t, string(b))
	t.Logf("%s", b)
	if !strings.Contains(s.text, "exited with status 0") {
		t.Errorf("the program's exit is not reported")
	}
	// One thread, hz samples a second: a loaded machine delays stops
	// but never adds samples.
	if s.samples > hz*secs+hz/10 || s.samples < hz*secs/5 {
		t.Errorf("%d samples, want about %d", s.samples, hz*secs)
	}
	if s.outermost*100 < s.samples*99 {
		t.Errorf("%d of %d samples walked to the outermost frame, want >= 99%%", s.outermost, s.samples)
	}
	if s.ending["_start"] != s.outermost {
		t.Errorf("complete walks end in %v, want all in _start", s.ending)
	}
	if s.compared == 0 || s.agree*1000 < s.compared*999 {
		t.Errorf("DWARF agreement %d of %d frames, want >= 99.9%%", s.agree, s.compared)
	}

	stacks := readFolded(t, folded)
	total := 0
	for _, n := range stacks {
		total += n
	}
	if total != s.samples {
		t.Errorf("folded stacks hold %d samples, the summary says %d", total, s.samples)
	}
	// Each hard place: the leaf (or a frame) that marks it, and the callers
	// a correct walk passes through, root first.
	places := []struct {
		name string
		hit  func(frames []string) bool
		want []string
	}{
		{"DRAP/alloca function", func(f []string) bool { return f[len(f)-1] == "work_alloca" },
			[]string{"_start", "main", "level1", "work_alloca"}},
		{"PLT stub", func(f []string) bool { return strings.HasPrefix(f[len(f)-1], "(.plt") },
			[]string{"_start", "main", "level1", "work_alloca"}},
		{"-fomit-frame-pointer library", func(f []string) bool { return f[len(f)-1] == "lib_leaf" },
			[]string{"_start", "main", "level1", "work_alloca", "lib_leaf"}},
		{"vDSO", func(f []string) bool {
			return strings.Contains(f[len(f)-1], "clock_gettime") || strings.HasPrefix(f[len(f)-1], "[vdso]")
		},
			[]string{"_start", "main", "level1", "work_alloca"}},
		{"signal handler", func(f []string) bool { return f[len(f)-1] == "handler" || len(f) > 2 && f[len(f)-2] == "handler" },
			[]string{"_start", "main", "level1", "work_alloca", "handler"}},
	}
	for _, p := range places {
		n := 0
		for st, c := range stacks {
			frames := strings.Split(st, ";")
			if !p.hit(frames) {
				continue
			}
			n += c
			if frames[0] != "_start" || !subsequence(frames, p.want) {
				t.Errorf("%s: stack %s (%d samples), want %v in order from _start", p.name, st, c, p.want)
			}
		}
		if n == 0 {
			t.Errorf("%s: no sample caught there", p.name)
		} else {
			t.Logf("%s: %d samples", p.name, n)
		}
	}

	top, err := exec.Command("go", "tool", "pprof", "-top", pprof).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, top)
	}
	// pprof reads the program's functions by name from the profile. Which
	// one is hottest depends on the processor (on some, the PLT stubs the
	// loop jumps through 20,000 times a round take half the samples).
	funcs := pprofFuncs(string(top))
	for _, f := range []string{"work_alloca", "handler", "lib_leaf"} {
		if !funcs[f] {
			t.Errorf("pprof's table does not name %s:\n%s", f, top)
		}
	}
	return s
}

// pprofFuncs returns the functions of go tool pprof -top's table.
func pprofFuncs(out string) map[string]bool {
	funcs := map[string]bool{}
	in := false
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "flat%") {
			in = true
			continue
		}
		if f := strings.Fields(l); in && len(f) >= 6 {
			funcs[strings.Join(f[5:], " ")] = true
		}
	}
	return funcs
}

// procState returns the state letter of /proc/PID/stat and the tracer's
// pid.
func procState(t *testing.T, pid int) (string, string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	tracer := "?"
	for _, l := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			tracer = strings.TrimSpace(v)
		}
	}
	return f[0], tracer
}

// traceRunningProcess samples a running three-thread process with -p
// for a second, then again until SIGINT, and checks that it follows the
// threads, walks their stacks to _start or the thread start, and leaves
// the process running and untraced both times; a job-control stop during
// sampling is kept after the detach.
func traceRunningProcess(t *testing.T, c2s, prog string, env []string) {
	target := exec.Command(prog, "60", "2")
	target.Env = env
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	pid := target.Process.Pid
	defer func() {
		target.Process.Kill()
		target.Wait()
	}()
	time.Sleep(300 * time.Millisecond) // libraries loaded, threads started
	check := func(when string) {
		t.Helper()
		time.Sleep(100 * time.Millisecond)
		st, tracer := procState(t, pid)
		if (st != "R" && st != "S") || tracer != "0" {
			t.Errorf("%s: process state %s, tracer %s; want running and untraced", when, st, tracer)
		}
	}

	out, err := exec.Command(c2s, "trace", "-p", strconv.Itoa(pid), "-d", "1s").CombinedOutput()
	if err != nil {
		t.Fatalf("trace -p: %v\n%s", err, out)
	}
	s := parseTraceSummary(t, string(out))
	t.Logf("%s", out)
	if s.threads != 3 {
		t.Errorf("%d threads sampled, want 3", s.threads)
	}
	if s.samples < 3*99/5 || s.samples > 3*99+30 {
		t.Errorf("%d samples in 1s of 3 threads at 99 Hz", s.samples)
	}
	if s.outermost*100 < s.samples*99 {
		t.Errorf("%d of %d samples walked to the outermost frame, want >= 99%%", s.outermost, s.samples)
	}
	if s.ending["_start"] == 0 || len(s.ending) != 2 {
		t.Errorf("complete walks end in %v, want _start and the threads' start function", s.ending)
	}
	check("after -d 1s")

	// Ctrl-C detaches.
	tr := exec.Command(c2s, "trace", "-p", strconv.Itoa(pid))
	var buf strings.Builder
	tr.Stdout, tr.Stderr = &buf, &buf
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	tr.Process.Signal(syscall.SIGINT)
	if err := tr.Wait(); err != nil {
		t.Errorf("trace after SIGINT: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "(interrupted)") {
		t.Errorf("trace after SIGINT:\n%s", buf.String())
	}
	check("after SIGINT")

	// A job-control stop while traced stays a stop after the detach.
	tr = exec.Command(c2s, "trace", "-p", strconv.Itoa(pid), "-d", "1500ms")
	if err := tr.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGSTOP)
	if err := tr.Wait(); err != nil {
		t.Errorf("trace with SIGSTOP: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	if st, tracer := procState(t, pid); st != "T" || tracer != "0" {
		t.Errorf("stopped while traced: state %s tracer %s after the detach, want T and 0", st, tracer)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	check("after SIGCONT")

	// Errors: one line each.
	for _, args := range [][]string{
		{"trace", "-p", "999999999"},
		{"trace"},
		{"trace", "-p", "1", "--", "true"},
		{"trace", "--check", "llvm", "--", "true"},
	} {
		out, err := exec.Command(c2s, args...).CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("cfi2sframe %s: %v, output %q; want a one-line error", strings.Join(args, " "), err, out)
		}
	}
	if os.Getuid() == 0 {
		// Another user's process: run trace as nobody against ours, from
		// a directory nobody can reach.
		pub, err := os.MkdirTemp("", "cfi2sframe-trace")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(pub)
		os.Chmod(pub, 0o755)
		b, err := os.ReadFile(c2s)
		if err != nil {
			t.Fatal(err)
		}
		pubc2s := filepath.Join(pub, "cfi2sframe")
		if err := os.WriteFile(pubc2s, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(pubc2s, "trace", "-p", strconv.Itoa(pid), "-d", "100ms")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "permission denied") || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
			t.Errorf("trace as nobody: %v, %q; want a one-line permission error", err, out)
		}
		check("after the refused trace")
	}
}
