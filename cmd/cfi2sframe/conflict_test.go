package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// conflictDir lays out inputs and output directories for the tree form's
// conflicts: the same program under several names, a text file, and
// output directories holding a hard link, a symbolic link or a FIFO where
// an output would go.
func conflictDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"a": hello, "b": []byte("text\n"), "notdir": []byte("a file\n"),
		"d1/x": hello, "d2/x": hello, "e/d1/x": hello, "f/d1": hello, "d/y": hello,
		"hard/.keep": nil, "sym/.keep": nil, "other/.keep": nil, "twin/.keep": nil, "fifo/.keep": nil,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "hard", "a")))  // hard/a is a
	must(os.Symlink("../a", filepath.Join(dir, "sym", "a")))                 // sym/a leads to a
	must(os.Link(filepath.Join(dir, "b"), filepath.Join(dir, "other", "a"))) // other/a is b
	must(os.Symlink("b", filepath.Join(dir, "twin", "a")))                   // twin/a leads to twin/b
	must(syscall.Mkfifo(filepath.Join(dir, "fifo", "a"), 0o644))
	return dir
}

// deepDir makes a directory whose walk fails: its path grows past
// PATH_MAX (4096) below it, so even root cannot list it. Built with
// mkdirat/openat, one component at a time.
func deepDir(t *testing.T) string {
	t.Helper()
	top := filepath.Join(t.TempDir(), "deep")
	if err := os.Mkdir(top, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(top, unix.O_DIRECTORY|unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("n", 250)
	for i := 0; i < 20; i++ {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	return top
}

// TestTreeConflicts: every multi-file conversion refused up front (two
// inputs to one output, an output that is an input, a directory copied
// into itself, an output that cannot be written, a missing input, a walk
// error) exits non-zero with one line naming the conflict, and creates
// nothing: no output directory, no file, no temporary (dot files count).
func TestTreeConflicts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the command ~20 times")
	}
	deep := deepDir(t)
	type tc struct {
		name string
		args []string
		want []string // each in the one stderr line
	}
	cases := []tc{
		{"same file twice", []string{"a", "a", "-o", "out"}, []string{"a and a would both be written to out/a"}},
		{"same file by two paths", []string{"a", "./a", "-o", "out"}, []string{"a and ./a would both be written to out/a"}},
		{"same basename from two directories", []string{"d1/x", "d2/x", "-o", "out"}, []string{"d1/x and d2/x would both be written to out/x"}},
		{"same file under two directory arguments of one name", []string{"d1", "e/d1", "-o", "out"}, []string{"d1/x and e/d1/x would both be written to out/d1/x"}},
		{"a file argument onto a directory argument's copy", []string{"d1", "f/d1", "-o", "out"}, []string{"f/d1 and d1/x conflict: out/d1 would be both the output of f/d1 and a directory holding out/d1/x"}},
		{"input equal to output", []string{"a", "b", "-o", "."}, []string{"a would be written to a, the input itself", "--in-place"}},
		{"one input into its own directory", []string{"a", "-o", "."}, []string{"a would be written to a, the input itself"}},
		{"output a hard link to the input", []string{"a", "b", "-o", "hard"}, []string{"a would be written to hard/a, the input itself"}},
		{"output a symbolic link to the input", []string{"a", "b", "-o", "sym"}, []string{"a would be written to sym/a, the input itself"}},
		{"output a hard link to another input", []string{"a", "b", "-o", "other"}, []string{"a would be written to other/a, which is the input b"}},
		{"two outputs through a symbolic link", []string{"a", "b", "-o", "twin"}, []string{"a and b would both be written to twin/b (as twin/a and twin/b)"}},
		{"directory into itself", []string{"-o", "d", "d"}, []string{"d would be written into itself (d/d)"}},
		{"directory into its subdirectory", []string{"-o", "d/sub", "d"}, []string{"d would be written into itself (d/sub/d)"}},
		{"directory onto itself", []string{"-o", ".", "d"}, []string{"d would be written into itself (d)"}},
		{"output a FIFO", []string{"a", "b", "-o", "fifo"}, []string{"a would be written to fifo/a, but is a FIFO, not a regular file; refusing to replace it"}},
		{"-o a file", []string{"a", "b", "-o", "notdir"}, []string{"-o notdir: is a regular file, not a directory"}},
		{"-o below a file", []string{"a", "b", "-o", "notdir/sub"}, []string{"-o notdir/sub: notdir is a regular file, not a directory"}},
		{"missing input", []string{"a", "missing", "-o", "out"}, []string{"missing: no such file or directory"}},
		{"walk error in a directory argument", []string{"a", deep, "-o", "out"}, []string{"file name too long"}},
	}
	// Directories root could write into and read all the same.
	unwritable := func(t *testing.T, dir string) {
		if err := os.Mkdir(filepath.Join(dir, "ro"), 0o555); err != nil {
			t.Fatal(err)
		}
		locked := filepath.Join(dir, "locked", "in")
		if err := os.MkdirAll(locked, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(locked, 0o755) })
	}
	if os.Geteuid() != 0 {
		cases = append(cases,
			tc{"unwritable output directory", []string{"a", "b", "-o", "ro"}, []string{"-o ro: cannot write into ro: permission denied"}},
			tc{"output directory in an unwritable one", []string{"a", "b", "-o", "ro/out"}, []string{"-o ro/out: cannot write into ro: permission denied"}},
			tc{"unreadable directory in a directory argument", []string{"locked", "-o", "out"}, []string{"locked/in: permission denied"}},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := conflictDir(t) // each its own: one failure must not hide the next
			if os.Geteuid() != 0 {
				unwritable(t, dir)
			}
			before := snapshot(t, dir)
			r := runChild(t, dir, c.args...)
			if r.code == 0 {
				t.Errorf("exit status 0; stderr:\n%s", r.stderr)
			}
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if len(lines) != 1 {
				t.Errorf("stderr has %d lines, want 1:\n%s", len(lines), r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("stderr %q does not say %q", r.stderr, w)
				}
			}
			if strings.Contains(r.stderr, "panic") || strings.Contains(r.stderr, "goroutine ") {
				t.Errorf("crashed:\n%s", r.stderr)
			}
			if d := diff(before, snapshot(t, dir)); len(d) > 0 {
				t.Errorf("created, changed or left behind: %v", d)
			}
		})
	}
}

