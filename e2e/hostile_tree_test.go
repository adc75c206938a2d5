//go:build linux && amd64

package e2e

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTreeKilled kills tree conversions of large shared libraries with
// SIGKILL at several points in time, in place (-j 2 --in-place TREE) and
// into a directory (-j 2 -o OUT TREE). A killed run can clean nothing up,
// so what it leaves is what it left on disk at that instant: the tree must
// hold its original names and no other, and every file must be either its
// original, byte for byte, or the complete converted file; OUT may hold
// complete outputs and the directories they go in, nothing else. A second
// run then exits 0 and leaves the original names only, every file
// converted. The kill times are 50, 200 and 500 ms and fractions of how
// long a run that is not killed takes.
//
// One name besides the originals may be left by a kill, since an atomic
// replacement needs the new file to have a name to rename: a temporary
// file .NAME.cfi2sframe~HEX beside NAME (docs/commands.md, "Temporary files"), when
// it holds NAME's complete output (it got that name once written:
// O_TMPFILE) and the second run removes it. A temporary file of any other
// name, or a partial one, fails.
func TestTreeKilled(t *testing.T) {
	libs := hostileBigLibraries(t)
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)

	// src is the pristine tree: the input of the -o runs and the template
	// of every in-place tree. The largest file goes in lib/, the others
	// alternate between lib/ and lib/more/.
	src := filepath.Join(tmp, "src")
	var total int64
	for i, l := range libs {
		dir := "lib"
		if i%2 == 0 && i > 0 {
			dir = "lib/more"
		}
		if err := hostileCopy(l, filepath.Join(src, dir, filepath.Base(l))); err != nil {
			t.Fatal(err)
		}
	}
	names, err := hostileNames(src)
	if err != nil {
		t.Fatal(err)
	}
	files := hostileFiles(names)
	orig := hostileSums(t, src, files)
	for _, f := range files {
		total += orig[f].size
	}

	// The reference: every file converted by one run that is not killed.
	ref := filepath.Join(tmp, "ref")
	start := time.Now()
	if out, err := exec.Command(c2s, "-q", "-j", "2", "-o", ref, src).CombinedOutput(); err != nil {
		t.Fatalf("reference run: %v\n%s", err, out)
	}
	refTook := time.Since(start)
	want := hostileSums(t, filepath.Join(ref, "src"), files)
	convertible := 0
	for _, f := range files {
		if want[f].sum != orig[f].sum {
			convertible++
		}
	}
	t.Logf("%d files, %d MB (%d converted by a run to the end, which took %v with -o)", len(files), total>>20, convertible, refTook.Round(time.Millisecond))
	if err := os.RemoveAll(ref); err != nil {
		t.Fatal(err)
	}

	killedSome := false
	// Whether this file system has O_TMPFILE: then a temporary file gets
	// a name only once written.
	tmpfile := false
	if fd, err := unix.Open(tmp, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600); err == nil {
		unix.Close(fd)
		tmpfile = true
	} else {
		t.Logf("no O_TMPFILE in %s (%v): temporary files left by a kill may be partial", tmp, err)
	}

	// check classifies the file at path against its original and the
	// complete conversion: "original", "converted", or an error.
	check := func(path, rel string, inPlace bool) (string, error) {
		st, err := os.Lstat(path)
		if err != nil {
			return "", err
		}
		if !st.Mode().IsRegular() {
			return "", fmt.Errorf("is %v, not a regular file", st.Mode().Type())
		}
		if st.Mode().Perm() != orig[rel].mode.Perm() {
			return "", fmt.Errorf("mode %v, the original's %v", st.Mode().Perm(), orig[rel].mode.Perm())
		}
		o, w := orig[rel], want[rel]
		if st.Size() != o.size && st.Size() != w.size {
			return "", fmt.Errorf("%d bytes: neither the original (%d) nor the converted file (%d)", st.Size(), o.size, w.size)
		}
		s, err := hostileSum(path)
		if err != nil {
			return "", err
		}
		switch {
		case s.sum == w.sum && w.sum != o.sum:
			f, err := elf.Open(path)
			if err != nil {
				return "", fmt.Errorf("the converted bytes, but debug/elf: %v", err)
			}
			defer f.Close()
			if sec := f.Section(".sframe"); sec == nil || sec.Size == 0 {
				return "", errors.New("the converted bytes, but no .sframe")
			}
			return "converted", nil
		case s.sum == o.sum && (inPlace || w.sum == o.sum):
			return "original", nil
		case s.sum == o.sum:
			return "", errors.New("the input's bytes, not the converted file")
		}
		return "", fmt.Errorf("%d bytes, sha256 %x: neither the original nor the complete converted file", s.size, s.sum[:8])
	}

	// iteration runs the command on a fresh tree (a fresh OUT), killing
	// it after d (0: not killed), checks what it left, runs it again to
	// the end and checks that; it returns how long the first run took.
	iteration := func(t *testing.T, mode string, d time.Duration) (took time.Duration) {
		work := filepath.Join(tmp, "work")
		if err := os.RemoveAll(work); err != nil {
			t.Fatal(err)
		}
		// root is where names are checked: the tree in place, OUT
		// otherwise; rel(f) is the name of input f's output there.
		tree, out := src, filepath.Join(work, "out")
		root := out
		args := []string{"-q", "-j", "2", "-o", out, src}
		wantNames := map[string]fs.FileMode{"src": fs.ModeDir}
		for n, m := range names {
			wantNames["src/"+n] = m
		}
		rel := func(f string) string { return "src/" + f }
		if mode == "in-place" {
			tree = filepath.Join(work, "tree")
			root = tree
			for _, f := range files {
				if err := hostileCopy(filepath.Join(src, f), filepath.Join(tree, f)); err != nil {
					t.Fatal(err)
				}
			}
			args = []string{"-q", "-j", "2", "--in-place", tree}
			wantNames = names
			rel = func(f string) string { return f }
		}
		at := func(f string) string { return filepath.Join(root, rel(f)) }

		killed, took, msg := hostileKill(c2s, d, args...)
		if d == 0 && msg != "" {
			t.Fatalf("a run not killed: %s", msg)
		}
		switch {
		case killed:
			killedSome = true
		case msg != "":
			t.Errorf("ended by itself before the kill, not with status 0: %s", msg)
		}
		got, err := hostileNames(root)
		if err != nil && !(mode == "out" && errors.Is(err, fs.ErrNotExist)) {
			t.Fatal(err)
		}
		phase := "after the kill"
		if d == 0 {
			phase = "after the first run"
		}
		kept := 0
		for _, n := range hostileExtra(got, wantNames) {
			// The one exception: a kill between the moment a finished
			// output gets its temporary name .NAME.cfi2sframe~HEX (the
			// link of an O_TMPFILE file: an atomic replacement needs a
			// name to rename) and its rename over NAME. Such a file holds
			// the complete output (where O_TMPFILE works: a fallback
			// temporary can be partial) and the next run removes it.
			of, ok := hostileTempOf(n)
			f := strings.TrimPrefix(of, "src/")
			if _, known := orig[f]; d > 0 && ok && known && got[n] == hostileFile && wantNames[of] == hostileFile {
				s, err := hostileSum(filepath.Join(root, n))
				switch {
				case err != nil:
					t.Errorf("%s, %s: %v", phase, filepath.Join(root, n), err)
				case s.sum != want[f].sum && tmpfile:
					t.Errorf("%s, %s is there and is not the complete output for %s (%d bytes, want %d)", phase, filepath.Join(root, n), of, s.size, want[f].size)
				default:
					kept++
					t.Logf("%s, %s is there, complete: the kill came between its naming and its rename (allowed once the next run removes it)", phase, filepath.Join(root, n))
				}
				continue
			}
			t.Errorf("%s, %s is there (not an original name)", phase, filepath.Join(root, n))
		}
		done, bad := 0, 0
		for _, f := range files {
			if _, ok := got[rel(f)]; !ok {
				continue // in OUT: not written yet; in place: reported below
			}
			state, err := check(at(f), f, mode == "in-place")
			switch {
			case err != nil:
				bad++
				t.Errorf("%s, %s: %v", phase, at(f), err)
			case mode == "out" || state == "converted":
				done++
			}
		}
		if mode == "in-place" {
			for _, n := range hostileExtra(wantNames, got) {
				t.Errorf("%s, %s is missing", phase, filepath.Join(root, n))
			}
		}
		how := "killed"
		switch {
		case d == 0:
			how = "not killed"
		case !killed:
			how = "not killed: it had finished"
		}
		of, what := len(files), "complete in OUT"
		if mode == "in-place" {
			of, what = convertible, "converted in place"
		}
		t.Logf("%s after %v (%s): %d of %d files finished (%s), %d bad, %d finished temporaries left", mode, took.Round(time.Millisecond), how, done, of, what, bad, kept)

		// The second run, to the end.
		second := []string{"-q", "--in-place", tree}
		if mode != "in-place" {
			second = []string{"-q", "-o", out, src}
		}
		if b, err := exec.Command(c2s, second...).CombinedOutput(); err != nil {
			t.Errorf("second run (cfi2sframe %s): %v\n%s", strings.Join(second, " "), err, hostileHead(b, 20))
		}
		got, err = hostileNames(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range hostileExtra(got, wantNames) {
			t.Errorf("after the second run, %s is there (not an original name)", filepath.Join(root, n))
		}
		for _, n := range hostileExtra(wantNames, got) {
			t.Errorf("after the second run, %s is missing", filepath.Join(root, n))
		}
		for _, f := range files {
			state, err := check(at(f), f, mode == "in-place")
			switch {
			case err != nil:
				t.Errorf("after the second run, %s: %v", at(f), err)
			case state == "original" && want[f].sum != orig[f].sum:
				t.Errorf("after the second run, %s is still the original", at(f))
			}
		}
		if mode != "in-place" {
			// The -o runs read src; they never write it.
			now, err := hostileNames(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range append(hostileExtra(now, names), hostileExtra(names, now)...) {
				t.Errorf("the input tree changed: %s", n)
			}
		}
		return took
	}
	for _, mode := range []string{"in-place", "out"} {
		// A run to the end first, to know when to kill the others.
		var full time.Duration
		t.Run(mode+"/not-killed", func(t *testing.T) { full = iteration(t, mode, 0) })
		if full == 0 {
			continue
		}
		for _, d := range hostileDelays(full) {
			t.Run(fmt.Sprintf("%s/%v", mode, d), func(t *testing.T) { iteration(t, mode, d) })
		}
	}
	if !killedSome {
		t.Logf("no run was killed in flight: every run finished before its kill (a machine much faster than this test assumes)")
	}
	// The -o runs read the pristine tree; it is unchanged, byte for byte.
	for f, s := range hostileSums(t, src, files) {
		if s != orig[f] {
			t.Errorf("input %s changed", filepath.Join(src, f))
		}
	}
}

// hostileBigLibraries picks large x86-64 shared libraries present on the
// machine, a few hundred MB in all: libLLVM first, then the largest
// others up to 48 MB each. It skips the test when there are too few.
func hostileBigLibraries(t *testing.T) []string {
	t.Helper()
	const dir = "/usr/lib/x86_64-linux-gnu"
	const budget, minimum = 240 << 20, 64 << 20
	type lib struct {
		path string
		size int64
	}
	var first []lib
	var others []lib
	cands, _ := filepath.Glob(filepath.Join(dir, "*.so*"))
	for _, c := range cands {
		st, err := os.Lstat(c)
		if err != nil || !st.Mode().IsRegular() || st.Size() < 1<<20 {
			continue
		}
		f, err := elf.Open(c)
		if err != nil {
			continue
		}
		ok := f.Machine == elf.EM_X86_64 && f.Type == elf.ET_DYN && f.Section(".sframe") == nil
		f.Close()
		if !ok {
			continue
		}
		l := lib{c, st.Size()}
		switch {
		case strings.HasPrefix(filepath.Base(c), "libLLVM"):
			first = append(first, l)
		case st.Size() <= 48<<20:
			others = append(others, l)
		}
	}
	bySize := func(a, b lib) int {
		return cmp.Or(cmp.Compare(b.size, a.size), strings.Compare(a.path, b.path))
	}
	slices.SortFunc(first, bySize)
	slices.SortFunc(others, bySize)
	// libLLVM-15 if there, else the largest libLLVM; then the others.
	for i, l := range first {
		if filepath.Base(l.path) == "libLLVM-15.so.1" {
			first[0], first[i] = first[i], first[0]
		}
	}
	var picked []string
	var total int64
	for _, l := range slices.Concat(first[:min(len(first), 1)], others) {
		if total >= budget || len(picked) == 24 {
			break
		}
		if total+l.size > budget+budget/4 {
			continue
		}
		picked = append(picked, l.path)
		total += l.size
	}
	if total < minimum {
		t.Skipf("large x86-64 shared libraries in %s: %d MB found, this test needs at least %d MB", dir, total>>20, minimum>>20)
	}
	return picked
}

// hostileTempOf says whether rel names a temporary file of the pattern
// docs/commands.md gives, .NAME.cfi2sframe~ and hex digits, and returns the
// name of NAME beside it.
func hostileTempOf(rel string) (string, bool) {
	dir, base := filepath.Split(rel)
	const mark = ".cfi2sframe~"
	i := strings.LastIndex(base, mark)
	if !strings.HasPrefix(base, ".") || i < 2 || i+len(mark) == len(base) {
		return "", false
	}
	for _, c := range base[i+len(mark):] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return "", false
		}
	}
	return dir + base[1:i], true
}

