package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/race"
)

// The hostile tests run the command (this test binary, re-executed with
// CFI2SFRAME_RUN_MAIN=1) under a 1 GiB address-space limit, so that a
// regression that sizes memory from the input (2 GiB segments, 8 GiB
// bombs, 32 GB of PCs) fails there instead of slowing the machine. The Go
// runtime reserves about 600 MiB of it at start; when the binary links
// libc, glibc also reserves 128 MiB per thread for malloc arenas (seen
// with strace), which made small allocations fail at random, so the child
// runs with MALLOC_ARENA_MAX=1. The real ceiling is checked on peak RSS.
const (
	asLimit  = 1 << 30
	rssLimit = 256 << 20 // peak RSS ceiling, bytes
	timeout  = 60 * time.Second
)

func TestMain(m *testing.M) {
	if os.Getenv("CFI2SFRAME_RUN_MAIN") == "1" {
		os.Args = append([]string{"cfi2sframe"}, os.Args[1:]...)
		tuneGC() // as main does: the RSS ceiling holds for the real settings
		code := run()
		// Peak RSS of this image: getrusage's ru_maxrss would include the
		// test process's own peak, inherited through fork and exec.
		if f := os.Getenv("CFI2SFRAME_HWM_FILE"); f != "" {
			if b, err := os.ReadFile("/proc/self/status"); err == nil {
				for _, l := range strings.Split(string(b), "\n") {
					if strings.HasPrefix(l, "VmHWM:") {
						os.WriteFile(f, []byte(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(l, "VmHWM:"), "kB"))), 0o644)
					}
				}
			}
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

type result struct {
	code    int
	stdout  string
	stderr  string
	maxRSS  int64 // bytes
	elapsed time.Duration
}

// runCmd runs cfi2sframe args in dir under the address-space limit.
func runChild(t *testing.T, dir string, args ...string) result {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var cmd *exec.Cmd
	if p, err := exec.LookPath("prlimit"); err == nil && !race.Enabled {
		cmd = exec.CommandContext(ctx, p, append([]string{fmt.Sprintf("--as=%d", asLimit), "--", self}, args...)...)
	} else {
		t.Log("prlimit not found or -race: running without an address-space limit")
		cmd = exec.CommandContext(ctx, self, args...)
	}
	cmd.Dir = dir
	hwm := filepath.Join(t.TempDir(), "hwm")
	cmd.Env = append(os.Environ(), "CFI2SFRAME_RUN_MAIN=1", "MALLOC_ARENA_MAX=1", "CFI2SFRAME_HWM_FILE="+hwm)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("cfi2sframe %s: still running after %v (hang?)", strings.Join(args, " "), timeout)
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	b, err := os.ReadFile(hwm)
	if err != nil {
		t.Fatalf("the command did not report its peak RSS (crashed?): %v; stderr:\n%s", err, r.stderr)
	}
	kb, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	r.maxRSS = kb << 10
	return r
}

// snapshot is a directory's entries with their content hashes (links and
// special files by mode), to see that nothing was added, clobbered or left.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := st.Mode().String()
		if st.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		m[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diff(before, after map[string]string) []string {
	var d []string
	for k, v := range after {
		if before[k] != v {
			d = append(d, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, k+" (gone)")
		}
	}
	sort.Strings(d)
	return d
}

// hostileDir writes every generated input into a fresh directory.
func hostileDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"pcmask":        hostile.PCMaskFunc(),
		"zlib-8g":       hostile.Bomb(".debug_frame", hostile.Zlib, 8<<30, 4<<20),
		"zstd-1g":       hostile.Bomb(".debug_frame", hostile.Zstd, 1<<30, 1<<30),
		"zlib-lie":      hostile.Bomb(".debug_frame", hostile.Zlib, 1000, 64<<20),
		"zstd-lie":      hostile.Bomb(".debug_frame", hostile.Zstd, 1000, 64<<20),
		"ehframe-zstd":  hostile.Bomb(".eh_frame", hostile.Zstd, 1<<30, 1<<30),
		"rows":          hostile.ManyRows(10_000_000),
		"ehhdr-2g":      hostile.HugeSegment(elf.PT_GNU_EH_FRAME),
		"sframe-2g":     hostile.HugeSegment(0x6474e554),
		"load-2g":       hostile.HugeSegment(elf.PT_LOAD),
		"symtab.a":      hostile.Archive(false),
		"symtab64.a":    hostile.Archive(true),
		"empty-eh":      hostile.EHFrameOnly(nil),
		"garbage-eh":    hostile.EHFrameOnly([]byte("this is not call frame information at all")),
		"noshstrtab.o":  hostile.NoShstrtab(),
		"hello":         hello,
		"sub/.keep":     nil,
		"truncated-elf": hello[:3000],
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"zero-link": "/dev/zero", "fifo-link": "fifo", "hello-link": "hello", "loop": "loop", "dangling": "new-target"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "hello"), filepath.Join(dir, "hello-hard")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHostileInputs runs every command on every class of hostile input
// the issue lists and checks: exit status, a one-line message naming the
// file once and saying what is wrong, peak RSS, time, and that nothing in
// the directory was created, clobbered or left behind.
func TestHostileInputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command ~80 times")
	}
	dir := hostileDir(t)
	type tc struct {
		args  []string
		code  int
		want  string // in the (single) stderr line
		name  string // the file the message must name exactly once ("" for none)
		lines int    // stderr lines; 0 means 1
	}
	var cases []tc
	all := func(file string, code int, want string, cmds ...string) {
		for _, c := range cmds {
			var args []string
			switch c {
			case "convert":
				args = []string{file, "--force", "-o", "out"}
			default:
				args = []string{c, file}
			}
			n := 1
			if c == "report" && code != 0 {
				n = 2 // the file's line, then the summary
			}
			cases = append(cases, tc{args: args, code: code, want: want, name: file, lines: n})
		}
	}
	// 1. Archive symbol table one entry short.
	all("symtab.a", 1, "symbol table claims 2 symbols", "convert")
	all("symtab64.a", 1, "symbol table claims 2 symbols", "convert")
	// 2. A 0xffffffff-byte PCMASK function: verify agrees, in bounded memory.
	cases = append(cases, tc{args: []string{"verify", "pcmask"}, code: 0, want: "1 functions, 4294967295 bytes checked: 0 disagreements", name: "pcmask"})
	// 3. Decompression bombs, .debug_frame and non-alloc .eh_frame.
	for _, f := range []string{"zlib-8g", "zstd-1g", "ehframe-zstd"} {
		all(f, 1, "compressed contents claim", "convert", "verify", "report")
	}
	for _, f := range []string{"zlib-lie", "zstd-lie"} {
		all(f, 1, "inflates to more than 1000 bytes", "convert", "verify", "report")
	}
	// 4. 10M rows in one FDE: the FDE is a malformed record, skipped.
	cases = append(cases, tc{args: []string{"verify", "rows"}, code: 0, want: "0 functions", name: "rows"})
	cases = append(cases, tc{args: []string{"report", "--csv", "rows"}, code: 0, want: "", lines: -1})
	// 5. Only regular files as input.
	for _, f := range []string{"fifo", "fifo-link"} {
		all(f, 1, "a FIFO, not a regular file", "convert", "dump", "verify", "report")
	}
	for _, f := range []string{"/dev/zero", "zero-link"} {
		all(f, 1, "a character device, not a regular file", "convert", "dump", "verify", "report")
	}
	// (convert takes a directory as a tree to walk: see TestTreeCommand.)
	all("sub", 1, "a directory, not a regular file", "dump", "verify")
	all("missing", 1, "no such file or directory", "convert", "dump", "verify", "report")
	all("loop", 1, "too many levels of symbolic links", "convert", "dump", "verify", "report")
	for _, c := range []string{"dump", "verify", "report"} {
		cases = append(cases, tc{args: []string{c}, code: 1, want: "requires at least 1 arg"})
	}
	cases = append(cases, tc{args: []string{"hello"}, code: 1, want: "no output: give -o FILE or --in-place"})
	// 6. Outputs that are not regular files are refused, not replaced.
	// (-o naming an existing directory writes DIR/hello, as cp does: see
	// TestTreeCommand.)
	for _, o := range []string{"fifo", "fifo-link", "sub"} {
		if o != "sub" {
			cases = append(cases, tc{args: []string{"hello", "-o", o}, code: 1, want: "refusing to replace it", name: o})
		}
		cases = append(cases, tc{args: []string{"report", "--html", o, "hello"}, code: 1, want: "refusing to replace it", name: o})
	}
	// 7. -o naming the input by any path needs --in-place.
	for _, o := range []string{"hello", "./sub/../hello", "hello-link", "hello-hard", filepath.Join(dir, "hello")} {
		cases = append(cases, tc{args: []string{"hello", "-o", o}, code: 1, want: "names the input file itself; use --in-place", name: o})
	}
	// 9. Sizes from headers checked against the file.
	all("ehhdr-2g", 1, "segment of type 0x6474e550 at file offset 0xe8: 2147483648 bytes run past the end of the file", "convert", "report")
	all("load-2g", 1, "(PT_LOAD) at file offset 0x100: 2147483392 bytes run past the end of the file", "convert", "report")
	all("sframe-2g", 1, "PT_GNU_SFRAME (offset 0xe8, size 0x80000000) lies past the end of the file (0xf0 bytes), and there is no .sframe section to read instead", "dump")
	// verify reports it as a layout problem, on stdout; stderr has the
	// summary line, then the failure.
	cases = append(cases, tc{args: []string{"verify", "sframe-2g"}, code: 1, want: "0 functions, 0 bytes checked: 0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 0 skipped as cfi2sframe skips them, 1 layout problems", name: "sframe-2g", lines: 2})
	all("truncated-elf", 1, "section header table (31 entries of 64 bytes) at file offset 0x36e8", "convert", "dump", "verify", "report")
	// 10. Messages.
	all("empty-eh", 1, "the call-frame sections hold no FDE", "convert")
	all("garbage-eh", 1, "no FDE could be read (1 malformed records; the first: .eh_frame: offset 0x0: record length", "convert")
	all("noshstrtab.o", 1, "section headers have no names (e_shstrndx is 0)", "convert")

	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			before := snapshot(t, dir)
			r := runChild(t, dir, c.args...)
			if r.code != c.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", r.code, c.code, r.stderr)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			want := max(c.lines, 1)
			if c.lines >= 0 && len(lines) != want {
				t.Errorf("stderr has %d lines, want %d:\n%s", len(lines), want, r.stderr)
			}
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, c.want)
			}
			if c.name != "" && c.code != 0 && strings.Count(lines[0], c.name) != 1 {
				t.Errorf("message %q names %s %d times, want once", lines[0], c.name, strings.Count(lines[0], c.name))
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("crashed:\n%s", r.stderr)
			}
			if r.maxRSS > rssLimit && !race.Enabled {
				t.Errorf("peak RSS %d MB, ceiling %d MB", r.maxRSS>>20, rssLimit>>20)
			}
			if d := diff(before, snapshot(t, dir)); len(d) > 0 {
				t.Errorf("directory changed (output written, input clobbered or temporary file left): %v", d)
			}
			if st, err := os.Stat("/dev/zero"); err != nil || st.Mode()&os.ModeCharDevice == 0 {
				t.Fatal("/dev/zero is no longer a device")
			}
			t.Logf("exit %d, peak RSS %.1f MB, %v", r.code, float64(r.maxRSS)/(1<<20), r.elapsed.Round(time.Millisecond))
		})
	}
}

