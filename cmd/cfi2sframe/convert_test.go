package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// runCmd runs the root command with args and returns stdout, stderr and
// the error.
func runCmd(args ...string) (string, string, error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

func TestVersion(t *testing.T) {
	out, _, err := runCmd("--version")
	if err != nil || !strings.HasPrefix(out, "cfi2sframe ") || !strings.Contains(out, "read: 1, 2, 3; written: 2, 3") {
		t.Errorf("--version: %q, %v", out, err)
	}
}

// TestTreeCommand: the tree form is chosen for a directory, counts every
// outcome in its summary, fails (status 1) when a file failed, and rejects
// the single-file options.
func TestTreeCommand(t *testing.T) {
	dir := t.TempDir()
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "hello"), hello, 0o755)
	os.WriteFile(filepath.Join(dir, "notes"), []byte("text\n"), 0o644)
	_, stderr, err := runCmd("--in-place", "-j", "1", dir)
	if err != nil || !strings.Contains(stderr, "2 files: 1 converted, 0 already have SFrame, 0 without CFI, 1 not ELF, 0 unsupported machine or type, 0 without a safe layout, 0 signed (left alone), 0 refused (metadata not kept), 0 failed") {
		t.Errorf("tree run: %v\n%s", err, stderr)
	}
	// hello's .init and .fini have no CFI, so not all of its code.
	if !regexp.MustCompile(`SFrame describes [5-9][0-9]\.[0-9]% of the converted programs' and libraries' code \([0-9]+ of [0-9]+ bytes`).MatchString(stderr) {
		t.Errorf("tree run: no code coverage line, or a wrong one:\n%s", stderr)
	}
	os.WriteFile(filepath.Join(dir, "broken"), hello[:300], 0o755)
	_, stderr, err = runCmd("--in-place", "-q", dir)
	var ee *exitError
	if err == nil || errors.As(err, &ee) || !strings.Contains(stderr, "broken") || !strings.Contains(err.Error(), "1 of 3 files failed") {
		t.Errorf("tree run with a broken file: %v\n%s", err, stderr)
	}
	if _, _, err := runCmd("--in-place", "--diagnostics", "text", dir); err == nil {
		t.Errorf("--diagnostics accepted with a directory")
	}
	if _, _, err := runCmd("--json", filepath.Join(dir, "hello"), "-o", filepath.Join(dir, "x")); err == nil {
		t.Errorf("--json accepted with one file")
	}
}

// TestOutputDirectory: IN -o DIR, DIR an existing directory, writes
// DIR/base(IN), as cp does.
func TestOutputDirectory(t *testing.T) {
	out := t.TempDir()
	if _, stderr, err := runCmd("-q", "../../testdata/example/hello", "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "hello")); err != nil {
		t.Error(err)
	}
}

// TestInPlaceKeepsMetadata: one file converted in place keeps its owner,
// group, setgid bit and capability; with -p its times too. A file signed
// by IMA is left alone with an error.
func TestInPlaceKeepsMetadata(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("gives files other owners and capabilities: needs root")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "chage")
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, hello, 0o755); err != nil {
		t.Fatal(err)
	}
	capRaw := []byte{1, 0, 0, 2, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	os.Chown(f, 1000, 42)
	os.Chmod(f, 0o755|os.ModeSetgid)
	if err := unix.Setxattr(f, "security.capability", capRaw, 0); err != nil {
		t.Skip("no file capabilities here:", err)
	}
	mtime := time.Unix(1234567890, 0)
	os.Chtimes(f, mtime, mtime)
	if _, stderr, err := runCmd("-q", "-p", "--in-place", f); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var st unix.Stat_t
	if err := unix.Stat(f, &st); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := unix.Getxattr(f, "security.capability", buf)
	if st.Uid != 1000 || st.Gid != 42 || st.Mode&0o7777 != 0o2755 || st.Mtim.Sec != mtime.Unix() || err != nil || !bytes.Equal(buf[:n], capRaw) {
		t.Errorf("uid %d gid %d mode %o mtime %d capability %x %v", st.Uid, st.Gid, st.Mode&0o7777, st.Mtim.Sec, buf[:n], err)
	}
	if out, _ := os.ReadFile(f); bytes.Equal(out, hello) {
		t.Error("not converted")
	}

	signed := filepath.Join(dir, "signed")
	os.WriteFile(signed, hello, 0o755)
	unix.Setxattr(signed, "security.ima", []byte{3, 2}, 0)
	_, _, err = runCmd("-q", "--in-place", signed)
	if err == nil || !strings.Contains(err.Error(), "security.ima") {
		t.Errorf("signed file: %v", err)
	}
	if out, _ := os.ReadFile(signed); !bytes.Equal(out, hello) {
		t.Error("signed file changed")
	}
}

// TestTreeFromCode: with --from-code, a tree's file without CFI is
// converted, and the summary says what share of the code the
// instructions describe.
func TestTreeFromCode(t *testing.T) {
	dir := t.TempDir()
	nocfi, err := os.ReadFile("../../testdata/fromcode/x86_64-nocfi")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "nocfi"), nocfi, 0o755)
	os.WriteFile(filepath.Join(dir, "notes"), []byte("text\n"), 0o644)
	_, stderr, err := runCmd("--in-place", "-j", "1", dir)
	if err != nil || !strings.Contains(stderr, "0 converted") {
		t.Errorf("without --from-code: %v\n%s", err, stderr)
	}
	_, stderr, err = runCmd("--in-place", "-j", "1", "--from-code", dir)
	if err != nil || !strings.Contains(stderr, "1 converted") {
		t.Errorf("with --from-code: %v\n%s", err, stderr)
	}
	if !regexp.MustCompile(`of which [1-9][0-9]\.[0-9]% from the instructions \(--from-code: [0-9]+ bytes\)`).MatchString(stderr) {
		t.Errorf("no from-code share in the summary:\n%s", stderr)
	}
}