// hostileDelays are the times after which the killed runs are killed: 50,
// 200 and 500 ms when a whole run (full) takes longer, and fractions of
// full, from the walk to the last renames.
func hostileDelays(full time.Duration) []time.Duration {
	var ds []time.Duration
	for _, d := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond} {
		if d < full*9/10 {
			ds = append(ds, d)
		}
	}
	for _, f := range []int{3, 15, 30, 45, 60, 75, 90, 97} {
		ds = append(ds, (full * time.Duration(f) / 100).Round(time.Millisecond))
	}
	slices.Sort(ds)
	var out []time.Duration
	for _, d := range ds {
		if d > 0 && (len(out) == 0 || d-out[len(out)-1] >= 10*time.Millisecond) {
			out = append(out, d)
		}
	}
	return out
}

// hostileKill runs the command and kills it with SIGKILL after d (never
// when d is 0). killed says the kill ended it; otherwise msg is "" when it
// exited 0 by itself and says how it ended if not.
func hostileKill(c2s string, d time.Duration, args ...string) (killed bool, took time.Duration, msg string) {
	cmd := exec.Command(c2s, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return false, 0, err.Error()
	}
	if d > 0 {
		timer := time.AfterFunc(d, func() { cmd.Process.Signal(syscall.SIGKILL) })
		defer timer.Stop()
	}
	err := cmd.Wait()
	took = time.Since(start)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true, took, ""
		}
	}
	if err != nil {
		return false, took, fmt.Sprintf("%v\n%s", err, hostileHead(out.Bytes(), 20))
	}
	return false, took, ""
}

