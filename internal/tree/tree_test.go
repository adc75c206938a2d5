package tree

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// dataOnlyObject assembles an object with only data (no .eh_frame).
func dataOnlyObject(t *testing.T, dst string) {
	t.Helper()
	as := toolchain.Tool(t, "sid", "x86_64-as")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "d.s")
	if err := os.WriteFile(src, []byte(".data\n.globl tbl\ntbl: .byte 1,2,3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(as, "--gsframe", "-o", dst, src).CombinedOutput(); err != nil {
		t.Fatalf("as: %v\n%s", err, out)
	}
}

// sampleTree builds a directory holding one file of every outcome and
// returns it with the expected outcome per path.
func sampleTree(t *testing.T) (string, map[string]Outcome) {
	root := filepath.Join(t.TempDir(), "in")
	fx := func(n string) string { return filepath.Join("..", "..", "testdata", "sframe", n) }
	want := map[string]Outcome{}
	put := func(rel, src string, oc Outcome) {
		copyFile(t, src, filepath.Join(root, rel))
		want[filepath.Join(root, rel)] = oc
	}
	put("bin/hello", filepath.Join("..", "..", "testdata", "example", "hello"), Converted)
	put("bin/gnu", fx("v3-x86_64-exe"), HasSFrame)
	put("lib/s390x.so", fx("v3-s390x-lib.so"), HasSFrame)
	// A machine cfi2sframe does not convert: RISC-V in the ELF header.
	riscv, err := os.ReadFile(fx("v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(riscv[18:], uint16(elf.EM_RISCV))
	if err := os.WriteFile(filepath.Join(root, "lib", "riscv"), riscv, 0o644); err != nil {
		t.Fatal(err)
	}
	want[filepath.Join(root, "lib", "riscv")] = Unsupported
	put("share/README", "tree.go", NotELF)
	exe, err := os.ReadFile(fx("v2-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "truncated"), exe[:200], 0o644); err != nil {
		t.Fatal(err)
	}
	want[filepath.Join(root, "bin", "truncated")] = Failed
	dataOnlyObject(t, filepath.Join(root, "obj", "data.o"))
	want[filepath.Join(root, "obj", "data.o")] = NoCFI
	if err := os.Symlink("hello", filepath.Join(root, "bin", "link")); err != nil {
		t.Fatal(err)
	}
	return root, want
}

func snapshot(t *testing.T, files map[string]Outcome) map[string][]byte {
	m := map[string][]byte{}
	for f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m[f] = b
	}
	return m
}

func TestInPlace(t *testing.T) {
	root, want := sampleTree(t)
	before := snapshot(t, want)
	got := map[string]Record{}
	sum, err := Run(context.Background(), []string{root}, Options{Jobs: 3, Record: func(r Record) { got[r.File] = r }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != len(want) || sum.Special != 1 || sum.OK() {
		t.Errorf("summary %+v: want %d files, 1 special, not OK (one failed)", sum, len(want))
	}
	for f, oc := range want {
		r := got[f]
		if r.Outcome != oc {
			t.Errorf("%s: outcome %q (%s), want %q", f, r.Outcome, r.Error, oc)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if oc != Converted {
			if !bytes.Equal(b, before[f]) {
				t.Errorf("%s (%s): changed", f, oc)
			}
			if oc != Converted && (r.Error == "" || !strings.HasPrefix(r.Error, f) || strings.Count(r.Error, f) != 1) {
				t.Errorf("%s: error %q does not start with the file name, once", f, r.Error)
			}
			if r.Err == nil || r.Err.Error() != r.Error {
				t.Errorf("%s: Err %v, want the error Error says", f, r.Err)
			}
			continue
		}
		ef, err := elfread.NewFile(bytes.NewReader(b), f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ef.SFrame(); err != nil {
			t.Errorf("%s: converted file has no .sframe: %v", f, err)
		}
		if r.Functions == 0 || r.SFrameBytes == 0 || r.Output != f {
			t.Errorf("%s: record %+v", f, r)
		}
	}
	noTemp(t, root)
	// Everything converted now: a second run has nothing to do.
	if err := os.Remove(filepath.Join(root, "bin", "truncated")); err != nil {
		t.Fatal(err)
	}
	sum, err = Run(context.Background(), []string{root}, Options{})
	if err != nil || !sum.OK() || sum.Counts[Converted] != 0 || sum.Counts[HasSFrame] != 3 {
		t.Errorf("second run: %+v, %v", sum, err)
	}
}

// TestBadOptions: options that cannot be used are refused before any
// file is looked at or any directory created, by an *OptionError.
func TestBadOptions(t *testing.T) {
	root, _ := sampleTree(t)
	out := filepath.Join(t.TempDir(), "out")
	calls := 0
	_, err := Run(context.Background(), []string{root}, Options{Convert: convert.Options{Version: 3, PCRel: true}, OutDir: out,
		Record: func(Record) { calls++ }})
	var oe *convert.OptionError
	if !errors.As(err, &oe) || oe.Option != "PCRel" || calls != 0 {
		t.Errorf("error %v, %d records: want an *OptionError for PCRel and no file looked at", err, calls)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s created", out)
	}
}

func noTemp(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestOutDir(t *testing.T) {
	root, want := sampleTree(t)
	delete(want, filepath.Join(root, "bin", "truncated"))
	os.Remove(filepath.Join(root, "bin", "truncated"))
	before := snapshot(t, want)
	out := filepath.Join(t.TempDir(), "out")
	single := filepath.Join(root, "bin", "hello")
	sum, err := Run(context.Background(), []string{root, single}, Options{OutDir: out})
	if err != nil || !sum.OK() {
		t.Fatalf("%+v, %v", sum, err)
	}
	for f, oc := range want {
		rel, _ := filepath.Rel(filepath.Dir(root), f)
		b, err := os.ReadFile(filepath.Join(out, rel))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if (oc == Converted) == bytes.Equal(b, before[f]) {
			t.Errorf("%s (%s): output equal to input: %v", f, oc, bytes.Equal(b, before[f]))
		}
		in, _ := os.ReadFile(f)
		if !bytes.Equal(in, before[f]) {
			t.Errorf("%s: input changed", f)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "hello")); err != nil {
		t.Errorf("file argument not written to DIR/base: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(out, "in", "bin", "link")); err != nil || target != "hello" {
		t.Errorf("symbolic link not copied as a link to hello: %q, %v", target, err)
	}
	// Two arguments with the same base name would collide.
	if _, err := Run(context.Background(), []string{single, filepath.Join(out, "hello")}, Options{OutDir: out}); err == nil {
		t.Errorf("colliding outputs accepted")
	}
}

func TestCancelled(t *testing.T) {
	root, want := sampleTree(t)
	before := snapshot(t, want)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum, err := Run(ctx, []string{root}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.OK() || sum.Counts[Converted] != 0 {
		t.Errorf("cancelled run: %+v", sum)
	}
	for f := range want {
		b, _ := os.ReadFile(f)
		if !bytes.Equal(b, before[f]) {
			t.Errorf("%s changed by a cancelled run", f)
		}
	}
	noTemp(t, root)
}

// TestCancelledWhileWriting: an in-place run cancelled when its first
// file is recorded, with other outputs still being written on their own
// goroutines, leaves every file either as it was or converted (as its
// record says) and no temporary file.
func TestCancelledWhileWriting(t *testing.T) {
	root, want := sampleTree(t)
	// More files to convert than the workers hold at once.
	hello := filepath.Join(root, "bin", "hello")
	for i := range 6 {
		copyFile(t, hello, filepath.Join(root, "more", fmt.Sprintf("hello%d", i)))
		want[filepath.Join(root, "more", fmt.Sprintf("hello%d", i))] = Converted
	}
	before := snapshot(t, want)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	converted := map[string]bool{}
	sum, err := Run(ctx, []string{root}, Options{Jobs: 2, Record: func(r Record) {
		mu.Lock()
		defer mu.Unlock()
		converted[r.File] = r.Outcome == Converted
		cancel()
	}})
	if err != nil || sum.OK() {
		t.Fatalf("cancelled run: %+v, %v", sum, err)
	}
	for f := range want {
		b, _ := os.ReadFile(f)
		if same := bytes.Equal(b, before[f]); same == converted[f] {
			t.Errorf("%s: unchanged %v, recorded converted %v", f, same, converted[f])
		}
	}
	noTemp(t, root)
}

// TestHardLinks: in place, the names of one file (hard links, or a path
// given twice) are converted once and stay one file.
func TestHardLinks(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "sub", "b")
	copyFile(t, filepath.Join("..", "..", "testdata", "example", "hello"), a)
	os.MkdirAll(filepath.Dir(b), 0o755)
	if err := os.Link(a, b); err != nil {
		t.Skip("no hard links here:", err)
	}
	var recs []Record
	sum, err := Run(context.Background(), []string{dir, a}, Options{Record: func(r Record) { recs = append(recs, r) }})
	if err != nil || !sum.OK() || sum.Files != 2 || sum.Counts[Converted] != 2 {
		t.Fatalf("%+v, %v, records %+v", sum, err, recs)
	}
	sa, _ := os.Stat(a)
	sb, _ := os.Stat(b)
	if !os.SameFile(sa, sb) {
		t.Errorf("%s and %s are no longer one file", a, b)
	}
	data, _ := os.ReadFile(b)
	if ef, err := elfread.NewFile(bytes.NewReader(data), b); err != nil {
		t.Fatal(err)
	} else if _, err := ef.SFrame(); err != nil {
		t.Errorf("%s: not converted: %v", b, err)
	}
	noTemp(t, dir)
}

// TestOutDirFailedRunLeavesNoDirectory: a run with OutDir that does not
// succeed (cancelled before it starts, or after its first file) removes
// the directories it created and left empty, OutDir included, and leaves
// no temporary file; the files it did write stay.
func TestOutDirFailedRunLeavesNoDirectory(t *testing.T) {
	root, _ := sampleTree(t)
	out := filepath.Join(t.TempDir(), "new", "out")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sum, err := Run(ctx, []string{root}, Options{OutDir: out})
	if err != nil || sum.OK() {
		t.Fatalf("cancelled run: %+v, %v", sum, err)
	}
	if _, err := os.Lstat(filepath.Dir(out)); err == nil {
		t.Errorf("%s left behind by a cancelled run", filepath.Dir(out))
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var written []string
	sum, err = Run(ctx, []string{root}, Options{OutDir: out, Jobs: 1, Record: func(r Record) {
		if r.Output != "" {
			written = append(written, r.Output)
		}
		cancel()
	}})
	if err != nil || sum.OK() {
		t.Fatalf("run cancelled after a file: %+v, %v", sum, err)
	}
	for _, f := range written {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s was written, now: %v", f, err)
		}
	}
	filepath.WalkDir(filepath.Dir(out), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if ents, _ := os.ReadDir(p); d.IsDir() && len(ents) == 0 {
			t.Errorf("empty directory left: %s", p)
		}
		return nil
	})
	noTemp(t, filepath.Dir(out))
}

// TestDirMaker: the directories mkdirAll created and nobody filled are
// removed; those that hold a file, and those that existed, stay.
func TestDirMaker(t *testing.T) {
	dir := t.TempDir()
	var m dirMaker
	for _, d := range []string{"a/b/c", "a/b/d", "a/e"} {
		if err := m.mkdirAll(filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "d", "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := m.mkdirAll(filepath.Join(dir, "a", "b", "d", "f", "g")); err == nil {
		t.Errorf("mkdirAll below a file succeeded")
	}
	m.removeEmpty()
	for d, want := range map[string]bool{"": true, "a": true, "a/b": true, "a/b/d": true, "a/b/c": false, "a/e": false} {
		if _, err := os.Lstat(filepath.Join(dir, d)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", d, err == nil, want)
		}
	}
}

// TestLargestFirst: with one job, files are converted in order of size,
// largest first, so that on several CPUs a large file found last does not
// leave the others idle at the end; equal sizes keep the listed order.
func TestLargestFirst(t *testing.T) {
	root, _ := sampleTree(t)
	var sizes []int64
	var names []string
	sum, err := Run(context.Background(), []string{root}, Options{OutDir: filepath.Join(t.TempDir(), "out"), Jobs: 1, Record: func(r Record) {
		st, err := os.Stat(r.File)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, st.Size())
		names = append(names, r.File)
	}})
	if err != nil || sum.Files < 5 {
		t.Fatalf("run: %+v, %v", sum, err)
	}
	if !slices.IsSortedFunc(sizes, func(a, b int64) int { return cmp.Compare(b, a) }) {
		t.Errorf("files not started largest first:\n%v\n%v", names, sizes)
	}

	jobs := []job{{place: place{in: "a"}, size: 1}, {place: place{in: "b"}, size: 3}, {place: place{in: "c"}, size: 1}, {place: place{in: "d"}, size: 2}}
	largestFirst(jobs)
	var got []string
	for _, j := range jobs {
		got = append(got, j.in)
	}
	if want := []string{"b", "d", "a", "c"}; !slices.Equal(got, want) {
		t.Errorf("largestFirst: %v, want %v", got, want)
	}
}
