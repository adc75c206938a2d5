package e2e

import (
	"bytes"
	"crypto/md5"
	"debug/elf"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// dpkgRoot is a private dpkg installation: packages are unpacked below
// dir, with a database (admindir) and log of their own; the system's are
// not touched. Maintainer scripts run without chroot (dir has no shell),
// with DPKG_ROOT set to dir. Run by a user who is not root, dpkg gets
// --force-not-root (files then belong to that user).
type dpkgRoot struct {
	dir  string
	args []string
	env  []string
}

func newDpkgRoot(t *testing.T, dir string) *dpkgRoot {
	t.Helper()
	admin := filepath.Join(dir, "var/lib/dpkg")
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "var/log"), 0o755)
	if err := os.WriteFile(filepath.Join(admin, "status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &dpkgRoot{dir: dir, args: []string{"--admindir=" + admin, "--instdir=" + dir, "--log=" + filepath.Join(dir, "var/log/dpkg.log")}}
	if os.Geteuid() != 0 {
		r.args = append(r.args, "--force-not-root")
	}
	// dpkg looks for ldconfig and start-stop-daemon in PATH first.
	r.env = []string{"PATH=" + os.Getenv("PATH") + ":/usr/sbin:/sbin"}
	return r
}

// install installs the packages debs (their dependencies outside the
// private root are not installed: --force-depends).
func (r *dpkgRoot) install(t *testing.T, debs ...string) {
	t.Helper()
	args := append(append([]string{}, r.args...), "--force-script-chrootless", "--force-depends", "-i")
	out, err := run(t, r.env, "dpkg", append(args, debs...)...)
	if err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	t.Logf("dpkg %s -i %s", strings.Join(args[:len(args)-1], " "), strings.Join(debs, " "))
}

// verify runs dpkg --verify on the packages: every file as md5sums says
// (conffiles as the database says), so it prints nothing.
func (r *dpkgRoot) verify(t *testing.T, pkgs ...string) {
	t.Helper()
	out, err := run(t, r.env, "dpkg", append(append(append([]string{}, r.args...), "--verify"), pkgs...)...)
	if err != nil || out != "" {
		t.Errorf("dpkg --verify %s: %v\n%s", strings.Join(pkgs, " "), err, out)
	}
}

// verifyELF runs cfi2sframe verify on every ELF file below dir (but the
// database): each has .sframe, and verify finds no disagreement.
func verifyELF(t *testing.T, c2s, dir string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || strings.Contains(p, "/var/lib/dpkg/") {
			return err
		}
		ef, err := elf.Open(p)
		if err != nil {
			return nil
		}
		defer ef.Close()
		if ef.Section(".sframe") == nil {
			t.Errorf("%s: no .sframe", p)
		}
		files = append(files, p)
		return nil
	})
	if len(files) == 0 {
		t.Fatalf("no ELF file installed in %s", dir)
	}
	if b, err := exec.Command(c2s, append([]string{"verify", "-q"}, files...)...).CombinedOutput(); err != nil {
		t.Errorf("cfi2sframe verify: %v\n%s", err, b)
	}
	return files
}

// TestDebian builds a Debian package of a small C program with a shared
// library of its own, a conffile and a postinst, converts it, installs
// the converted package with dpkg into a private root, and checks it
// there: dpkg --verify finds every file as its md5sums says, the
// postinst ran, the program prints what the original prints, and
// cfi2sframe verify passes on its ELF files. Then the same with libzstd1
// and zstd from the Debian archive (apt-get download), and a program
// that compresses and decompresses with the converted libzstd.
func TestDebian(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("builds, installs and runs x86-64 Debian packages")
	}
	need(t, "dpkg")
	need(t, "dpkg-deb")
	need(t, "gcc")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	t.Run("own", func(t *testing.T) { debOwn(t, c2s, t.TempDir()) })
	t.Run("archive", func(t *testing.T) { debArchive(t, c2s, t.TempDir()) })
}