// TestTreeRace races a tree conversion with an attacker that swaps
// directories and files of the tree for symbolic links to a directory
// outside it, T/outside, which mirrors the tree's names with ELF files of
// its own (and a marker file): T/tree/a for a link to ../outside and to
// its absolute path, T/tree/a/b for one to ../../outside/b, and the files
// of T/tree/a/b, all at once, for links to outside's. It runs
// cfi2sframe --in-place T/tree and cfi2sframe -o T/out T/tree many times
// while the attacker runs. Files may fail and the exit status may be
// non-zero (the tree changed under the command), but nothing outside
// T/tree and T/out may change: T/outside keeps its names, bytes, modes,
// owners, times and inode numbers, nothing is created anywhere else in
// the test's directory (the command's working directory and TMPDIR
// included), no file in T/tree or T/out holds bytes of T/outside (nothing
// was read there), and the command never panics or hangs.
func TestTreeRace(t *testing.T) {
	gcc := need(t, "gcc")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	T := filepath.Join(tmp, "T")
	tree, outside, out := filepath.Join(T, "tree"), filepath.Join(T, "outside"), filepath.Join(T, "out")
	cwd, tmpdir := filepath.Join(T, "cwd"), filepath.Join(T, "tmp")
	for _, d := range []string{filepath.Join(outside, "b"), out, cwd, tmpdir, filepath.Join(tmp, "build")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Two small programs: the tree's, and outside's, which holds marker
	// (in .rodata, kept by a conversion): a file of T/tree or T/out that
	// holds it was read from T/outside.
	marker := fmt.Sprintf("cfi2sframe-test-outside-%d", time.Now().UnixNano())
	build := func(name, body string) []byte {
		t.Helper()
		c := filepath.Join(tmp, "build", name+".c")
		exe := filepath.Join(tmp, "build", name)
		if err := os.WriteFile(c, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command(gcc, "-O1", "-o", exe, c).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, b)
		}
		b, err := os.ReadFile(exe)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inProg := build("inside", "#include <stdio.h>\nint main(int argc, char **argv) { puts(argv[0]); return argc > 5; }\n")
	outProg := build("outside", "#include <stdio.h>\nconst char marker[] = \""+marker+"\";\nint main(void) { puts(marker); return 0; }\n")
	if bytes.Contains(inProg, []byte(marker)) || !bytes.Contains(outProg, []byte(marker)) {
		t.Fatal("the marker is not where it should be")
	}

	// The tree, and outside with the same names below it (so that a path
	// through a link to it names a file there).
	bNames := []string{"prog"}
	for i := 0; i < 24; i++ {
		bNames = append(bNames, fmt.Sprintf("p%02d", i))
	}
	treeFiles := map[string][]byte{}
	for _, n := range bNames {
		treeFiles["a/b/"+n] = inProg
	}
	for i := 0; i < 8; i++ {
		treeFiles[fmt.Sprintf("a/x%02d", i)] = inProg
	}
	for i := 0; i < 4; i++ {
		treeFiles[fmt.Sprintf("top%d", i)] = inProg
	}
	outsideFiles := map[string][]byte{"prog": outProg, "marker": []byte(marker + "\n"), "b/marker": []byte(marker + "\n")}
	for rel := range treeFiles {
		if r, ok := strings.CutPrefix(rel, "a/"); ok {
			outsideFiles[r] = outProg
		}
	}
	for rel, b := range outsideFiles {
		if err := os.WriteFile(filepath.Join(outside, rel), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Times in the past: a file rewritten with its bytes would still show.
	past := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	filepath.WalkDir(outside, func(p string, _ fs.DirEntry, err error) error {
		if err == nil {
			os.Chtimes(p, past, past)
		}
		return nil
	})
	// newTree fills T/tree anew, with the attacker stopped (T/tree itself
	// stays: T is checked). RemoveAll follows no symbolic link: it removes
	// those the attacker left.
	newTree := func() {
		t.Helper()
		entries, err := os.ReadDir(tree)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(tree, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(tree, "a", "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		for rel, b := range treeFiles {
			if err := os.WriteFile(filepath.Join(tree, rel), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}

	newTree()
	// Everything under tmp but T/tree and T/out: T/outside, T itself, the
	// command's working directory and TMPDIR, the build directory.
	skip := []string{tree, out}
	before, err := hostileSnapshot(tmp, skip)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "TMPDIR="+tmpdir)
	statuses := map[int]int{}
	var sample []string
	seen := map[string]bool{}
	runOnce := func(args ...string) {
		t.Helper()
		cmd := exec.Command(c2s, args...)
		cmd.Dir, cmd.Env = cwd, env
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hung := time.AfterFunc(30*time.Second, func() { cmd.Process.Signal(syscall.SIGQUIT) })
		err := cmd.Wait()
		if !hung.Stop() {
			t.Fatalf("cfi2sframe %s hung for 30 s (SIGQUIT):\n%s", strings.Join(args, " "), hostileHead(buf.Bytes(), 60))
		}
		o := buf.String()
		var ee *exec.ExitError
		status := 0
		switch {
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("cfi2sframe %s killed by %v:\n%s", strings.Join(args, " "), ws.Signal(), hostileHead(buf.Bytes(), 60))
			}
			status = ee.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		for _, bad := range []string{"panic:", "fatal error:", "[running]:", "SIGSEGV", "SIGBUS"} {
			if strings.Contains(o, bad) {
				t.Fatalf("cfi2sframe %s (status %d) crashed:\n%s", strings.Join(args, " "), status, hostileHead(buf.Bytes(), 60))
			}
		}
		statuses[status]++
		for _, l := range strings.Split(strings.TrimSpace(o), "\n") {
			// A few lines of each kind: what follows the last ": ", the
			// file names left out.
			k := l[strings.LastIndex(l, ": ")+1:]
			if l != "" && !seen[k] && len(sample) < 8 {
				seen[k] = true
				sample = append(sample, l)
			}
		}
	}
	// leaked says which files of dir hold the marker: bytes read from
	// T/outside.
	leaked := func(dir string) []string {
		var found []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
				found = append(found, p)
			}
			return nil
		})
		return found
	}

	const iterations = 30
	deadline := time.Now().Add(40 * time.Second)
	var swaps, remade, iters int
	var treeLeft []string
	for i := 0; i < iterations && time.Now().Before(deadline); i++ {
		iters++
		if i > 0 {
			newTree()
		}
		if err := os.RemoveAll(filepath.Join(out, "tree")); err != nil {
			t.Fatal(err)
		}
		a := &hostileAttacker{tree: tree, outside: outside, files: bNames, stop: make(chan struct{}), done: make(chan struct{})}
		go a.run()
		stop := sync.OnceFunc(func() { close(a.stop); <-a.done })
		defer stop() // when a run fails the test
		runOnce("-q", "--in-place", tree)
		runOnce("-q", "-o", out, tree)
		// What follows is checked with the attacker stopped (a and a/b
		// back in place): a walk through its links would read outside.
		stop()
		swaps += a.swaps
		remade += a.remade
		if a.err != nil {
			t.Errorf("iteration %d: the attacker stopped: %v", i, a.err)
		}
		// Outside T/tree and T/out, nothing changed.
		after, err := hostileSnapshot(tmp, skip)
		if err != nil {
			t.Fatal(err)
		}
		diff := hostileDiff(before, after)
		for _, d := range diff {
			t.Errorf("iteration %d: outside T/tree and T/out: %s", i, d)
		}
		for _, p := range append(leaked(tree), leaked(out)...) {
			t.Errorf("iteration %d: %s holds bytes of T/outside (read through a link)", i, p)
		}
		if t.Failed() {
			break
		}
		// Names the runs left in the tree (the attacker put its own
		// back, but for the files it kept as NAME.seen.N): for the log.
		names, _ := hostileNames(tree)
		for n, m := range names {
			if _, ok := treeFiles[n]; !ok && m == hostileFile && !strings.Contains(filepath.Base(n), ".seen.") {
				treeLeft = append(treeLeft, n)
			}
		}
	}
	t.Logf("%d iterations (%d runs), %d swaps by the attacker; exit statuses %v", iters, 2*iters, swaps, statuses)
	for _, l := range sample {
		t.Logf("  e.g. %s", l)
	}
	if remade > 0 {
		t.Logf("%d times a directory the attacker had moved aside was made again in T/tree by a run (not a failure here)", remade)
	}
	if len(treeLeft) > 0 {
		sort.Strings(treeLeft)
		t.Logf("files left in T/tree under other names by the runs (not a failure here): %d, e.g. %v", len(treeLeft), treeLeft[:min(len(treeLeft), 5)])
	}
	if swaps == 0 {
		t.Error("the attacker swapped nothing")
	}
}

// hostileAttacker swaps parts of the tree for symbolic links to outside,
// as fast as it can, until stop is closed, putting each back before the
// next; then it closes done. err says why it stopped early; remade counts
// the directories it found made again by a run in place of one it had
// moved aside (it removes them, then puts the original back).
type hostileAttacker struct {
	tree, outside string
	files         []string // the names of tree/a/b
	stop, done    chan struct{}
	swaps, remade int
	err           error
}

func (a *hostileAttacker) run() {
	defer close(a.done)
	for i := 0; ; i++ {
		select {
		case <-a.stop:
			return
		default:
		}
		var err error
		switch i % 4 {
		case 0:
			err = a.swapDir(filepath.Join(a.tree, "a"), "../outside")
		case 1:
			err = a.swapDir(filepath.Join(a.tree, "a"), a.outside)
		case 2:
			err = a.swapDir(filepath.Join(a.tree, "a", "b"), "../../outside/b")
		case 3:
			err = a.swapFiles(i)
		}
		if err != nil {
			a.err = err
			return
		}
		a.swaps++
	}
}

// swapDir renames the directory path aside, puts a symbolic link to
// target in its place, and puts the directory back. A run can make path
// (or the name aside) again, as a directory, while the original is away:
// the attacker removes what it made, which is inside the tree.
func (a *hostileAttacker) swapDir(path, target string) error {
	moved := path + ".moved"
	for try := 0; ; try++ {
		if _, err := os.Lstat(moved); err == nil {
			a.remade++
			if err := os.RemoveAll(moved); err != nil {
				return err
			}
		}
		err := os.Rename(path, moved)
		if err == nil {
			break
		}
		if try == 100 || !(errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY)) {
			return err
		}
	}
	os.Symlink(target, path) // fails if a run made path again meanwhile
	runtime.Gosched()
	for try := 0; ; try++ {
		if st, err := os.Lstat(path); err == nil {
			if st.IsDir() {
				a.remade++
			}
			if err := os.RemoveAll(path); err != nil {
				return err
			}
		}
		err := os.Rename(moved, path)
		if err == nil || try == 100 {
			return err
		}
	}
}

// swapFiles does that to every file of tree/a/b at once, a link to
// outside/b/NAME (outside/prog for prog) in place of each. Where a run
// renamed a file over a link meanwhile, that file is kept as NAME.seen.N
// (step i), in the tree, for the marker to be looked for in it.
func (a *hostileAttacker) swapFiles(i int) error {
	dir := filepath.Join(a.tree, "a", "b")
	var moved []string
	for _, n := range a.files {
		if err := os.Rename(filepath.Join(dir, n), filepath.Join(dir, n+".moved")); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		moved = append(moved, n)
		target := filepath.Join(a.outside, "b", n)
		if n == "prog" {
			target = filepath.Join(a.outside, "prog")
		}
		os.Symlink(target, filepath.Join(dir, n)) // fails if a run put a file there meanwhile
	}
	runtime.Gosched()
	for _, n := range moved {
		p := filepath.Join(dir, n)
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
			os.Rename(p, fmt.Sprintf("%s.seen.%d", p, i))
		}
		if err := os.Rename(p+".moved", p); err != nil {
			return err
		}
	}
	return nil
}

