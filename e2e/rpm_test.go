package e2e

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// rpmSpec is the spec of the packages TestRPM builds: a program with its
// own shared library, a hard link and a symbolic link to it, a setuid
// copy of another owner, a copy with a file capability, a %config file, a
// %post script and a program over 16 MiB (converted through temporary
// files). %s: the name's suffix.
const rpmSpec = `Name: t%s
Version: 1.0
Release: 1
Summary: cfi2sframe test package
License: MIT
%%define _build_id_links none
%%define debug_package %%{nil}
%%define __strip /bin/true
%%description
cfi2sframe test package
%%install
mkdir -p %%{buildroot}/usr/bin %%{buildroot}/usr/lib %%{buildroot}/etc
cat > lib.c <<'X'
int triple(int x) { return 3 * x; }
X
cat > main.c <<'X'
#include <stdio.h>
int triple(int);
int main(void) { printf("%%d\n", triple(14)); return 0; }
X
cat > big.c <<'X'
#include <stdio.h>
static const char big[17 << 20] = {1};
int main(int argc, char **argv) { printf("big %%d\n", big[argc]); return 0; }
X
gcc -O2 -shared -fPIC -o %%{buildroot}/usr/lib/libtriple.so lib.c
gcc -O2 -o %%{buildroot}/usr/bin/t main.c -L%%{buildroot}/usr/lib -ltriple
gcc -O2 -o %%{buildroot}/usr/bin/tbig big.c
ln %%{buildroot}/usr/bin/t %%{buildroot}/usr/bin/t-again
ln -s t %%{buildroot}/usr/bin/t-link
cp %%{buildroot}/usr/bin/t %%{buildroot}/usr/bin/tsuid
cp %%{buildroot}/usr/bin/t %%{buildroot}/usr/bin/tcap
echo 'answer=42' > %%{buildroot}/etc/t.conf
%%post
echo ran > /var/tmp/t-post
%%files
/usr/bin/t
/usr/bin/t-again
/usr/bin/t-link
/usr/bin/tbig
/usr/lib/libtriple.so
%%attr(4755, nobody, nogroup) /usr/bin/tsuid
%%caps(cap_net_raw=ep) /usr/bin/tcap
%%config /etc/t.conf
`

// rpmPrograms are run from the installed packages; they print the same
// before and after conversion.
var rpmPrograms = []string{"/usr/bin/t", "/usr/bin/t-again", "/usr/bin/t-link", "/usr/bin/tsuid", "/usr/bin/tcap", "/usr/bin/tbig"}

// rpmConverted are the files a conversion changes (ELF with CFI).
var rpmConverted = []string{"/usr/bin/t", "/usr/bin/t-again", "/usr/bin/tsuid", "/usr/bin/tcap", "/usr/bin/tbig", "/usr/lib/libtriple.so"}

