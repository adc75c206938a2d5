package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// xzOf is b compressed with xz.
func xzOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := xz.WriterConfig{DictCap: 1 << 20}.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarOf is a tar archive of the files given, in order (name, content).
func tarOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i < len(files); i += 2 {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: files[i], Size: int64(len(files[i+1])), Mode: 0o755})
		tw.Write([]byte(files[i+1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bombDeb is a package whose member ("data" or "control") is a tar
// holding ./big, 4 GiB of zeros, xz-compressed in three streams (its
// header, the zeros, the archive's end): 700 KB that take half a minute
// to decode. Otherwise its data member holds the program hello, which
// converts, so that the control member is read too.
func bombDeb(t *testing.T, member string) []byte {
	t.Helper()
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./big", Size: 4 << 30, Mode: 0o644})
	tw.Flush()
	bomb := append(xzOf(t, hdr.Bytes()), hostile.XzZeros(4<<30)...)
	bomb = append(bomb, xzOf(t, make([]byte, 1024))...)
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	control := xzOf(t, tarOf(t, "./control", "Package: t\n", "./md5sums", "00000000000000000000000000000000  usr/bin/hello\n"))
	data := xzOf(t, tarOf(t, "./usr/bin/hello", string(hello)))
	if member == "data" {
		data = bomb
	} else {
		control = bomb
	}
	return hostile.Deb("control.tar.xz", control, "data.tar.xz", data)
}

// dictDeb is a package whose data member's one block declares a 4 GiB
// dictionary.
func dictDeb(t *testing.T) []byte {
	t.Helper()
	data := xzOf(t, tarOf(t, "./usr/share/doc/t/notes", "notes\n"))
	hostile.SetXzDict(data, 12, 40)
	return hostile.Deb("control.tar.xz", xzOf(t, tarOf(t, "./control", "Package: t\n")), "data.tar.xz", data)
}

// TestDebLimits: a package that expands past --max-expansion, or
// declares a dictionary over 128 MiB, is one error line naming the
// package, the member and the bound (and the flag that moves it); no
// output is written.
func TestDebLimits(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		in   []byte
		args []string
		want []string // the error starts with want[0] and ends with want[1]
	}{
		// (The default, 250, takes some seconds more to reach.)
		{"data", bombDeb(t, "data"), []string{"--max-expansion", "1"}, []string{": data.tar.xz: ./big: xz: expands past 64 MiB + 1 × its ", " (--max-expansion)"}},
		{"control", bombDeb(t, "control"), []string{"--max-expansion", "1"}, []string{": control.tar.xz: xz: expands past 64 MiB + 1 × its ", " (--max-expansion)"}},
		{"dictionary", dictDeb(t), nil, []string{": data.tar.xz: xz: the block declares a 4 GiB dictionary, over the 128 MiB limit", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, out := filepath.Join(dir, c.name+".deb"), filepath.Join(dir, c.name+"-out.deb")
			os.WriteFile(in, c.in, 0o644)
			_, _, err := runCmd(append(c.args, in, "-o", out)...)
			if err == nil || !strings.HasPrefix(err.Error(), in+c.want[0]) || !strings.HasSuffix(err.Error(), c.want[1]) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want an error starting %q and ending %q, got %v", in+c.want[0], c.want[1], err)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an output was written")
			}
			t.Log(err)
		})
	}
}

// TestDebTreeBomb: in the tree form a package that expands past its
// bound, and one declaring a 4 GiB dictionary, are two failed files of
// the run; the program beside them is converted, and no temporary file
// is left in TMPDIR.
func TestDebTreeBomb(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bomb.deb"), bombDeb(t, "data"), 0o644)
	os.WriteFile(filepath.Join(dir, "dict.deb"), dictDeb(t), 0o644)
	hello, _ := os.ReadFile("../../testdata/example/hello")
	os.WriteFile(filepath.Join(dir, "hello"), hello, 0o755)
	before := snapshot(t, dir)
	stdout, stderr, err := runCmd("--json", "--max-expansion", "1", "--in-place", "-j", "2", dir)
	if err == nil || err.Error() != "2 of 3 files failed" {
		t.Fatalf("want 2 of 3 files failed, got %v\n%s", err, stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var r struct{ File, Outcome, Error string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[filepath.Base(r.File)] = r.Outcome
	}
	if want := map[string]string{"bomb.deb": "failed", "dict.deb": "failed", "hello": "converted"}; !equalMaps(got, want) {
		t.Errorf("outcomes %v, want %v", got, want)
	}
	for _, want := range []string{"bomb.deb: data.tar.xz: ./big: xz: expands past 64 MiB + 1 × its ", "(--max-expansion)\n", "dict.deb: data.tar.xz: xz: the block declares a 4 GiB dictionary, over the 128 MiB limit\n"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	after := snapshot(t, dir)
	hp := filepath.Join(dir, "hello")
	for name, sum := range before {
		if name != hp && after[name] != sum {
			t.Errorf("%s changed", name)
		}
	}
	if after[hp] == before[hp] || len(after) != len(before) {
		t.Errorf("hello not converted, or files added: %v", after)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("TMPDIR holds %d files", len(ents))
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestDebSignal: SIGTERM while a package's data member or control member
// is decoded ends the run at once with status 130, leaving the package
// as it was, no output and nothing in TMPDIR; in the file form and the
// tree form.
func TestDebSignal(t *testing.T) {
	hello, _ := os.ReadFile("../../testdata/example/hello")
	cases := []struct {
		name   string
		member string
		args   func(dir string) []string
	}{
		{"data -o", "data", func(dir string) []string {
			return []string{filepath.Join(dir, "t.deb"), "-o", filepath.Join(dir, "out.deb")}
		}},
		{"control in place", "control", func(dir string) []string { return []string{"--in-place", filepath.Join(dir, "t.deb")} }},
		{"tree in place", "data", func(dir string) []string { return []string{"--in-place", "-j", "1", dir} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, tmp := t.TempDir(), t.TempDir()
			os.WriteFile(filepath.Join(dir, "t.deb"), bombDeb(t, c.member), 0o644)
			if strings.HasPrefix(c.name, "tree") {
				os.WriteFile(filepath.Join(dir, "z-hello"), hello, 0o755)
			}
			before := snapshot(t, dir)
			code, stderr, took := signalled(t, tmp, time.Second, append([]string{"--max-expansion", "0"}, c.args(dir)...)...)
			if code != 130 || !strings.Contains(stderr, "interrupted") {
				t.Fatalf("status %d, want 130 saying interrupted:\n%s", code, stderr)
			}
			if took > 5*time.Second {
				t.Errorf("%v after SIGTERM", took)
			}
			if after := snapshot(t, dir); !equalMaps(after, before) {
				t.Errorf("the directory changed: %v, was %v", after, before)
			}
			if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
				t.Errorf("TMPDIR holds %d files", len(ents))
			}
			t.Logf("%v after SIGTERM: %s", took, strings.TrimSpace(stderr))
		})
	}
}

// signalled runs the command (this test binary, re-executed) with
// TMPDIR tmp, sends it SIGTERM after wait, and returns its exit status,
// its stderr and how long it ran after the signal.
func signalled(t *testing.T, tmp string, wait time.Duration, args ...string) (int, string, time.Duration) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "CFI2SFRAME_RUN_MAIN=1", "TMPDIR="+tmp)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-time.After(wait):
	case <-done:
		t.Fatalf("the command ended before the signal: %s", errb.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	sent := time.Now()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatal("still running a minute after SIGTERM")
	}
	return cmd.ProcessState.ExitCode(), errb.String(), time.Since(sent)
}
