//go:build linux && amd64

package e2e

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The limits every run of the hostile suites is held to.
const (
	hiAddressSpace = 4 << 30          // RLIMIT_AS of the command (prlimit --as)
	hiTimeout      = 60 * time.Second // a run still going then is hung
	hiMaxRSS       = 512 << 20        // peak resident set size allowed
)

// TestHostileImages converts hostile container images with the real
// binary, each under an address-space limit of 4 GiB and a 60 s timeout,
// and records each run's outcome, exit status, wall time, peak RSS and
// message (logged as a table; written as Markdown to the file
// $CFI2SFRAME_HOSTILE_TABLE names, with skopeo's verdict beside it).
//
// Each case is an OCI layout of one good image (a layer with an x86-64
// program, a text layer) with one hostile change: blobs whose bytes are
// not those their descriptor names (a layer with and without an ELF
// file to convert, the config, the manifest, bytes after the tar
// archive's end), layer sizes that lie, manifests and indexes of 100 MB,
// index cycles and nesting, 10,000 layers, gzip and zstd bombs of 4 GiB,
// a zstd window of 256 MiB and 2 GiB; the same from docker-archive and
// from Debian's registry (blobs and a manifest tampered in its storage).
// Each must be refused: exit status 1, one line on stderr starting
// "cfi2sframe: " (naming the reference and the blob for a mismatch), no
// crash, peak RSS under 512 MB, nothing left in $TMPDIR, the destination
// absent (an existing layout unchanged), nothing written elsewhere. Then
// SIGTERM during a conversion of a 256 MiB layer, at several times: exit
// status 130 and nothing left. skopeo copy of each source is run for
// comparison; its verdict is recorded, not asserted.
func TestHostileImages(t *testing.T) {
	h := newHiHarness(t, "Hostile images")
	h.skopeo = need(t, "skopeo")
	root := t.TempDir()
	for _, c := range hiImageCases() {
		t.Run(c.name, func(t *testing.T) { h.imageCase(t, root, c.name, c.build) })
	}
	t.Run("registry", func(t *testing.T) { h.registryCases(t, root) })
	t.Run("sigterm", func(t *testing.T) {
		src := filepath.Join(root, "sigterm-src")
		hiBigImage(t, src)
		h.sigterm(t, root, "image", []string{src}, func(run string) ([]string, string) {
			dst := filepath.Join(run, "dst")
			return []string{"image", "oci:" + src + ":v1", "oci:" + dst + ":v1"}, dst
		})
	})
}

// hiHarness runs the command and keeps the table of runs.
type hiHarness struct {
	t       *testing.T
	title   string
	c2s     string
	prlimit string
	skopeo  string
	mu      sync.Mutex
	rows    []hiRow
}

// hiRow is one line of the table.
type hiRow struct {
	name    string
	outcome string
	exit    int
	secs    float64
	rssMB   float64
	msg     string // the command's first line on stderr
	skopeo  string // skopeo's exit status ("" when not run)
	skMsg   string // and first line
	note    string
}

func newHiHarness(t *testing.T, title string) *hiHarness {
	t.Helper()
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("runs the x86-64 Linux binary")
	}
	h := &hiHarness{t: t, title: title, prlimit: need(t, "prlimit")}
	h.c2s = buildCommand(t, t.TempDir())
	t.Cleanup(h.report)
	return h
}

func (h *hiHarness) add(r hiRow) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rows = append(h.rows, r)
}

// hiTableOnce truncates $CFI2SFRAME_HOSTILE_TABLE once per process:
// each suite then appends its table.
var hiTableOnce sync.Once

// report logs the table, one line a run, and appends it as Markdown to
// $CFI2SFRAME_HOSTILE_TABLE when set.
func (h *hiHarness) report() {
	t := h.t
	t.Logf("%s: %d runs", h.title, len(h.rows))
	t.Logf("%-44s %-24s %4s %7s %8s  %s", "case", "outcome", "exit", "seconds", "RSS MB", "message")
	for _, r := range h.rows {
		t.Logf("%-44s %-24s %4d %7.2f %8.1f  %s", r.name, r.outcome, r.exit, r.secs, r.rssMB, hiTrunc(r.msg, 120))
		if r.skopeo != "" {
			t.Logf("%-44s skopeo: exit %s: %s", "", r.skopeo, hiTrunc(r.skMsg, 120))
		}
		if r.note != "" {
			t.Logf("%-44s note: %s", "", r.note)
		}
	}
	path := os.Getenv("CFI2SFRAME_HOSTILE_TABLE")
	if path == "" {
		return
	}
	hiTableOnce.Do(func() { os.Remove(path) })
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", h.title)
	b.WriteString("| case | outcome | exit | s | peak RSS MB | cfi2sframe says | skopeo exit | skopeo says | note |\n")
	b.WriteString("|---|---|---:|---:|---:|---|---:|---|---|\n")
	for _, r := range h.rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.1f | %s | %s | %s | %s |\n", hiMD(r.name), hiMD(r.outcome), r.exit, r.secs, r.rssMB,
			hiMD(hiTrunc(r.msg, 120)), r.skopeo, hiMD(hiTrunc(r.skMsg, 120)), hiMD(r.note))
	}
	b.WriteString("\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("CFI2SFRAME_HOSTILE_TABLE: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.WriteString(b.String()); err != nil {
		t.Errorf("CFI2SFRAME_HOSTILE_TABLE: %v", err)
	}
}

// hiMD escapes a table cell.
func hiMD(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "`", "'").Replace(s)
}