// TestRPM builds RPM packages with rpmbuild, of each payload compression
// and both file digest algorithms, one signed with a key made here,
// converts them and checks them with rpm: rpm -K finds the digests good,
// rpm -qp --dump lists the same files, new digests and sizes for the
// converted ones only; installed (with $CFI2SFRAME_ROOTFS, as root) into a
// Debian root file system, %post runs, rpm -V finds nothing, the
// programs print what the originals print and the converted files
// verify. Each payload keeps its compressor (bzip2's too).
func TestRPM(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("builds x86-64 packages")
	}
	for _, p := range []string{"rpm", "rpmbuild", "rpmsign", "gpg", "gcc"} {
		need(t, p)
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	db := filepath.Join(tmp, "rpmdb")
	os.MkdirAll(db, 0o755)
	key := newSigningKey(t, tmp)
	var root string
	if os.Geteuid() == 0 && os.Getenv("CFI2SFRAME_ROOTFS") != "" {
		root = extractRootfs(t, tmp)
	} else {
		t.Log("not root or no $CFI2SFRAME_ROOTFS: the packages are not installed")
	}
	for _, v := range []struct {
		name, payload, algo string
		sign                bool
	}{
		{"gz", "w9.gzdio", "1", false},
		{"xz", "w2.xzdio", "8", true},
		{"zst", "w19.zstdio", "8", false},
		{"bz", "w9.bzdio", "1", false},
	} {
		t.Run(v.name, func(t *testing.T) {
			in := buildTestRPM(t, tmp, v.name, v.payload, v.algo)
			if v.sign {
				key.sign(t, in)
			}
			out := filepath.Join(tmp, "t"+v.name+"-out.rpm")
			msg, err := run(t, nil, c2s, in, "-o", out)
			t.Logf("cfi2sframe %s -o %s:\n%s", filepath.Base(in), filepath.Base(out), msg)
			if err != nil {
				t.Fatal(err)
			}
			qf := "%{PAYLOADCOMPRESSOR} %{PAYLOADFLAGS}"
			if ci, co := rpmQuery(t, in, qf), rpmQuery(t, out, qf); ci != co {
				t.Errorf("payload %q, converted %q", ci, co)
			}
			if v.sign != strings.Contains(msg, "rpmsign --addsign") {
				t.Errorf("signed %v, but the output says %q", v.sign, msg)
			}
			if k, err := run(t, nil, "rpm", "--dbpath", db, "-Kv", out); err != nil || strings.Contains(k, "BAD") {
				t.Errorf("rpm -K: %v\n%s", err, k)
			} else {
				t.Logf("rpm -Kv:\n%s", k)
			}
			checkDump(t, in, out)
			if root != "" {
				checkInstall(t, c2s, root, "t"+v.name, in, out)
			}
		})
	}
}

// buildTestRPM builds rpmSpec with the payload and file digest algorithm
// given and returns the package's path.
func buildTestRPM(t *testing.T, tmp, name, payload, algo string) string {
	t.Helper()
	top := filepath.Join(tmp, "top-"+name)
	spec := filepath.Join(tmp, name+".spec")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(rpmSpec, name)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, nil, "rpmbuild", "-bb", "--define", "_topdir "+top, "--define", "_binary_payload "+payload,
		"--define", "_binary_filedigest_algorithm "+algo, spec)
	if err != nil {
		t.Fatalf("rpmbuild: %v\n%s", err, out)
	}
	rpms, _ := filepath.Glob(filepath.Join(top, "RPMS/*/*.rpm"))
	if len(rpms) != 1 {
		t.Fatalf("rpmbuild made %v", rpms)
	}
	return rpms[0]
}

// signingKey is a gpg key made for the test, in a home of its own.
type signingKey struct{ home, gpg string }

func newSigningKey(t *testing.T, tmp string) *signingKey {
	t.Helper()
	k := &signingKey{home: filepath.Join(tmp, "gnupg"), gpg: need(t, "gpg")}
	os.MkdirAll(k.home, 0o700)
	env := []string{"GNUPGHOME=" + k.home}
	if out, err := run(t, env, k.gpg, "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
		"--quick-gen-key", "cfi2sframe test <test@example.invalid>", "rsa2048", "sign", "never"); err != nil {
		t.Fatalf("gpg: %v\n%s", err, out)
	}
	return k
}

func (k *signingKey) sign(t *testing.T, pkg string) {
	t.Helper()
	env := []string{"GNUPGHOME=" + k.home}
	out, err := run(t, env, "rpmsign", "--define", "_gpg_name cfi2sframe test", "--define", "__gpg "+k.gpg, "--addsign", pkg)
	if err != nil {
		t.Fatalf("rpmsign: %v\n%s", err, out)
	}
	if sig, _ := run(t, nil, "rpm", "-qp", "--qf", "%{RSAHEADER:pgpsig}", pkg); !strings.Contains(sig, "RSA") {
		t.Fatalf("not signed: %s", sig)
	}
}

// rpmQuery is rpm -qp --qf format's output for pkg.
func rpmQuery(t *testing.T, pkg, format string) string {
	t.Helper()
	out, err := exec.Command("rpm", "-qp", "--qf", format, pkg).Output()
	if err != nil {
		t.Fatalf("rpm -qp --qf %s %s: %v", format, pkg, err)
	}
	return string(out)
}

// dumpLines is rpm -qp --dump's line of each file, by path.
func dumpLines(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	out, err := exec.Command("rpm", "-qp", "--dump", pkg).Output()
	if err != nil {
		t.Fatalf("rpm -qp --dump %s: %v", pkg, err)
	}
	m := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		m[f[0]] = f
	}
	return m
}