// TestOutputThroughSymlink: -o naming a symlink (live or dangling) writes
// the file it points to and keeps the link (docs/commands.md); --in-place
// replaces the input, also through a hard link's other name.
func TestOutputThroughSymlink(t *testing.T) {
	dir := hostileDir(t)
	r := runChild(t, dir, "hello", "-q", "-o", "dangling")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if st, err := os.Lstat(filepath.Join(dir, "dangling")); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced")
	}
	out, err := os.ReadFile(filepath.Join(dir, "new-target"))
	if err != nil {
		t.Fatalf("target not written: %v", err)
	}
	if _, err := elf.NewFile(bytes.NewReader(out)); err != nil {
		t.Errorf("target is not ELF: %v", err)
	}
	in, _ := os.ReadFile(filepath.Join(dir, "hello"))
	if r := runChild(t, dir, "hello-hard", "-q", "--in-place"); r.code != 0 {
		t.Fatalf("--in-place: exit %d: %s", r.code, r.stderr)
	}
	now, _ := os.ReadFile(filepath.Join(dir, "hello-hard"))
	if bytes.Equal(now, in) || !bytes.Equal(now, out) {
		t.Errorf("--in-place did not write the converted file")
	}
	ents, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(ents) > 0 {
		t.Errorf("temporary files left: %v", ents)
	}
}

// TestReportExitStatus: report prints what it can, lists each failure on
// its own line, and exits 1 when any path or file failed.
func TestReportExitStatus(t *testing.T) {
	dir := hostileDir(t)
	r := runChild(t, dir, "report", "--csv", "hello", "zlib-8g", "missing", "fifo")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	if !strings.Contains(r.stdout, "hello") {
		t.Errorf("the good file is not reported:\n%s", r.stdout)
	}
	for _, w := range []string{"zlib-8g: section .debug_frame", "missing: no such file", "fifo: a FIFO", "3 failures"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
		}
	}
	// An unreadable directory is reported (root reads every directory).
	if os.Geteuid() == 0 {
		return
	}
	locked := filepath.Join(dir, "locked")
	if err := os.Mkdir(locked, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	r = runChild(t, dir, "report", ".")
	if r.code != 1 || !strings.Contains(r.stderr, "locked: permission denied") {
		t.Errorf("unreadable directory: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}
