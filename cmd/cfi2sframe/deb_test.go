package main

import (
	"archive/tar"
	"bytes"
	"crypto/md5"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// makeDeb builds, with dpkg-deb (xz), the package t holding the ELF
// program usr/bin/hello (when withELF) and a text file, listed in md5sums.
func makeDeb(t *testing.T, path string, withELF bool) {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		if os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") == "1" {
			t.Fatal("dpkg-deb not found (CI installs it)")
		}
		t.Skip("dpkg-deb not found")
	}
	root := filepath.Join(t.TempDir(), "pkg")
	files := map[string][]byte{"usr/share/doc/t/notes": []byte("notes\n")}
	if withELF {
		hello, err := os.ReadFile("../../testdata/example/hello")
		if err != nil {
			t.Fatal(err)
		}
		files["usr/bin/hello"] = hello
	}
	var sums strings.Builder
	for name, data := range files {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, data, 0o755); err != nil {
			t.Fatal(err)
		}
		s := md5.Sum(data)
		sums.WriteString(hex.EncodeToString(s[:]) + "  " + name + "\n")
	}
	os.MkdirAll(filepath.Join(root, "DEBIAN"), 0o755)
	os.WriteFile(filepath.Join(root, "DEBIAN/control"), []byte("Package: t\nVersion: 1\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: t\n"), 0o644)
	os.WriteFile(filepath.Join(root, "DEBIAN/md5sums"), []byte(sums.String()), 0o644)
	if b, err := exec.Command("dpkg-deb", "--build", "--root-owner-group", "-Zxz", root, path).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
}

// debHello is the program usr/bin/hello of the package path (dpkg-deb
// reads it), and whether it has .sframe.
func debHello(t *testing.T, path string) ([]byte, bool) {
	t.Helper()
	data, err := exec.Command("dpkg-deb", "--fsys-tarfile", path).Output()
	if err != nil {
		t.Fatalf("dpkg-deb --fsys-tarfile %s: %v", path, err)
	}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no usr/bin/hello: %v", path, err)
		}
		if h.Name == "./usr/bin/hello" {
			b, _ := io.ReadAll(tr)
			ef, err := elf.NewFile(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			return b, ef.Section(".sframe") != nil
		}
	}
}