// checkDump: the converted package lists the same files as the original,
// with a new size and digest (fields 2 and 4) for the converted ones only.
func checkDump(t *testing.T, in, out string) {
	t.Helper()
	a, b := dumpLines(t, in), dumpLines(t, out)
	if len(a) != len(b) {
		t.Errorf("%d files, were %d", len(b), len(a))
	}
	var changed []string
	for path, fa := range a {
		fb := b[path]
		if len(fb) != len(fa) {
			t.Errorf("%s: %v, was %v", path, fb, fa)
			continue
		}
		for i := range fa {
			if fa[i] != fb[i] && i != 1 && i != 3 {
				t.Errorf("%s: field %d: %s, was %s", path, i+1, fb[i], fa[i])
			}
		}
		if fa[1] != fb[1] || fa[3] != fb[3] {
			if fa[1] == fb[1] || fa[3] == fb[3] {
				t.Errorf("%s: size or digest changed alone: %v, was %v", path, fb, fa)
			}
			changed = append(changed, path)
		}
	}
	sort.Strings(changed)
	want := append([]string(nil), rpmConverted...)
	sort.Strings(want)
	if strings.Join(changed, " ") != strings.Join(want, " ") {
		t.Errorf("changed %v, want %v", changed, want)
	}
}

// extractRootfs extracts the Debian root file system of
// $CFI2SFRAME_ROOTFS for packages to be installed into.
func extractRootfs(t *testing.T, tmp string) string {
	t.Helper()
	root := filepath.Join(tmp, "root")
	os.Mkdir(root, 0o755)
	t.Cleanup(func() { os.RemoveAll(root) })
	if b, err := exec.Command("tar", "--xattrs", "--xattrs-include=*", "--numeric-owner", "-C", root, "-xpf", rootfsTarball(t)).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, b)
	}
	return root
}

// checkInstall installs the original package into root and runs its
// programs, removes it, installs the converted one: %post runs, rpm -V
// finds nothing, the programs print the same, the converted files have
// .sframe and verify.
func checkInstall(t *testing.T, c2s, root, name, in, out string) {
	t.Helper()
	rpmRoot := func(args ...string) string {
		t.Helper()
		o, err := run(t, nil, "rpm", append([]string{"--root", root}, args...)...)
		if err != nil {
			t.Fatalf("rpm --root %s %s: %v\n%s", root, strings.Join(args, " "), err, o)
		}
		return o
	}
	runAll := func() string {
		var b strings.Builder
		for _, p := range rpmPrograms {
			o, err := run(t, nil, "chroot", root, p)
			fmt.Fprintf(&b, "%s: %s (%v)\n", p, strings.TrimSpace(o), err)
		}
		return b.String()
	}
	rpmRoot("-i", "--nodeps", in)
	before := runAll()
	rpmRoot("-e", "--nodeps", name)
	os.Remove(filepath.Join(root, "var/tmp/t-post"))
	rpmRoot("-i", "--nodeps", out)
	defer rpmRoot("-e", "--nodeps", name)
	if b, err := os.ReadFile(filepath.Join(root, "var/tmp/t-post")); err != nil || string(b) != "ran\n" {
		t.Errorf("%%post did not run: %q, %v", b, err)
	}
	if o, err := run(t, nil, "rpm", "--root", root, "-V", "--nodeps", name); err != nil || o != "" {
		t.Errorf("rpm -V: %v\n%s", err, o)
	}
	if after := runAll(); after != before {
		t.Errorf("the programs print\n%s\nthe originals\n%s", after, before)
	} else {
		t.Logf("the programs print, as the originals:\n%s", after)
	}
	for _, p := range rpmConverted {
		f := filepath.Join(root, p)
		ef, err := elf.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		has := ef.Section(".sframe") != nil
		ef.Close()
		if !has {
			t.Errorf("%s: no .sframe", p)
		}
		if o, err := run(t, nil, c2s, "verify", f); err != nil {
			t.Errorf("verify %s: %v\n%s", p, err, o)
		}
	}
}