// hiTrunc is the first n characters of s.
func hiTrunc(s string, n int) string {
	r := []rune(s)
	if len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// hiCase is the directory of one case: the command runs in it, with
// $TMPDIR and $HOME below it.
type hiCase struct {
	dir, tmp, home string
}

func hiNewCase(t *testing.T, root, name string) hiCase {
	t.Helper()
	dir := filepath.Join(root, strings.ReplaceAll(name, "/", "-"))
	c := hiCase{dir: dir, tmp: filepath.Join(dir, "tmp"), home: filepath.Join(dir, "home")}
	for _, d := range []string{c.tmp, c.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// hiRun is one run of the command.
type hiRun struct {
	c       hiCase
	env     []string
	args    []string
	termAt  time.Duration // SIGTERM after this long (0: none)
	termCPU time.Duration // or once the process has used this much CPU time
}

// hiOut is what a run did.
type hiOut struct {
	code           int            // exit status, -1 when ended by a signal
	sig            syscall.Signal // the signal that ended it
	hung           bool           // still running after hiTimeout
	stdout, stderr string
	took           time.Duration
	rssKiB         int64
	termSent       time.Duration // when SIGTERM was sent (0: not sent)
}

// exec runs the command under prlimit --as, in the case's directory
// with its $TMPDIR and $HOME, measuring wall time and peak RSS. It runs
// through TestHostileRunChild, a fresh process of a few megabytes, which
// reports the command's pid and its own rusage: ru_maxrss of a process
// started by this one directly would be at least this process's peak
// RSS (Linux carries the high-water mark of the memory a vfork child
// shares into the program it executes).
func (h *hiHarness) exec(r hiRun) hiOut {
	self, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	args := append([]string{"-test.run=^TestHostileRunChild$", "--", h.prlimit, "--as=" + strconv.Itoa(hiAddressSpace), "--", h.c2s}, r.args...)
	cmd := exec.Command(self, args...)
	cmd.Dir = r.c.dir
	cmd.Env = append(append(os.Environ(), hiChildEnv+"=1", "TMPDIR="+r.c.tmp, "HOME="+r.c.home), r.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	rp, wp, err := os.Pipe()
	if err != nil {
		h.t.Fatal(err)
	}
	defer rp.Close()
	cmd.ExtraFiles = []*os.File{wp}
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("%s: %v", self, err)
	}
	wp.Close()
	report := bufio.NewScanner(rp)
	var o hiOut
	pid := 0
	if report.Scan() {
		fmt.Sscanf(report.Text(), "pid %d", &pid)
	}
	start := time.Now()
	done := make(chan struct{})
	var mu sync.Mutex
	if pid > 0 {
		hung := time.AfterFunc(hiTimeout, func() {
			mu.Lock()
			o.hung = true
			mu.Unlock()
			syscall.Kill(pid, syscall.SIGQUIT) // Go prints its goroutines
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		defer hung.Stop()
		if r.termAt > 0 || r.termCPU > 0 {
			go func() {
				if hiWaitFor(pid, r.termAt, r.termCPU, done) {
					mu.Lock()
					o.termSent = time.Since(start)
					mu.Unlock()
					syscall.Kill(pid, syscall.SIGTERM)
				}
			}()
		}
	}
	var line string
	if report.Scan() {
		line = report.Text()
	}
	close(done)
	cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	o.stdout, o.stderr = stdout.String(), stderr.String()
	var sig int
	var nanos int64
	if n, _ := fmt.Sscanf(line, "exit %d %d %d %d", &o.code, &sig, &o.rssKiB, &nanos); n != 4 {
		h.t.Fatalf("the child process of %s: %q (%v)\n%s", h.c2s, line, cmd.ProcessState, o.stderr)
	}
	o.sig, o.took = syscall.Signal(sig), time.Duration(nanos)
	return o
}

// hiChildEnv, set, makes TestHostileRunChild the child process of exec.
const hiChildEnv = "CFI2SFRAME_HOSTILE_CHILD"

// TestHostileRunChild is not a test: with $CFI2SFRAME_HOSTILE_CHILD set
// it runs the command after "--" in its arguments, its output its own,
// and writes to file descriptor 3 "pid PID" once started and "exit
// STATUS SIGNAL MAXRSS NANOSECONDS" when it has ended (status -1 when
// ended by a signal), then exits.
func TestHostileRunChild(t *testing.T) {
	if os.Getenv(hiChildEnv) == "" {
		return
	}
	report := os.NewFile(3, "report")
	args := os.Args[slices.Index(os.Args, "--")+1:]
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(report, "error %v\n", err)
		os.Exit(125)
	}
	fmt.Fprintf(report, "pid %d\n", cmd.Process.Pid)
	cmd.Wait()
	took := time.Since(start)
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	code, sig := ws.ExitStatus(), 0
	if ws.Signaled() {
		code, sig = -1, int(ws.Signal())
	}
	fmt.Fprintf(report, "exit %d %d %d %d\n", code, sig, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss, took.Nanoseconds())
	os.Exit(0)
}

// hiWaitFor waits until after has passed, or until the process pid has
// used cpu of CPU time (user and system), and says true; false when done
// is closed first.
func hiWaitFor(pid int, after, cpu time.Duration, done <-chan struct{}) bool {
	if after > 0 {
		select {
		case <-done:
			return false
		case <-time.After(after):
			return true
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return false
		case <-tick.C:
		}
		if hiCPU(pid) >= cpu {
			return true
		}
	}
}

// hiCPU is the CPU time the process pid has used (utime + stime of
// /proc/PID/stat, in clock ticks of 10 ms).
func hiCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}

// hiFails is hiWant.code for a run that must fail with some status but
// 130 (a tree with files that fail); its destination is not checked.
const hiFails = -2

// hiWant is what a case must give.
type hiWant struct {
	code  int      // 0 accepted, 1 refused, 130 interrupted by SIGTERM, or hiFails
	blob  string   // a digest the message must name ("": none)
	refs  []string // the message must name one of these (the reference)
	words []string // the message must hold one of these
}

// hiCheck is what judge checks after a run.
type hiCheck struct {
	c         hiCase
	dst       string                  // the destination
	before    map[string]hostileEntry // the case directory but $TMPDIR and dst, before
	dstBefore map[string]hostileEntry // an existing destination, before (nil: none)
	want      hiWant
}

// hiSnap snapshots dir but the paths skip; directories' times and link
// counts are left out (a file or directory made and removed again
// changes them).
func hiSnap(t *testing.T, dir string, skip ...string) map[string]hostileEntry {
	t.Helper()
	s, err := hostileSnapshot(dir, skip)
	if err != nil {
		t.Fatal(err)
	}
	for k, e := range s {
		if e.mode.IsDir() {
			e.mtime, e.ctime, e.nlink = 0, 0, 0
			s[k] = e
		}
	}
	return s
}

// hiCrash says whether the output shows a crash, and the line that does.
func hiCrash(out string) (string, bool) {
	for _, l := range strings.Split(out, "\n") {
		for _, bad := range []string{"panic:", "fatal error", "runtime:", "goroutine ", "SIGSEGV", "[signal "} {
			if strings.Contains(l, bad) {
				return l, true
			}
		}
	}
	return "", false
}

// hiStuck is the innermost function of this module in the first
// goroutine of a Go traceback that has one.
func hiStuck(dump string) string {
	for _, g := range strings.Split(dump, "\n\n") {
		for _, l := range strings.Split(g, "\n") {
			if strings.HasPrefix(l, "github.com/cfi2sframe/cfi2sframe/") {
				return strings.TrimPrefix(l[:strings.LastIndexByte(l, '(')], "github.com/cfi2sframe/cfi2sframe/")
			}
		}
	}
	return "?"
}

// judge checks a run against what the case wants and returns its row.
func (h *hiHarness) judge(t *testing.T, name string, o hiOut, ck hiCheck) hiRow {
	t.Helper()
	stderr := strings.TrimRight(o.stderr, "\n")
	lines := strings.Split(stderr, "\n")
	row := hiRow{name: name, exit: o.code, secs: o.took.Seconds(), rssMB: float64(o.rssKiB) / 1024, msg: lines[0]}
	t.Logf("exit %d, %.2f s, %.1f MB: %s", o.code, row.secs, row.rssMB, lines[0])
	crashLine, crashed := hiCrash(o.stderr + "\n" + o.stdout)
	switch {
	case o.hung:
		row.outcome = fmt.Sprintf("hung (%v)", hiTimeout)
	case crashed:
		row.outcome, row.msg = "crashed", crashLine
	case o.sig != 0:
		row.outcome = "killed by " + o.sig.String()
	case o.code == 0:
		row.outcome = "accepted"
	case o.code == 130:
		row.outcome = "interrupted"
	case ck.want.code == hiFails && o.code > 0:
		row.outcome = fmt.Sprintf("failed, %d lines", len(lines))
	case o.code == 1 && len(lines) == 1 && stderr != "":
		row.outcome = "rejected"
	case o.code == 1:
		row.outcome = fmt.Sprintf("rejected, %d lines", len(lines))
	default:
		row.outcome = fmt.Sprintf("exit %d", o.code)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s: "+format, append([]any{name}, args...)...)
	}
	if o.hung {
		row.note = "stuck in " + hiStuck(o.stderr)
	}
	if o.hung || crashed || o.sig != 0 {
		fail("%s:\n%s", row.outcome, hostileHead([]byte(o.stderr), 40))
	}
	if o.rssKiB<<10 >= hiMaxRSS {
		fail("peak RSS %.0f MB, over %d MB", row.rssMB, hiMaxRSS>>20)
	}
	if left, _ := os.ReadDir(ck.c.tmp); len(left) > 0 {
		fail("%d files left in $TMPDIR, %s first", len(left), left[0].Name())
	}
	if ck.before != nil {
		for _, d := range hostileDiff(ck.before, hiSnap(t, ck.c.dir, ck.c.tmp, ck.dst)) {
			fail("outside the destination: %s", d)
		}
	}
	finished := o.code == 0 && ck.want.code == 130
	failed := ck.want.code == hiFails && o.code > 0 && o.code != 130
	switch {
	case finished:
		row.note = "finished before the signal"
	case o.code != ck.want.code && !failed && !o.hung && !crashed:
		want := strconv.Itoa(ck.want.code)
		if ck.want.code == hiFails {
			want = "not 0 or 130"
		}
		fail("exit status %d (%s), want %s:\n%s", o.code, row.outcome, want, hostileHead([]byte(o.stderr), 20))
	}
	if ck.want.code == 0 || ck.want.code == hiFails || finished {
		return row
	}
	h.checkLeft(t, name, ck)
	if ck.want.code == 1 && o.code == 1 {
		hiCheckMessage(t, name, o.stderr, ck.want)
	}
	return row
}

// checkLeft requires the destination of a failed or interrupted run to
// be absent, or, for an existing one, unchanged.
func (h *hiHarness) checkLeft(t *testing.T, name string, ck hiCheck) {
	t.Helper()
	if ck.dstBefore != nil {
		for _, d := range hostileDiff(ck.dstBefore, hiSnap(t, ck.dst)) {
			t.Errorf("%s: the existing destination changed: %s", name, d)
		}
		return
	}
	st, err := os.Lstat(ck.dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		t.Fatal(err)
	case st.IsDir():
		names, _ := hostileNames(ck.dst)
		files := hostileFiles(names)
		t.Errorf("%s: the destination %s is there, a directory of %d names, %d files (%v)", name, ck.dst, len(names), len(files), files[:min(len(files), 5)])
	default:
		t.Errorf("%s: the destination %s is there (%d bytes)", name, ck.dst, st.Size())
	}
}

// hiCheckMessage requires a refusal's stderr to be one line starting
// "cfi2sframe: ", naming what the case wants named.
func hiCheckMessage(t *testing.T, name, stderr string, w hiWant) {
	t.Helper()
	if !strings.HasPrefix(stderr, "cfi2sframe: ") || strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("%s: stderr is not one line starting \"cfi2sframe: \":\n%s", name, hostileHead([]byte(stderr), 20))
	}
	msg := strings.ToLower(stderr)
	if w.blob != "" {
		if hx := strings.TrimPrefix(w.blob, "sha256:"); !strings.Contains(msg, hx[:12]) {
			t.Errorf("%s: the message does not name the blob %s: %s", name, w.blob, strings.TrimSpace(stderr))
		}
	}
	has := func(list []string) bool {
		for _, s := range list {
			if strings.Contains(msg, strings.ToLower(s)) {
				return true
			}
		}
		return len(list) == 0
	}
	if !has(w.refs) {
		t.Errorf("%s: the message does not name the reference (%s): %s", name, strings.Join(w.refs, " or "), strings.TrimSpace(stderr))
	}
	if !has(w.words) {
		t.Errorf("%s: the message does not say %s: %s", name, strings.Join(w.words, " or "), strings.TrimSpace(stderr))
	}
}

// hiSkopeo runs skopeo --insecure-policy with args and returns its exit
// status and first line of output (msg="..." only, when logrus-styled).
func hiSkopeo(skopeo string, env []string, args ...string) (string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), hiTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, skopeo, append([]string{"--insecure-policy"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := "0"
	if err != nil {
		code = "error: " + err.Error()
		if cmd.ProcessState != nil {
			code = strconv.Itoa(cmd.ProcessState.ExitCode())
		}
	}
	first := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			first = l
			break
		}
	}
	if i := strings.Index(first, "msg="); i >= 0 {
		if u, err := strconv.Unquote(first[i+4:]); err == nil {
			first = u
		} else {
			first = first[i+4:]
		}
	}
	return code, first
}

// hiSrc is a case's source and what it must give.
type hiSrc struct {
	ref      string   // SRC of cfi2sframe image
	skopeo   []string // skopeo copy's arguments before DST (nil: SRC)
	env      []string
	args     []string // flags of cfi2sframe image
	existing bool     // the destination is an existing layout, to be left as it was
	noSkopeo string   // why skopeo is not run ("": it is)
	want     hiWant
}

// imageCase builds a case, converts it into oci:DIR/dst:v1 and judges
// the run, then runs skopeo copy from the same source.
func (h *hiHarness) imageCase(t *testing.T, root, name string, build func(*testing.T, hiCase) hiSrc) {
	c := hiNewCase(t, root, name)
	start := time.Now()
	s := build(t, c)
	built := time.Since(start)
	dst := filepath.Join(c.dir, "dst")
	var dstBefore map[string]hostileEntry
	if s.existing {
		hiExistingLayout(t, dst)
		dstBefore = hiSnap(t, dst)
	}
	before := hiSnap(t, c.dir, c.tmp, dst)
	args := append(append([]string{"image"}, s.args...), s.ref, "oci:"+dst+":v1")
	o := h.exec(hiRun{c: c, env: s.env, args: args})
	row := h.judge(t, name, o, hiCheck{c: c, dst: dst, before: before, dstBefore: dstBefore, want: s.want})
	if built > 2*time.Second {
		row.note = strings.TrimPrefix(row.note+fmt.Sprintf("; input built in %.1f s", built.Seconds()), "; ")
	}
	if s.want.code == 0 {
		if _, err := os.Stat(filepath.Join(dst, "index.json")); err != nil {
			t.Errorf("%s: accepted, but no layout written: %v", name, err)
		}
	}
	if s.noSkopeo != "" {
		row.skopeo, row.skMsg = "-", s.noSkopeo
	} else {
		from := s.skopeo
		if from == nil {
			from = []string{s.ref}
		}
		skDst := filepath.Join(c.dir, "skopeo-dst")
		row.skopeo, row.skMsg = hiSkopeo(h.skopeo, s.env, append(append([]string{"copy", "--quiet"}, from...), "oci:"+skDst+":v1")...)
		if s.want.blob != "" && row.skopeo == "0" {
			row.note = strings.TrimPrefix(row.note+"; skopeo accepts it", "; ")
		}
		os.RemoveAll(skDst)
	}
	h.add(row)
}

// hiExistingLayout writes a small OCI layout at dir, tagged "old".
func hiExistingLayout(t *testing.T, dir string) {
	lay := newOCILayout(t, dir)
	l := lay.layer([]tarFile{{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/old", Mode: 0o644, ModTime: hiTime}, body: []byte("old\n")}})
	lay.tag("old", lay.image("amd64", false, l))
	lay.write()
}

var hiTime = time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC)

// hiHello is the x86-64 program every good layer and package holds.
func hiHello(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hiPad is n hexadecimal digits that do not compress much, from seed.
func hiPad(seed string, n int) []byte {
	var out []byte
	sum := sha256.Sum256([]byte(seed))
	for len(out) < n {
		out = hex.AppendEncode(out, sum[:])
		sum = sha256.Sum256(sum[:])
	}
	return out[:n]
}

func hiDir(name string) tarFile {
	return tarFile{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: hiTime}}
}

func hiFile(name string, mode int64, body []byte) tarFile {
	return tarFile{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, ModTime: hiTime}, body: body}
}

// hiELFTar is the program layer: opt/app/bin/hello, etc/case naming the
// case, and some padding when pad (a tampered copy without it is smaller).
func hiELFTar(t *testing.T, hello []byte, name string, pad bool) []byte {
	files := []tarFile{hiDir("opt/"), hiDir("opt/app/"), hiDir("opt/app/bin/"), hiFile("opt/app/bin/hello", 0o755, hello),
		hiDir("etc/"), hiFile("etc/case", 0o644, []byte(name+"\n"))}
	if pad {
		files = append(files, hiFile("etc/pad", 0o644, hiPad(name, 800)))
	}
	return tarStream(t, files)
}

// hiTextTar is the text-only layer.
func hiTextTar(t *testing.T, name string, pad bool, greeting string) []byte {
	files := []tarFile{hiDir("etc/"), hiFile("etc/app.conf", 0o644, []byte("greeting = "+greeting+"\n"))}
	if pad {
		files = append(files, hiFile("etc/pad2", 0o644, hiPad(name+"2", 800)))
	}
	return tarStream(t, files)
}

// hiGzip compresses b as one gzip member, with pad bytes of extra field
// (FEXTRA: 2 + pad bytes more) when pad > 0.
func hiGzip(t *testing.T, b []byte, pad int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if pad > 0 {
		zw.Extra = bytes.Repeat([]byte("x"), pad)
	}
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hiGzipSized compresses b as one gzip member of exactly size bytes, the
// difference made up by an extra field in the header.
func hiGzipSized(t *testing.T, b []byte, size int) []byte {
	t.Helper()
	plain := hiGzip(t, b, 0)
	k := size - len(plain) - 2 // the field and its length
	if k < 1 {
		t.Fatalf("%d bytes compress to %d, no room to make %d", len(b), len(plain), size)
	}
	out := hiGzip(t, b, k)
	if len(out) != size {
		t.Fatalf("gzip with an extra field: %d bytes, want %d", len(out), size)
	}
	return out
}

// hiLayer stores a gzip blob as a layer whose uncompressed stream is raw.
func hiLayer(lay *ociLayout, gz, raw []byte) ociLayer {
	sum := sha256.Sum256(raw)
	return ociLayer{desc: lay.blob(mediaTypeLayerGzip, gz), diffID: "sha256:" + hex.EncodeToString(sum[:])}
}

// hiBlobPath is where a layout keeps the blob d.
func hiBlobPath(dir, digest string) string {
	return filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// hiReplace writes b as the blob of digest: a tampered blob, of the size
// its descriptor says unless sized is false.
func hiReplace(t *testing.T, path string, b []byte, sized bool) {
	t.Helper()
	if st, err := os.Stat(path); err != nil {
		t.Fatal(err)
	} else if sized && st.Size() != int64(len(b)) {
		t.Fatalf("tampered %s: %d bytes, the blob has %d", path, len(b), st.Size())
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// hiGood is the good image of a case, in an OCI layout at dir: layer 1
// the program, layer 2 text, tagged v1 once written.
type hiGood struct {
	lay               *ociLayout
	dir               string
	hello             []byte
	elfTar, textTar   []byte
	elfLayer, textLay ociLayer
}

func hiNewGood(t *testing.T, dir, name string) *hiGood {
	g := &hiGood{lay: newOCILayout(t, dir), dir: dir, hello: hiHello(t)}
	g.elfTar = hiELFTar(t, g.hello, name, true)
	g.textTar = hiTextTar(t, name, true, "hello")
	g.elfLayer = hiLayer(g.lay, hiGzip(t, g.elfTar, 0), g.elfTar)
	g.textLay = hiLayer(g.lay, hiGzip(t, g.textTar, 0), g.textTar)
	return g
}

// write tags d as v1 and writes index.json; the source reference.
func (g *hiGood) write(d ociDescriptor) string {
	g.lay.tag("v1", d)
	g.lay.write()
	return "oci:" + g.dir + ":v1"
}

// evilELF is a tampered program layer of the good one's size: the
// program's last byte changed, no padding.
func (g *hiGood) evilELF(t *testing.T, name string) []byte {
	evil := append([]byte{}, g.hello...)
	evil[len(evil)-1] ^= 0xff
	return hiGzipSized(t, hiELFTar(t, evil, name, false), int(g.elfLayer.desc.Size))
}

// hiMismatch is what a digest mismatch must say: the reference, the
// blob, and that its bytes are not those it names, in some words (size:
// or that the size is wrong).
func hiMismatch(dir, blob string, size bool) hiWant {
	words := []string{"digest", "checksum", "match", "hashes to"}
	if size {
		words = append(words, "size", "bytes", "descriptor")
	}
	return hiWant{code: 1, blob: blob, refs: []string{dir}, words: words}
}

type hiImageCaseT struct {
	name  string
	build func(*testing.T, hiCase) hiSrc
}

// hiImageCases are the OCI layout and docker-archive cases.
func hiImageCases() []hiImageCaseT {
	return append(hiMismatchCases(), hiLimitCases()...)
}

// hiMismatchCases are blobs that are not what their descriptors say.
func hiMismatchCases() []hiImageCaseT {
	src := func(c hiCase) string { return filepath.Join(c.dir, "src") }
	return []hiImageCaseT{
		{"good", func(t *testing.T, c hiCase) hiSrc {
			g := hiNewGood(t, src(c), "good")
			return hiSrc{ref: g.write(g.lay.image("amd64", false, g.elfLayer, g.textLay)), want: hiWant{code: 0}}
		}},
		{"layer-with-elf-tampered", func(t *testing.T, c hiCase) hiSrc {
			g := hiNewGood(t, src(c), "layer-with-elf-tampered")
			ref := g.write(g.lay.image("amd64", false, g.elfLayer, g.textLay))
			hiReplace(t, hiBlobPath(g.dir, g.elfLayer.desc.Digest), g.evilELF(t, "evil"), true)
			return hiSrc{ref: ref, want: hiMismatch(g.dir, g.elfLayer.desc.Digest, false)}
		}},
		{"layer-without-elf-tampered", func(t *testing.T, c hiCase) hiSrc {
			g := hiNewGood(t, src(c), "layer-without-elf-tampered")
			ref := g.write(g.lay.image("amd64", false, g.elfLayer, g.textLay))
			evil := hiGzipSized(t, hiTextTar(t, "x", false, "EVIL!"), int(g.textLay.desc.Size))
			hiReplace(t, hiBlobPath(g.dir, g.textLay.desc.Digest), evil, true)
			return hiSrc{ref: ref, want: hiMismatch(g.dir, g.textLay.desc.Digest, false)}
		}},
		{"layer-tampered-existing-dst", func(t *testing.T, c hiCase) hiSrc {
			g := hiNewGood(t, src(c), "layer-tampered-existing-dst")
			ref := g.write(g.lay.image("amd64", false, g.elfLayer, g.textLay))
			hiReplace(t, hiBlobPath(g.dir, g.elfLayer.desc.Digest), g.evilELF(t, "evil"), true)
			return hiSrc{ref: ref, existing: true, want: hiMismatch(g.dir, g.elfLayer.desc.Digest, false)}
		}},
		{"config-tampered", func(t *testing.T, c hiCase) hiSrc {
			g := hiNewGood(t, src(c), "config-tampered")
			m := g.lay.image("amd64", false, g.elfLayer, g.textLay)
			ref := g.write(m)
			cfg := hiManifest(t, g.dir, m).Config.Digest
			p := hiBlobPath(g.dir, cfg)
			b, _ := os.ReadFile(p)
			hiReplace(t, p, bytes.Replace(b, []byte("/usr/local/sbin"), []byte("/tmp/evil/xsbin"), 1), true)
			return hiSrc{ref: ref, want: hiMismatch(g.dir, cfg, false)}
		}},
		{"manifest-tampered", func(t *testing.T, c hiCase) hiSrc {
			g := hiNewGood(t, src(c), "manifest-tampered")
			m := g.lay.image("amd64", false, g.elfLayer, g.textLay)
			ref := g.write(m)
			// The manifest now names another layer, of the same size,
			// stored honestly.
			evil := g.lay.blob(mediaTypeLayerGzip, g.evilELF(t, "evil"))
			p := hiBlobPath(g.dir, m.Digest)
			b, _ := os.ReadFile(p)
			hiReplace(t, p, bytes.Replace(b, []byte(g.elfLayer.desc.Digest), []byte(evil.Digest), 1), true)
			return hiSrc{ref: ref, want: hiMismatch(g.dir, m.Digest, false)}
		}},
		{"layer-size-bigger", hiSizeLie(func(n int64) int64 { return n + 100 })},
		{"layer-size-smaller", hiSizeLie(func(n int64) int64 { return n - 100 })},
		{"layer-size-negative", hiSizeLie(func(int64) int64 { return -1 })},
		{"layer-size-huge", hiSizeLie(func(int64) int64 { return 1 << 62 })},
		{"after-tar-end-same-size", hiAfterEnd(false)},
		{"after-tar-end-appended", hiAfterEnd(true)},
	}
}

// hiManifest reads the manifest d of the layout at dir.
func hiManifest(t *testing.T, dir string, d ociDescriptor) ociManifest {
	t.Helper()
	var m ociManifest
	b, err := os.ReadFile(hiBlobPath(dir, d.Digest))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// hiSizeLie is a case whose program layer's descriptor gives the size
// lie(size); the blob is the right one.
func hiSizeLie(lie func(int64) int64) func(*testing.T, hiCase) hiSrc {
	return func(t *testing.T, c hiCase) hiSrc {
		g := hiNewGood(t, filepath.Join(c.dir, "src"), filepath.Base(c.dir))
		l := g.elfLayer
		l.desc.Size = lie(l.desc.Size)
		ref := g.write(g.lay.image("amd64", false, l, g.textLay))
		return hiSrc{ref: ref, want: hiMismatch(g.dir, l.desc.Digest, true)}
	}
}

// hiAfterEnd is a case whose program layer is tampered only after the
// tar archive's end. The good layer is two gzip members, the tar stream
// then 1 KiB of zeros. Same size: the second member is replaced by one of
// the same size holding other bytes; appended: a third member is added.
func hiAfterEnd(appended bool) func(*testing.T, hiCase) hiSrc {
	return func(t *testing.T, c hiCase) hiSrc {
		g := hiNewGood(t, filepath.Join(c.dir, "src"), filepath.Base(c.dir))
		zeros := make([]byte, 1024)
		first := hiGzip(t, g.elfTar, 0)
		second := hiGzip(t, zeros, 64)
		l := hiLayer(g.lay, append(append([]byte{}, first...), second...), append(append([]byte{}, g.elfTar...), zeros...))
		ref := g.write(g.lay.image("amd64", false, l, g.textLay))
		junk := bytes.Repeat([]byte("X"), 1024)
		evil := append(append([]byte{}, first...), hiGzipSized(t, junk, len(second))...)
		if appended {
			evil = append(append(append([]byte{}, first...), second...), hiGzip(t, junk, 0)...)
		}
		hiReplace(t, hiBlobPath(g.dir, l.desc.Digest), evil, !appended)
		return hiSrc{ref: ref, want: hiMismatch(g.dir, l.desc.Digest, appended)}
	}
}

// hiDockerConfig writes a docker config directory with the registry's
// credentials and returns the environment that points at it.
func hiDockerConfig(t *testing.T, dir, host string) []string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(imageUser + ":" + imagePass))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"auths": {"`+host+`": {"auth": "`+auth+`"}}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"DOCKER_CONFIG=" + dir, "REGISTRY_AUTH_FILE="}
}

const mediaTypeLayerZstd = "application/vnd.oci.image.layer.v1.tar+zstd"

// hiFake is a digest no honest blob has: the name a tampered,
// self-referring blob is stored under.
func hiFake(seed string) string {
	sum := sha256.Sum256([]byte("hostile fake digest: " + seed))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// hiIndexJSON is an OCI index of one entry.
func hiIndexJSON(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	b, err := json.Marshal(ociIndex{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: []ociDescriptor{d}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hiPadded is b followed by spaces (JSON allows them) up to n bytes.
func hiPadded(b []byte, n int) []byte {
	return append(append(make([]byte, 0, n), b...), bytes.Repeat([]byte(" "), n-len(b))...)
}

// hiLimitCases are images within their digests that go past a limit,
// and a docker archive with a tampered layer.
func hiLimitCases() []hiImageCaseT {
	src := func(c hiCase) string { return filepath.Join(c.dir, "src") }
	good := func(t *testing.T, c hiCase) (*hiGood, ociDescriptor) {
		g := hiNewGood(t, src(c), filepath.Base(c.dir))
		return g, g.lay.image("amd64", false, g.elfLayer, g.textLay)
	}
	// A refusal names the source, where the fault is.
	limit := func(c hiCase) hiWant { return hiWant{code: 1, refs: []string{src(c)}} }
	return []hiImageCaseT{
		{"manifest-100MB", func(t *testing.T, c hiCase) hiSrc {
			g, m := good(t, c)
			b, _ := os.ReadFile(hiBlobPath(g.dir, m.Digest))
			return hiSrc{ref: g.write(g.lay.blob(mediaTypeManifest, hiPadded(b, 100<<20))), want: limit(c)}
		}},
		{"index-100MB", func(t *testing.T, c hiCase) hiSrc {
			g, m := good(t, c)
			return hiSrc{ref: g.write(g.lay.blob(mediaTypeIndex, hiPadded(hiIndexJSON(t, m), 100<<20))), want: limit(c)}
		}},
		{"index-lists-itself", func(t *testing.T, c hiCase) hiSrc {
			g, _ := good(t, c)
			self := ociDescriptor{MediaType: mediaTypeIndex, Digest: hiFake("self")}
			var b []byte
			for b = hiIndexJSON(t, self); int64(len(b)) != self.Size; b = hiIndexJSON(t, self) {
				self.Size = int64(len(b))
			}
			if err := os.WriteFile(hiBlobPath(g.dir, self.Digest), b, 0o644); err != nil {
				t.Fatal(err)
			}
			return hiSrc{ref: g.write(self), want: hiMismatch(g.dir, self.Digest, false)}
		}},
		{"index-cycle", hiIndexCycle},
		{"index-nested-20", func(t *testing.T, c hiCase) hiSrc {
			g, d := good(t, c)
			for i := 0; i < 20; i++ {
				d = g.lay.index(d)
			}
			return hiSrc{ref: g.write(d), want: limit(c)}
		}},
		{"layers-10000", hiManyLayers},
		{"gzip-bomb-4GiB", func(t *testing.T, c hiCase) hiSrc {
			g, _ := good(t, c)
			bomb := ociLayer{desc: g.lay.blob(mediaTypeLayerGzip, hiGzipBomb(t)), diffID: hiBombDiffID()}
			return hiSrc{ref: g.write(g.lay.image("amd64", false, g.elfLayer, bomb)), want: limit(c)}
		}},
		{"zstd-bomb-4GiB", func(t *testing.T, c hiCase) hiSrc {
			g, _ := good(t, c)
			z := hiZstd(hiZstdWindow128K, hiBombHeader(), hiBombSize+1024)
			bomb := ociLayer{desc: g.lay.blob(mediaTypeLayerZstd, z), diffID: hiBombDiffID()}
			return hiSrc{ref: g.write(g.lay.image("amd64", false, g.elfLayer, bomb)), want: limit(c)}
		}},
		{"zstd-window-256MiB", hiZstdWindow(0x90)},
		{"zstd-window-2GiB", hiZstdWindow(0xa8)},
		{"docker-archive-layer-tampered", hiDockerArchive},
	}
}

// hiIndexCycle: index.json names index B, which lists index A, which
// lists B. A cannot hold B's digest and be named by its own: it is
// stored under a digest that is not its own.
func hiIndexCycle(t *testing.T, c hiCase) hiSrc {
	g := hiNewGood(t, filepath.Join(c.dir, "src"), "index-cycle")
	a := ociDescriptor{MediaType: mediaTypeIndex, Digest: hiFake("cycle-a")}
	var aBytes []byte
	var b ociDescriptor
	for {
		bBytes := hiIndexJSON(t, a)
		sum := sha256.Sum256(bBytes)
		b = ociDescriptor{MediaType: mediaTypeIndex, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(bBytes))}
		aBytes = hiIndexJSON(t, b)
		if int64(len(aBytes)) == a.Size {
			g.lay.blob(mediaTypeIndex, bBytes)
			break
		}
		a.Size = int64(len(aBytes))
	}
	if err := os.WriteFile(hiBlobPath(g.dir, a.Digest), aBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return hiSrc{ref: g.write(b), want: hiMismatch(g.dir, a.Digest, false)}
}

// hiManyLayers is an image of 10,000 layers: the program, then tiny
// layers of one file each, every digest right.
func hiManyLayers(t *testing.T, c hiCase) hiSrc {
	g := hiNewGood(t, filepath.Join(c.dir, "src"), "layers-10000")
	layers := []ociLayer{g.elfLayer}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	for i := 1; i < 10000; i++ {
		raw := tarStream(t, []tarFile{hiFile(fmt.Sprintf("layers/%05d", i), 0o644, []byte(strconv.Itoa(i)+"\n"))})
		buf.Reset()
		zw.Reset(&buf)
		zw.Write(raw)
		zw.Close()
		layers = append(layers, hiLayer(g.lay, bytes.Clone(buf.Bytes()), raw))
	}
	return hiSrc{ref: g.write(g.lay.image("amd64", false, layers...)), want: hiWant{code: 1, refs: []string{g.dir}}, noSkopeo: "not run: copying 10,000 blobs takes it over a minute"}
}

// hiZstdWindow is a case whose program layer is one zstd frame declaring
// the window descriptor w (2^(10 + w>>3) bytes, mantissa 0), its tar
// stream in raw blocks.
func hiZstdWindow(w byte) func(*testing.T, hiCase) hiSrc {
	return func(t *testing.T, c hiCase) hiSrc {
		g := hiNewGood(t, filepath.Join(c.dir, "src"), filepath.Base(c.dir))
		sum := sha256.Sum256(g.elfTar)
		l := ociLayer{desc: g.lay.blob(mediaTypeLayerZstd, hiZstd(w, g.elfTar, 0)), diffID: "sha256:" + hex.EncodeToString(sum[:])}
		return hiSrc{ref: g.write(g.lay.image("amd64", false, l, g.textLay)), want: hiWant{code: 1, refs: []string{g.dir}}}
	}
}

// hiZstdWindow128K is the window descriptor of a 128 KiB window.
const hiZstdWindow128K = 7 << 3

// hiZstd is one zstd frame (no content size, no checksum) with window
// descriptor window: raw in raw blocks, then zeros zero bytes in RLE
// blocks, each block 128 KiB at most. Go has no zstd encoder in the
// standard library, and a bomb needs none.
func hiZstd(window byte, raw []byte, zeros int64) []byte {
	const max = 128 << 10
	b := binary.LittleEndian.AppendUint32(nil, 0xfd2fb528)
	b = append(b, 0x00, window)
	type block struct {
		typ, size int
		payload   []byte
	}
	var blocks []block
	for len(raw) > 0 {
		n := min(len(raw), max)
		blocks = append(blocks, block{0, n, raw[:n]})
		raw = raw[n:]
	}
	for ; zeros > 0; zeros -= max {
		blocks = append(blocks, block{1, int(min(zeros, max)), []byte{0}})
	}
	if len(blocks) == 0 {
		blocks = append(blocks, block{0, 0, nil})
	}
	for i, bl := range blocks {
		h := uint32(bl.size)<<3 | uint32(bl.typ)<<1
		if i == len(blocks)-1 {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16))
		b = append(b, bl.payload...)
	}
	return b
}

// The bomb: a tar stream of one regular file, ./zeros, of 4 GiB of
// zeros, then the archive's end (1 KiB of zeros).
const hiBombSize = 4 << 30

func hiBombHeader() []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./zeros", Mode: 0o644, Size: hiBombSize, ModTime: hiTime, Format: tar.FormatUSTAR}); err != nil {
		panic(err)
	}
	return b.Bytes()[:512]
}

var hiBombOnce struct {
	gz64   sync.Once
	gz     []byte // a gzip member of 64 MiB of zeros
	diff   sync.Once
	diffID string
}

// hiGzip64 is a gzip member of 64 MiB of zeros (64 KiB), made once.
func hiGzip64(t *testing.T) []byte {
	hiBombOnce.gz64.Do(func() {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(make([]byte, 64<<20))
		zw.Close()
		hiBombOnce.gz = buf.Bytes()
	})
	return hiBombOnce.gz
}

// hiGzipBomb is the bomb as gzip members: the header, 64 members of 64
// MiB of zeros, the archive's end. 4 MB.
func hiGzipBomb(t *testing.T) []byte {
	b := hiGzip(t, hiBombHeader(), 0)
	for i := 0; i < hiBombSize/(64<<20); i++ {
		b = append(b, hiGzip64(t)...)
	}
	return append(b, hiGzip(t, make([]byte, 1024), 0)...)
}

// hiBombDiffID is the bomb's uncompressed digest, computed once.
func hiBombDiffID() string {
	hiBombOnce.diff.Do(func() {
		h := sha256.New()
		h.Write(hiBombHeader())
		zero := make([]byte, 1<<20)
		for n := 0; n < hiBombSize; n += len(zero) {
			h.Write(zero)
		}
		h.Write(zero[:1024])
		hiBombOnce.diffID = "sha256:" + hex.EncodeToString(h.Sum(nil))
	})
	return hiBombOnce.diffID
}

// hiDockerArchive is docker save's format (manifest.json, the config,
// HEX/layer.tar uncompressed, HEX the config's diff_id) with the program
// layer's bytes changed, its size kept.
func hiDockerArchive(t *testing.T, c hiCase) hiSrc {
	hello := hiHello(t)
	tars := [][]byte{hiELFTar(t, hello, "docker-archive", true), hiTextTar(t, "docker-archive", true, "hello")}
	var cfg ociConfig
	cfg.Architecture, cfg.OS, cfg.RootFS.Type = "amd64", "linux", "layers"
	var files []tarFile
	var names []string
	for _, b := range tars {
		sum := sha256.Sum256(b)
		hx := hex.EncodeToString(sum[:])
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, "sha256:"+hx)
		names = append(names, hx+"/layer.tar")
	}
	evil := append([]byte{}, hello...)
	evil[len(evil)-1] ^= 0xff
	evilTar := hiELFTar(t, evil, "docker-archive", true)
	if len(evilTar) != len(tars[0]) {
		t.Fatalf("the tampered layer is %d bytes, the layer %d", len(evilTar), len(tars[0]))
	}
	for i, b := range [][]byte{evilTar, tars[1]} {
		files = append(files, hiDir(filepath.Dir(names[i])+"/"), hiFile(names[i], 0o644, b))
	}
	cb, _ := json.Marshal(cfg)
	sum := sha256.Sum256(cb)
	cfgName := hex.EncodeToString(sum[:]) + ".json"
	mb, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{"hostile:v1"}, "Layers": names}})
	files = append(files, hiFile(cfgName, 0o644, cb), hiFile("manifest.json", 0o644, mb))
	path := filepath.Join(c.dir, "src.tar")
	if err := os.WriteFile(path, tarStream(t, files), 0o644); err != nil {
		t.Fatal(err)
	}
	return hiSrc{ref: "docker-archive:" + path, want: hiMismatch(path, cfg.RootFS.DiffIDs[0], false)}
}

// registryCases push images into Debian's registry and tamper with its
// storage: a layer, the config, the manifest a tag names (served under
// the tag with the Docker-Content-Digest of the manifest pushed).
func (h *hiHarness) registryCases(t *testing.T, root string) {
	regBin := need(t, "docker-registry")
	htpasswd := need(t, "htpasswd")
	regDir := filepath.Join(root, "registry")
	reg := startRegistry(t, regBin, htpasswd, regDir)
	creds := imageUser + ":" + imagePass
	stored := func(digest string) string {
		hx := strings.TrimPrefix(digest, "sha256:")
		return filepath.Join(regDir, "storage", "docker", "registry", "v2", "blobs", "sha256", hx[:2], hx, "data")
	}
	push := func(t *testing.T, dir, tag, repo string) {
		args := []string{"--insecure-policy", "copy", "--quiet", "--preserve-digests", "--dest-creds", creds, "--dest-tls-verify=false",
			"oci:" + dir + ":" + tag, "docker://" + reg.host + "/" + repo}
		if out, err := exec.Command(h.skopeo, args...).CombinedOutput(); err != nil {
			t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// tamper changes the registry's copy of the image g pushed (manifest
	// m) and returns the blob changed, "" for none.
	cases := []struct {
		name   string
		tamper func(t *testing.T, g *hiGood, m ociDescriptor, repo string) string
	}{
		{"good", func(*testing.T, *hiGood, ociDescriptor, string) string { return "" }},
		{"layer-tampered", func(t *testing.T, g *hiGood, m ociDescriptor, _ string) string {
			hiReplace(t, stored(g.elfLayer.desc.Digest), g.evilELF(t, "evil"), true)
			return g.elfLayer.desc.Digest
		}},
		{"config-tampered", func(t *testing.T, g *hiGood, m ociDescriptor, _ string) string {
			cfg := hiManifest(t, g.dir, m).Config.Digest
			b, _ := os.ReadFile(stored(cfg))
			hiReplace(t, stored(cfg), bytes.Replace(b, []byte("/usr/local/sbin"), []byte("/tmp/evil/xsbin"), 1), true)
			return cfg
		}},
		{"manifest-tampered", func(t *testing.T, g *hiGood, m ociDescriptor, repo string) string {
			// Another image, of a layer of the same size, is pushed to
			// the repository; the tag's manifest is made to name it.
			evil := ociLayer{desc: g.lay.blob(mediaTypeLayerGzip, g.evilELF(t, "evil")), diffID: g.elfLayer.diffID}
			g.lay.tag("evil", g.lay.image("amd64", false, evil, g.textLay))
			g.lay.write()
			push(t, g.dir, "evil", repo+":evil")
			b, _ := os.ReadFile(stored(m.Digest))
			hiReplace(t, stored(m.Digest), bytes.Replace(b, []byte(g.elfLayer.desc.Digest), []byte(evil.desc.Digest), 1), true)
			return m.Digest
		}},
	}
	for _, rc := range cases {
		name := "registry/" + rc.name
		t.Run(rc.name, func(t *testing.T) {
			h.imageCase(t, root, name, func(t *testing.T, c hiCase) hiSrc {
				repo := "test/" + rc.name
				g := hiNewGood(t, filepath.Join(c.dir, "src"), name)
				m := g.lay.image("amd64", false, g.elfLayer, g.textLay)
				g.write(m)
				push(t, g.dir, "v1", repo+":v1")
				blob := rc.tamper(t, g, m, repo)
				if blob != "" {
					hiServedTampered(t, reg.host, repo, blob, blob == m.Digest)
				}
				ref := "docker://" + reg.host + "/" + repo + ":v1"
				s := hiSrc{ref: ref, args: []string{"--tls-verify=false"}, env: hiDockerConfig(t, filepath.Join(c.dir, "docker"), reg.host),
					skopeo: []string{"--src-creds", creds, "--src-tls-verify=false", ref}, want: hiWant{code: 0}}
				if blob != "" {
					s.want = hiMismatch(reg.host+"/"+repo, blob, false)
				}
				return s
			})
		})
	}
}

// hiServedTampered requires the registry to serve the tampered blob
// (by its digest) or manifest (by the tag v1, with Docker-Content-Digest
// its digest) with other bytes than the digest names: what the case is
// about.
func hiServedTampered(t *testing.T, host, repo, digest string, manifest bool) {
	t.Helper()
	path := "/v2/" + repo + "/blobs/" + digest
	if manifest {
		path = "/v2/" + repo + "/manifests/v1"
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(imageUser, imagePass)
	req.Header.Set("Accept", mediaTypeManifest+", "+mediaTypeIndex)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	got := "sha256:" + hex.EncodeToString(sum[:])
	if h := resp.Header.Get("Docker-Content-Digest"); resp.StatusCode != http.StatusOK || got == digest || manifest && h != digest {
		t.Fatalf("GET %s: status %d, Docker-Content-Digest %q, body %s: the registry does not serve the tampered bytes as %s", path, resp.StatusCode, h, got, digest)
	}
}

// hiBigImage writes an OCI layout at dir tagged v1 whose one layer is
// 256 MiB of random text and the program, gzip without compression
// (written and read fast; the conversion compresses it, for seconds).
func hiBigImage(t *testing.T, dir string) {
	t.Helper()
	lay := newOCILayout(t, dir)
	f, err := os.CreateTemp(dir, "layer")
	if err != nil {
		t.Fatal(err)
	}
	blobH, diffH := sha256.New(), sha256.New()
	zw, _ := gzip.NewWriterLevel(io.MultiWriter(f, blobH), gzip.NoCompression)
	tw := tar.NewWriter(io.MultiWriter(zw, diffH))
	const size = 256 << 20
	hello := hiHello(t)
	chunk := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "opt/data/text", Mode: 0o644, Size: size, ModTime: hiTime}); err != nil {
		t.Fatal(err)
	}
	for n := 0; n < size; n += len(chunk) {
		hiText(rng, chunk)
		if _, err := tw.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "opt/app/bin/hello", Mode: 0o755, Size: int64(len(hello)), ModTime: hiTime}); err != nil {
		t.Fatal(err)
	}
	tw.Write(hello)
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	f.Close()
	hx := hex.EncodeToString(blobH.Sum(nil))
	if err := os.Rename(f.Name(), hiBlobPath(dir, hx)); err != nil {
		t.Fatal(err)
	}
	l := ociLayer{desc: ociDescriptor{MediaType: mediaTypeLayerGzip, Digest: "sha256:" + hx, Size: st.Size()}, diffID: "sha256:" + hex.EncodeToString(diffH.Sum(nil))}
	lay.tag("v1", lay.image("amd64", false, l))
	lay.write()
}

// hiText fills b with random lower-case words and spaces.
func hiText(rng *rand.Rand, b []byte) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz    \n "
	for i := 0; i < len(b); i += 12 {
		v := rng.Uint64()
		for k := 0; k < 12 && i+k < len(b); k++ {
			b[i+k] = alphabet[v>>(5*k)&31]
		}
	}
}

