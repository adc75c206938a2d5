package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