func debOwn(t *testing.T, c2s, tmp string) {
	src, _ := filepath.Abs("testdata")
	pkg := filepath.Join(tmp, "pkg")
	p := func(rel string) string { return filepath.Join(pkg, rel) }
	for _, d := range []string{"DEBIAN", "usr/bin", "usr/lib", "etc"} {
		os.MkdirAll(p(d), 0o755)
	}
	sh := func(name string, args ...string) {
		t.Helper()
		if o, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, o)
		}
	}
	sh("gcc", "-O2", "-fPIC", "-shared", "-Wl,-soname,libdebtest.so.1", "-o", p("usr/lib/libdebtest.so.1"), filepath.Join(src, "lib.c"))
	os.Symlink("libdebtest.so.1", p("usr/lib/libdebtest.so"))
	sh("gcc", "-O2", "-o", p("usr/bin/debtest"), filepath.Join(src, "prog.c"), "-L"+p("usr/lib"), "-ldebtest", "-Wl,-rpath,$ORIGIN/../lib")
	want, err := run(t, nil, p("usr/bin/debtest"), "x")
	if err != nil {
		t.Fatalf("the program before packaging: %v\n%s", err, want)
	}
	os.WriteFile(p("etc/debtest.conf"), []byte("greeting = hello\n"), 0o644)
	// md5sums as dh_md5sums writes it: every file but the conffiles.
	var sums strings.Builder
	for _, rel := range []string{"usr/bin/debtest", "usr/lib/libdebtest.so.1"} {
		b, err := os.ReadFile(p(rel))
		if err != nil {
			t.Fatal(err)
		}
		s := md5.Sum(b)
		sums.WriteString(hex.EncodeToString(s[:]) + "  " + rel + "\n")
	}
	ctl := map[string]string{
		"control":   "Package: debtest\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: Test <test@example.org>\nDescription: cfi2sframe test package\n",
		"conffiles": "/etc/debtest.conf\n",
		"md5sums":   sums.String(),
		"postinst":  "#!/bin/sh\nset -e\n[ -n \"$DPKG_ROOT\" ] || exit 1\necho \"$1\" > \"$DPKG_ROOT/var/lib/debtest.configured\"\n",
	}
	for name, data := range ctl {
		mode := os.FileMode(0o644)
		if name == "postinst" {
			mode = 0o755
		}
		os.WriteFile(p("DEBIAN/"+name), []byte(data), mode)
	}
	in := filepath.Join(tmp, "debtest_1.0-1_amd64.deb")
	sh("dpkg-deb", "--build", "--root-owner-group", "-Zxz", pkg, in)
	out := filepath.Join(tmp, "converted.deb")
	b, err := exec.Command(c2s, in, "-o", out).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "2 converted") || !strings.Contains(string(b), "2 md5sums lines updated") {
		t.Fatalf("cfi2sframe %s -o %s: %v\n%s", in, out, err, b)
	}
	t.Logf("cfi2sframe: %s", strings.TrimSpace(string(b)))

	r := newDpkgRoot(t, filepath.Join(tmp, "root"))
	r.install(t, out)
	r.verify(t, "debtest")
	if b, err := os.ReadFile(filepath.Join(r.dir, "var/lib/debtest.configured")); err != nil || string(b) != "configure\n" {
		t.Errorf("postinst did not run: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "etc/debtest.conf")); err != nil || string(b) != "greeting = hello\n" {
		t.Errorf("conffile: %q %v", b, err)
	}
	files := verifyELF(t, c2s, r.dir)
	sort.Strings(files)
	t.Logf("verified: %v", files)
	if got, err := run(t, nil, filepath.Join(r.dir, "usr/bin/debtest"), "x"); err != nil || got != want {
		t.Errorf("the installed program prints %q (%v), the original %q", got, err, want)
	}
}