// sigterm runs a conversion (args makes its arguments and names its
// destination, for a fresh run directory) once to the end, then with
// SIGTERM at 0.1, 0.5, 1 and 2 s and once it has used 1 s of CPU time.
// An interrupted run must exit with status 130 and leave nothing: no
// destination, nothing in $TMPDIR, nothing else; the inputs stay as
// they were. How long it took to exit after the signal is recorded.
func (h *hiHarness) sigterm(t *testing.T, root, name string, inputs []string, args func(run string) ([]string, string)) {
	before := map[string]map[string]hostileEntry{}
	for _, in := range inputs {
		before[in] = hiSnap(t, in)
	}
	whens := []struct {
		label   string
		at, cpu time.Duration
	}{
		{"not signalled", 0, 0},
		{"0.1s", 100 * time.Millisecond, 0},
		{"0.5s", 500 * time.Millisecond, 0},
		{"1s", time.Second, 0},
		{"2s", 2 * time.Second, 0},
		{"cpu-1s", 0, time.Second},
	}
	for _, w := range whens {
		rowName := "sigterm/" + name + "/" + w.label
		c := hiNewCase(t, root, rowName)
		a, dst := args(c.dir)
		pre := hiSnap(t, c.dir, c.tmp, dst)
		o := h.exec(hiRun{c: c, args: a, termAt: w.at, termCPU: w.cpu})
		want := 130
		if w.at == 0 && w.cpu == 0 {
			want = 0
		}
		row := h.judge(t, rowName, o, hiCheck{c: c, dst: dst, before: pre, want: hiWant{code: want}})
		if o.termSent > 0 {
			after := o.took - o.termSent
			row.note = strings.TrimPrefix(row.note+fmt.Sprintf("; SIGTERM at %.2f s, exited %.2f s later", o.termSent.Seconds(), after.Seconds()), "; ")
			if after > 5*time.Second {
				row.note += " (over 5 s)"
				t.Logf("%s: exited %.1f s after SIGTERM", rowName, after.Seconds())
			}
		}
		h.add(row)
		os.RemoveAll(c.dir)
	}
	for _, in := range inputs {
		for _, d := range hostileDiff(before[in], hiSnap(t, in)) {
			t.Errorf("sigterm/%s: the input changed: %s", name, d)
		}
	}
}