// hostileEntry is what a snapshot keeps of one directory entry.
type hostileEntry struct {
	mode         fs.FileMode
	uid, gid     uint32
	size         int64
	ino, nlink   uint64
	mtime, ctime int64
	sum          [32]byte // regular files
	link         string   // symbolic links
}

// hostileSnapshot records every entry under root (root included; symbolic
// links not followed) but the trees skip.
func hostileSnapshot(root string, skip []string) (map[string]hostileEntry, error) {
	snap := map[string]hostileEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(skip, p) {
			return filepath.SkipDir
		}
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		e := hostileEntry{
			mode: st.Mode(), uid: sys.Uid, gid: sys.Gid, size: st.Size(), ino: sys.Ino, nlink: uint64(sys.Nlink),
			mtime: sys.Mtim.Nano(), ctime: sys.Ctim.Nano(),
		}
		switch {
		case st.Mode().IsRegular():
			s, err := hostileSum(p)
			if err != nil {
				return err
			}
			e.sum = s.sum
		case st.Mode()&fs.ModeSymlink != 0:
			if e.link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(root, p)
		snap[rel] = e
		return nil
	})
	return snap, err
}

// hostileDiff lists what differs between two snapshots.
func hostileDiff(before, after map[string]hostileEntry) []string {
	var diff []string
	for rel, b := range before {
		a, ok := after[rel]
		switch {
		case !ok:
			diff = append(diff, rel+": removed")
		case a != b:
			var what []string
			if a.mode != b.mode {
				what = append(what, fmt.Sprintf("mode %v -> %v", b.mode, a.mode))
			}
			if a.uid != b.uid || a.gid != b.gid {
				what = append(what, fmt.Sprintf("owner %d:%d -> %d:%d", b.uid, b.gid, a.uid, a.gid))
			}
			if a.ino != b.ino {
				what = append(what, fmt.Sprintf("inode %d -> %d", b.ino, a.ino))
			}
			if a.nlink != b.nlink {
				what = append(what, fmt.Sprintf("links %d -> %d", b.nlink, a.nlink))
			}
			if a.size != b.size || a.sum != b.sum {
				what = append(what, fmt.Sprintf("contents (%d bytes -> %d)", b.size, a.size))
			}
			if a.link != b.link {
				what = append(what, fmt.Sprintf("link %q -> %q", b.link, a.link))
			}
			if a.mtime != b.mtime {
				what = append(what, "mtime")
			}
			if a.ctime != b.ctime {
				what = append(what, "ctime")
			}
			diff = append(diff, rel+": "+strings.Join(what, ", "))
		}
	}
	for rel := range after {
		if _, ok := before[rel]; !ok {
			diff = append(diff, rel+": created")
		}
	}
	sort.Strings(diff)
	return diff
}