// TestTreeFailureLeavesNoDirectory: a tree conversion in which every file
// fails exits 1 and removes the output directories it created for them.
func TestTreeFailureLeavesNoDirectory(t *testing.T) {
	dir := t.TempDir()
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "in", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in", "sub", "broken"), hello[:300], 0o755); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	r := runChild(t, dir, "-q", "in", "-o", "out/new")
	if r.code != 1 || !strings.Contains(r.stderr, "in/sub/broken") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if d := diff(before, snapshot(t, dir)); len(d) > 0 {
		t.Errorf("created or left behind: %v", d)
	}
}

// TestInPlaceNamesOnce: docs/commands.md: with --in-place the names of
// one file (a path given twice, hard links) are converted once and stay
// one file.
func TestInPlaceNamesOnce(t *testing.T) {
	dir := conflictDir(t)
	r := runChild(t, dir, "--in-place", "--json", "a", "a", "hard/a")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var recs []struct{ File, Outcome string }
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var rec struct{ File, Outcome string }
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != 2 || recs[0].File != "a" || recs[1].File != "hard/a" || recs[0].Outcome != "converted" || recs[1].Outcome != "converted" {
		t.Errorf("records %+v, want a and hard/a converted, once each", recs)
	}
	if !strings.Contains(r.stderr, "2 files: 2 converted") {
		t.Errorf("summary:\n%s", r.stderr)
	}
	sa, _ := os.Stat(filepath.Join(dir, "a"))
	sh, _ := os.Stat(filepath.Join(dir, "hard", "a"))
	if !os.SameFile(sa, sh) {
		t.Errorf("a and hard/a are no longer one file")
	}
	b, err := os.ReadFile(filepath.Join(dir, "a"))
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elfread.NewFile(bytes.NewReader(b), "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ef.SFrame(); err != nil {
		t.Errorf("a not converted: %v", err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "hard")} {
		if tmp, _ := filepath.Glob(filepath.Join(d, ".*tmp*")); len(tmp) > 0 {
			t.Errorf("temporary files left: %v", tmp)
		}
	}
}