// debArchive converts libzstd1 and zstd from the Debian archive (the
// tree form, -o DIR) and installs them into a private root.
func debArchive(t *testing.T, c2s, tmp string) {
	required := os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") == "1"
	dl := filepath.Join(tmp, "archive")
	os.MkdirAll(dl, 0o755)
	cmd := exec.Command("apt-get", "download", "libzstd1", "zstd")
	cmd.Dir = dl
	if b, err := cmd.CombinedOutput(); err != nil {
		msg := "apt-get download libzstd1 zstd: " + err.Error() + "\n" + string(b)
		if required {
			t.Fatal(msg)
		}
		t.Skip("the Debian archive cannot be reached: " + msg)
	}
	debs, _ := filepath.Glob(filepath.Join(dl, "*.deb"))
	if len(debs) != 2 {
		t.Fatalf("downloaded %v", debs)
	}
	conv := filepath.Join(tmp, "converted")
	b, err := exec.Command(c2s, "-o", conv, dl).CombinedOutput()
	if err != nil || !strings.Contains(string(b), "2 files: 2 converted") {
		t.Fatalf("cfi2sframe -o %s %s: %v\n%s", conv, dl, err, b)
	}
	out, _ := filepath.Glob(filepath.Join(conv, "archive", "*.deb"))
	if len(out) != 2 {
		t.Fatalf("converted: %v", out)
	}
	r := newDpkgRoot(t, filepath.Join(tmp, "root"))
	r.install(t, out...)
	r.verify(t, "libzstd1", "zstd")
	files := verifyELF(t, c2s, r.dir)
	t.Logf("verified: %v", files)

	// zstd (linked with libzstd statically) and a program of ours linked
	// with the converted libzstd.so.1 round-trip some data.
	data := bytes.Repeat([]byte("cfi2sframe converts Debian packages. "), 5000)
	plain := filepath.Join(tmp, "plain")
	os.WriteFile(plain, data, 0o644)
	zstd := filepath.Join(r.dir, "usr/bin/zstd")
	if o, err := run(t, nil, zstd, "-q", "-f", plain, "-o", plain+".zst"); err != nil {
		t.Fatalf("installed zstd: %v\n%s", err, o)
	}
	if o, err := run(t, nil, zstd, "-q", "-d", "-f", plain+".zst", "-o", plain+".back"); err != nil {
		t.Fatalf("installed zstd -d: %v\n%s", err, o)
	}
	if back, _ := os.ReadFile(plain + ".back"); !bytes.Equal(back, data) {
		t.Error("zstd: the data did not come back")
	}
	libdir := filepath.Join(r.dir, "usr/lib/x86_64-linux-gnu")
	roundtrip := filepath.Join(tmp, "roundtrip.c")
	os.WriteFile(roundtrip, []byte(`#include <stdio.h>
#include <stdlib.h>
#include <string.h>
size_t ZSTD_compressBound(size_t);
size_t ZSTD_compress(void *, size_t, const void *, size_t, int);
size_t ZSTD_decompress(void *, size_t, const void *, size_t);
unsigned ZSTD_isError(size_t);
unsigned ZSTD_versionNumber(void);
int main(void) {
	static char in[1 << 16], back[1 << 16];
	for (size_t i = 0; i < sizeof in; i++)
		in[i] = "abcabd"[i % 6] ^ (char)(i >> 12);
	size_t cap = ZSTD_compressBound(sizeof in);
	char *z = malloc(cap);
	size_t n = ZSTD_compress(z, cap, in, sizeof in, 3);
	size_t m = ZSTD_decompress(back, sizeof back, z, n);
	if (ZSTD_isError(n) || ZSTD_isError(m) || m != sizeof in || memcmp(in, back, m))
		return 1;
	printf("libzstd %u: %zu bytes in %zu\n", ZSTD_versionNumber(), m, n);
	return 0;
}
`), 0o644)
	prog := filepath.Join(tmp, "roundtrip")
	if o, err := exec.Command("gcc", "-O2", "-o", prog, roundtrip, filepath.Join(libdir, "libzstd.so.1")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, o)
	}
	o, err := run(t, []string{"LD_LIBRARY_PATH=" + libdir}, "ldd", prog)
	if err != nil || !strings.Contains(o, libdir) {
		t.Fatalf("ldd %s: does not load the installed libzstd: %v\n%s", prog, err, o)
	}
	if o, err := run(t, []string{"LD_LIBRARY_PATH=" + libdir}, prog); err != nil {
		t.Errorf("round trip through the converted libzstd: %v\n%s", err, o)
	} else {
		t.Logf("%s", strings.TrimSpace(o))
	}
}