// hostileSumT is a file's size, mode and SHA-256.
type hostileSumT struct {
	size int64
	mode fs.FileMode
	sum  [32]byte
}

// hostileSum reads the file at path (not through a symbolic link).
func hostileSum(path string) (hostileSumT, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return hostileSumT{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return hostileSumT{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return hostileSumT{}, err
	}
	s := hostileSumT{size: st.Size(), mode: st.Mode()}
	h.Sum(s.sum[:0])
	return s, nil
}

// hostileSums hashes the files (paths relative to dir), on every CPU.
func hostileSums(t *testing.T, dir string, files []string) map[string]hostileSumT {
	t.Helper()
	sums := make(map[string]hostileSumT, len(files))
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	var firstErr error
	for i := 0; i < runtime.NumCPU(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				s, err := hostileSum(filepath.Join(dir, f))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				sums[f] = s
				mu.Unlock()
			}
		}()
	}
	for _, f := range files {
		work <- f
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return sums
}

// hostileCopy copies a file (creating the directories on the way), with
// its permission bits.
func hostileCopy(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hostileNames lists every name below root (root itself left out), with
// its type bits; symbolic links are not followed.
func hostileNames(root string) (map[string]fs.FileMode, error) {
	names := map[string]fs.FileMode{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			names[rel] = d.Type()
			if d.Type() == 0 {
				names[rel] = hostileFile
			}
		}
		return nil
	})
	return names, err
}

// hostileFile marks a regular file in hostileNames' map, where the type
// bits of a regular file are zero.
const hostileFile = fs.ModeTemporary

// hostileFiles lists the regular files of a hostileNames map, sorted.
func hostileFiles(names map[string]fs.FileMode) []string {
	var files []string
	for n, m := range names {
		if m == hostileFile {
			files = append(files, n)
		}
	}
	sort.Strings(files)
	return files
}

// hostileExtra lists the names of got that want lacks or has with
// another type, sorted.
func hostileExtra(got, want map[string]fs.FileMode) []string {
	var extra []string
	for n, m := range got {
		if w, ok := want[n]; !ok || w != m {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	return extra
}

// hostileHead is the first n lines of b.
func hostileHead(b []byte, n int) string {
	lines := strings.SplitAfter(string(b), "\n")
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more lines)\n", len(lines)-n))
	}
	return strings.Join(lines, "")
}