// TestDebFile converts one package: -o writes the converted package,
// --in-place replaces it keeping its metadata, a package with nothing
// to convert is copied or left byte for byte, a broken one is one error
// line naming it once, with nothing written.
func TestDebFile(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "t.deb")
	makeDeb(t, in, true)
	orig, _ := os.ReadFile(in)
	out := filepath.Join(dir, "out.deb")
	_, stderr, err := runCmd(in, "-o", out)
	if err != nil || !strings.Contains(stderr, "out.deb: data.tar.xz: ELF files: 1 converted; .sframe v3") || !strings.Contains(stderr, "1 md5sums lines updated") {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, ok := debHello(t, out); !ok {
		t.Error("-o: usr/bin/hello has no .sframe")
	}
	converted, _ := os.ReadFile(out)

	// In place: the same bytes as -o, with the owner, mode and, with -p,
	// times kept.
	mtime := time.Unix(1234567890, 0)
	os.Chmod(in, 0o640)
	os.Chtimes(in, mtime, mtime)
	root := os.Geteuid() == 0
	if root {
		os.Chown(in, 1000, 42)
	}
	if _, stderr, err := runCmd("-q", "-p", "--in-place", in); err != nil || stderr != "" {
		t.Fatalf("--in-place: %v\n%s", err, stderr)
	}
	var st unix.Stat_t
	if err := unix.Stat(in, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&0o7777 != 0o640 || st.Mtim.Sec != mtime.Unix() || (root && (st.Uid != 1000 || st.Gid != 42)) {
		t.Errorf("--in-place: mode %o mtime %d owner %d:%d", st.Mode&0o7777, st.Mtim.Sec, st.Uid, st.Gid)
	}
	if b, _ := os.ReadFile(in); !bytes.Equal(b, converted) {
		t.Error("--in-place wrote other bytes than -o")
	}

	// Converted again: nothing to convert, nothing written in place, a
	// copy with -o.
	before := st.Ino
	_, stderr, err = runCmd("--in-place", in)
	unix.Stat(in, &st)
	if err != nil || !strings.Contains(stderr, "nothing to convert in data.tar.xz") || st.Ino != before {
		t.Errorf("nothing to convert, in place: %v (inode %d, was %d)\n%s", err, st.Ino, before, stderr)
	}
	again := filepath.Join(dir, "again.deb")
	if _, _, err := runCmd("-q", in, "-o", again); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(again); !bytes.Equal(b, converted) {
		t.Error("nothing to convert, -o: not a copy")
	}

	// A truncated package: one line naming it once; no output.
	bad := filepath.Join(dir, "bad.deb")
	os.WriteFile(bad, orig[:len(orig)-100], 0o644)
	badOut := filepath.Join(dir, "bad-out.deb")
	_, _, err = runCmd(bad, "-o", badOut)
	if err == nil || strings.Count(err.Error(), "bad.deb") != 1 || strings.Contains(err.Error(), "\n") {
		t.Errorf("truncated package: %v", err)
	}
	if _, serr := os.Stat(badOut); serr == nil {
		t.Error("truncated package: an output was written")
	}
	t.Log(err)
}

// TestDebTree: a directory holding a package, a program and a text file,
// converted with -o DIR and --in-place: the package is converted (and
// keeps its metadata), the records say so.
func TestDebTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tree")
	os.MkdirAll(dir, 0o755)
	makeDeb(t, filepath.Join(dir, "t.deb"), true)
	makeDeb(t, filepath.Join(dir, "doc.deb"), false)
	hello, _ := os.ReadFile("../../testdata/example/hello")
	os.WriteFile(filepath.Join(dir, "hello"), hello, 0o755)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("text\n"), 0o644)
	pkg := filepath.Join(dir, "t.deb")
	mtime := time.Unix(1234567890, 0)
	os.Chmod(pkg, 0o604)
	os.Chtimes(pkg, mtime, mtime)
	root := os.Geteuid() == 0
	if root {
		os.Chown(pkg, 1000, 42)
	}
	docBefore, _ := os.ReadFile(filepath.Join(dir, "doc.deb"))
	want := map[string]string{"t.deb": "converted", "doc.deb": "no-cfi", "hello": "converted", "notes.txt": "not-elf"}
	check := func(stdout string) {
		t.Helper()
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			var r struct{ File, Outcome string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			got[filepath.Base(r.File)] = r.Outcome
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s, want %s", k, got[k], v)
			}
		}
	}
	checkPkg := func(path string, p bool) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o604 || (p && st.Mtim.Sec != mtime.Unix()) || (root && (st.Uid != 1000 || st.Gid != 42)) {
			t.Errorf("%s: mode %o mtime %d owner %d:%d", path, st.Mode&0o7777, st.Mtim.Sec, st.Uid, st.Gid)
		}
		if _, ok := debHello(t, path); !ok {
			t.Errorf("%s: not converted", path)
		}
		if b, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "doc.deb")); !bytes.Equal(b, docBefore) {
			t.Errorf("%s: the package with nothing to convert changed", filepath.Dir(path))
		}
	}
	outDir := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runCmd("--json", "-p", "-o", outDir, dir)
	if err != nil {
		t.Fatalf("-o DIR: %v\n%s", err, stderr)
	}
	check(stdout)
	checkPkg(filepath.Join(outDir, "tree", "t.deb"), true)
	if _, ok := debHello(t, pkg); ok {
		t.Error("-o DIR changed the input package")
	}
	stdout, stderr, err = runCmd("--json", "--in-place", dir)
	if err != nil {
		t.Fatalf("--in-place: %v\n%s", err, stderr)
	}
	check(stdout)
	checkPkg(pkg, false)
}
