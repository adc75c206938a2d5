package fsmeta

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func create(t *testing.T, path string, mode os.FileMode) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, mode)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestApplyOrder: the new file gets owner, group, setuid and setgid and
// the capability together, though chown clears the last three; an
// attribute the original lacks is removed; the times come last.
func TestApplyOrder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("gives files other owners and capabilities: needs root")
	}
	dir := t.TempDir()
	src := create(t, filepath.Join(dir, "src"), 0o755)
	capRaw := []byte{1, 0, 0, 2, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if err := unix.Fsetxattr(int(src.Fd()), "security.capability", capRaw, 0); err != nil {
		t.Skip("no file capabilities here:", err)
	}
	if err := src.Chown(1000, 42); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fsetxattr(int(src.Fd()), "security.capability", capRaw, 0); err != nil {
		t.Fatal(err)
	}
	if err := src.Chmod(0o755 | os.ModeSetuid | os.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	ts := []unix.Timespec{{Sec: 1e9}, {Sec: 1.2e9, Nsec: 7}}
	if err := unix.UtimesNanoAt(int(src.Fd()), "", ts, unix.AT_EMPTY_PATH); err != nil {
		t.Fatal(err)
	}
	m, err := Read(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := create(t, filepath.Join(dir, "dst"), 0o600)
	if err := unix.Fsetxattr(int(dst.Fd()), "user.extra", []byte("x"), 0); err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatal(err)
	}
	if _, err := Apply(dst, m, Options{Times: true}); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	if got.Uid != 1000 || got.Gid != 42 || got.Mode != m.Mode || got.Mtime != ts[1] || got.Atime != ts[0] {
		t.Errorf("got %+v, want %+v", got, m)
	}
	if v, ok := got.Xattr("security.capability"); !ok || !bytes.Equal(v, capRaw) {
		t.Errorf("capability %x, %v", v, ok)
	}
	if _, ok := got.Xattr("user.extra"); ok {
		t.Error("an attribute the original lacks was kept")
	}
}

// TestSignature: a signature over the content is recognised.
func TestSignature(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xattrs []Xattr
		data   string
		signed bool
	}{
		{"plain", nil, "\x7fELF...", false},
		{"ima", []Xattr{{"security.ima", []byte{3}}}, "\x7fELF", true},
		{"evm", []Xattr{{"security.evm", []byte{5}}}, "\x7fELF", true},
		{"capability only", []Xattr{{"security.capability", []byte{1}}}, "\x7fELF", false},
		{"module signature", nil, "\x7fELF...sig~Module signature appended~\n", true},
	} {
		got := Signature(&Meta{Xattrs: tc.xattrs}, []byte(tc.data))
		if (got != "") != tc.signed {
			t.Errorf("%s: %q", tc.name, got)
		}
	}
}

// TestBestEffort: as a user who may not give the owner, a best-effort
// copy keeps the rest, drops setuid and says so; a strict one fails with
// a LostError naming the owner.
func TestBestEffort(t *testing.T) {
	if os.Geteuid() == 0 {
		asNobody(t, "TestBestEffort")
		return
	}
	dir := t.TempDir()
	dst := create(t, filepath.Join(dir, "dst"), 0o600)
	m := &Meta{Mode: unix.S_IFREG | 0o4755, Uid: 0, Gid: 0}
	_, err := Apply(dst, m, Options{})
	var le *LostError
	if !errors.As(err, &le) || le.What != "owner 0:0" {
		t.Fatalf("strict: %v", err)
	}
	lost, err := Apply(dst, m, Options{BestEffort: true})
	if err != nil || len(lost) == 0 {
		t.Fatalf("best effort: %v, %v", lost, err)
	}
	st, _ := dst.Stat()
	if st.Mode()&os.ModeSetuid != 0 || st.Mode().Perm() != 0o755 {
		t.Errorf("mode %v", st.Mode())
	}
}

// asNobody runs the test name again in a child process as user nobody.
func asNobody(t *testing.T, name string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for d := dir; d != filepath.Dir(d) && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	exe := filepath.Join(dir, "fsmeta.test")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+name+"$", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	os.Chmod(dir, 0o777)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+name)) {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
}
