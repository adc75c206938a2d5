package e2e

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/treediff"
)

// rootfsConverted are files of the root file system that the tree form
// must convert: programs and libraries, setuid, setgid and with a file
// capability among them.
var rootfsConverted = []string{
	"usr/bin/ping",
	"usr/bin/chage",
	"usr/bin/bash",
	"usr/bin/ssh",
	"usr/bin/perl", // two names (perl5.36.0)
	"usr/sbin/unix_chkpwd",
	"usr/lib/dbus-1.0/dbus-daemon-launch-helper",
	"usr/lib/x86_64-linux-gnu/libc.so.6",
	"usr/lib/x86_64-linux-gnu/libcrypto.so.3",
}

// rootfsVerified are the converted files cfi2sframe verify checks.
var rootfsVerified = []string{
	"usr/bin/ping",
	"usr/bin/chage",
	"usr/lib/dbus-1.0/dbus-daemon-launch-helper",
	"usr/lib/x86_64-linux-gnu/libc.so.6",
}

// rootfsShadow are setgid programs of group shadow (42), which read
// /etc/shadow through it.
var rootfsShadow = []string{"usr/bin/chage", "usr/bin/expiry", "usr/sbin/unix_chkpwd"}

const (
	rootfsHelper = "usr/lib/dbus-1.0/dbus-daemon-launch-helper" // setuid, group messagebus, 04754
	shadowGID    = 42
)

// rootfsScripts are run in a chroot of the original tree and of each
// result; their outputs must be the same. The first runs as root and
// shows modes, owners and groups by name (stat, not ls -l: conversion
// changes a file's size), the capability and what the programs print;
// the second runs as nobody and needs what the metadata grants: ping
// its capability (with net.ipv4.ping_group_range "1 0", the default, an
// unprivileged ping needs a raw socket), chage its setgid shadow to read
// /etc/shadow. Nothing is written into the tree.
var rootfsScripts = []struct {
	user   string // chroot --userspec, "" for root
	script string
}{
	{"", `stat -c '%A %U %G %N' /usr/bin/chage /usr/bin/expiry /usr/sbin/unix_chkpwd \
	/usr/lib/dbus-1.0/dbus-daemon-launch-helper /usr/bin/ssh-agent /usr/bin/passwd /usr/bin/ping /bin /bin/sh
id
/usr/bin/ping -V
getcap /usr/bin/ping
dpkg -l | wc -l
ssh -V 2>&1
perl -e 'print "perl $^V\n"'
echo ok`},
	{"65534:65534", `id
if out=$(ping -c 1 -W 2 127.0.0.1 2>&1); then echo "ping as nobody: ok"; else echo "ping as nobody: $(echo "$out" | tail -1)"; fi
chage -l nobody 2>&1
echo ok`},
}

// TestRootfs converts a whole Debian root file system, the tarball
// scripts/rootfs.sh makes ($CFI2SFRAME_ROOTFS), with the tree form
// twice, and requires each result to be what cp -a would have made, but
// for the converted files' bytes (internal/testing/treediff): every entry kept
// (symbolic links, devices, empty directories), its type, mode bits
// (setuid, setgid, sticky), owner, group, extended attributes (file
// capabilities, ACLs), hard links and, with -o, times:
//
//	cfi2sframe -q -o OUT orig          OUT/orig against orig, times too
//	cp -a orig inplace; cfi2sframe -q --in-place inplace
//	                                   against orig, times not compared
//
// Then, in each result, a few converted files have .sframe and verify,
// ping keeps cap_net_raw, chage, expiry and unix_chkpwd their setgid
// shadow, dbus-daemon-launch-helper its group and mode 04754, and the
// same commands print the same in a chroot of the original and of the
// result. The wall times of cp -a, -o and --in-place are logged.
func TestRootfs(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("extracts and runs an x86-64 Debian root file system")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: extracting owners, devices and capabilities, chroot")
	}
	tarball := rootfsTarball(t)
	tarCmd := need(t, "tar")
	cpCmd := need(t, "cp")
	need(t, "chroot")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	// The trees (about 200 MB each) are removed at the end, not between
	// the steps: on ext4 without a journal, files created within minutes
	// of a large deletion are created ten times slower (see
	// bench/rootfs.sh), which the logged times would show.
	orig := filepath.Join(tmp, "orig")
	out := filepath.Join(tmp, "out")
	inplace := filepath.Join(tmp, "inplace")
	for _, d := range []string{orig, out, inplace} {
		t.Cleanup(func() { os.RemoveAll(d) })
	}

	if err := os.Mkdir(orig, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if b, err := exec.Command(tarCmd, "--xattrs", "--xattrs-include=*", "--acls", "--numeric-owner",
		"-C", orig, "-xpf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("tar -x %s: %v\n%s", tarball, err, b)
	}
	t.Logf("extracted %s in %.2f s", tarball, time.Since(start).Seconds())
	checkRootfsFixture(t, orig)
	// tar keeps whole seconds; give a few entries of every kind times to
	// the nanosecond, so that a copy that rounds them shows.
	for i, rel := range []string{"etc/passwd", "etc/ssh/ssh_config", "usr/bin/ping4", "usr/share/doc", "dev/null", "var/lib/dpkg"} {
		ts := unix.NsecToTimespec(time.Date(2024, 2, 29, 12, 0, 0, 123456789+i, time.UTC).UnixNano())
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(orig, rel), []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatalf("setting the time of %s: %v", rel, err)
		}
	}
	if err := os.Chtimes(orig, time.Date(2024, 2, 29, 12, 0, 0, 999, time.UTC), time.Date(2024, 2, 29, 12, 0, 0, 999, time.UTC)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, s := range rootfsScripts {
		want[s.user] = chrootRun(t, orig, s.user, s.script)
	}
	if !strings.Contains(want["65534:65534"], "ping as nobody: ok") {
		t.Logf("ping as nobody fails in the original tree too (sysctl net.ipv4.ping_group_range, or no loopback?): the capability is checked by its attribute only\n%s", want["65534:65534"])
	}
	// ContentMayDiffer: what the tree form converts, ELF files (and
	// archives, of which the root file system has none).
	mayDiffer := func(rel string) bool {
		f, err := os.Open(filepath.Join(orig, rel))
		if err != nil {
			return false
		}
		defer f.Close()
		head := make([]byte, 8)
		n, _ := f.Read(head)
		return bytes.HasPrefix(head[:n], []byte(elf.ELFMAG)) || bytes.Equal(head[:n], []byte("!<arch>\n"))
	}

	t.Run("o", func(t *testing.T) {
		start := time.Now()
		b, err := exec.Command(c2s, "-q", "-o", out, orig).CombinedOutput()
		t.Logf("cfi2sframe -q -o OUT orig: %.2f s", time.Since(start).Seconds())
		if err != nil {
			t.Errorf("cfi2sframe -q -o %s %s: %v\n%s", out, orig, err, b)
		}
		res := filepath.Join(out, "orig")
		if _, err := os.Stat(res); err != nil {
			t.Fatal(err)
		}
		checkRootfsResult(t, c2s, orig, res, treediff.Options{ContentMayDiffer: mayDiffer, Times: true, DirTimes: true}, want)
	})

	t.Run("in-place", func(t *testing.T) {
		start := time.Now()
		if b, err := exec.Command(cpCmd, "-a", orig, inplace).CombinedOutput(); err != nil {
			t.Fatalf("cp -a: %v\n%s", err, b)
		}
		t.Logf("cp -a orig X: %.2f s", time.Since(start).Seconds())
		// cp -a is the yardstick: its copy is the original to the oracle.
		start = time.Now()
		diffs, err := treediff.Compare(orig, inplace, treediff.Options{Times: true, DirTimes: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("treediff of the copy: %.2f s", time.Since(start).Seconds())
		if len(diffs) > 0 {
			t.Fatalf("cp -a orig inplace: the copy differs, the test cannot judge the conversion:\n%s", summarizeDiffs(diffs))
		}
		start = time.Now()
		b, err := exec.Command(c2s, "-q", "--in-place", inplace).CombinedOutput()
		t.Logf("cfi2sframe -q --in-place X: %.2f s", time.Since(start).Seconds())
		if err != nil {
			t.Errorf("cfi2sframe -q --in-place %s: %v\n%s", inplace, err, b)
		}
		checkRootfsResult(t, c2s, orig, inplace, treediff.Options{ContentMayDiffer: mayDiffer}, want)
	})
}

// rootfsTarball returns $CFI2SFRAME_ROOTFS, the tarball scripts/rootfs.sh
// makes, or skips the test when it is not set (fails with
// CFI2SFRAME_REQUIRE_TOOLCHAIN=1).
func rootfsTarball(t *testing.T) string {
	t.Helper()
	tarball := os.Getenv("CFI2SFRAME_ROOTFS")
	if tarball == "" {
		msg := "CFI2SFRAME_ROOTFS not set: run bash scripts/rootfs.sh, then CFI2SFRAME_ROOTFS=$(bash scripts/rootfs.sh --print)"
		if toolchain.Required() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if _, err := os.Stat(tarball); err != nil {
		t.Fatalf("CFI2SFRAME_ROOTFS: %v", err)
	}
	return tarball
}

// checkRootfsFixture fails the test when the extracted tree lacks what
// makes it worth checking: the tarball or its extraction is wrong.
func checkRootfsFixture(t *testing.T, orig string) {
	t.Helper()
	v, err := lgetxattr(filepath.Join(orig, "usr/bin/ping"), "security.capability")
	if err != nil {
		t.Fatalf("usr/bin/ping has no security.capability after extraction (%v): the tarball (scripts/rootfs.sh) or tar's --xattrs is wrong", err)
	}
	if !capNetRawSet(v) {
		t.Fatalf("usr/bin/ping: security.capability %x does not grant cap_net_raw", v)
	}
	for _, rel := range rootfsShadow {
		st := lstat(t, filepath.Join(orig, rel))
		if st.Gid != shadowGID || st.Mode&unix.S_ISGID == 0 {
			t.Fatalf("%s: gid %d, mode %o after extraction; want setgid shadow (%d)", rel, st.Gid, st.Mode&0o7777, shadowGID)
		}
	}
	if st := lstat(t, filepath.Join(orig, rootfsHelper)); st.Gid == 0 || st.Mode&0o7777 != 0o4754 {
		t.Fatalf("%s: gid %d, mode %o after extraction; want group messagebus and 4754", rootfsHelper, st.Gid, st.Mode&0o7777)
	}
	for _, rel := range rootfsConverted {
		if st := lstat(t, filepath.Join(orig, rel)); st.Mode&unix.S_IFMT != unix.S_IFREG {
			t.Fatalf("%s is not a regular file in the original tree", rel)
		}
	}
}

// checkRootfsResult checks the tree res that conversion made of orig.
func checkRootfsResult(t *testing.T, c2s, orig, res string, o treediff.Options, want map[string]string) {
	t.Helper()
	start := time.Now()
	diffs, err := treediff.Compare(orig, res, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("treediff: %.2f s", time.Since(start).Seconds())
	if len(diffs) > 0 {
		t.Errorf("%d differences from the original tree:\n%s", len(diffs), summarizeDiffs(diffs))
	}

	for _, rel := range rootfsConverted {
		f, err := elf.Open(filepath.Join(res, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if f.Section(".sframe") == nil {
			t.Errorf("%s: no .sframe section", rel)
		}
		seg := false
		for _, p := range f.Progs {
			seg = seg || p.Type == elfread.PTGNUSFrame
		}
		if !seg {
			t.Errorf("%s: no PT_GNU_SFRAME", rel)
		}
		f.Close()
	}
	for _, rel := range rootfsVerified {
		file := filepath.Join(res, rel)
		b, err := exec.Command(c2s, "verify", "-q", file).CombinedOutput()
		if err != nil || !bytes.Contains(b, []byte(" functions, ")) || bytes.Contains(b, []byte(": 0 functions")) {
			t.Errorf("verify %s: %v\n%s", rel, err, b)
		}
		kernelRules(t, c2s, file)
	}

	ping := filepath.Join(res, "usr/bin/ping")
	v, err := lgetxattr(ping, "security.capability")
	w, _ := lgetxattr(filepath.Join(orig, "usr/bin/ping"), "security.capability")
	switch {
	case err != nil:
		t.Errorf("usr/bin/ping: security.capability: %v", err)
	case !capNetRawSet(v) || !bytes.Equal(v, w):
		t.Errorf("usr/bin/ping: security.capability %x, want %x (cap_net_raw=ep)", v, w)
	}
	for _, rel := range rootfsShadow {
		st := lstat(t, filepath.Join(res, rel))
		if st.Gid != shadowGID || st.Mode&unix.S_ISGID == 0 {
			t.Errorf("%s: gid %d, mode %04o; want setgid, group shadow (%d)", rel, st.Gid, st.Mode&0o7777, shadowGID)
		}
	}
	st, sto := lstat(t, filepath.Join(res, rootfsHelper)), lstat(t, filepath.Join(orig, rootfsHelper))
	if st.Gid != sto.Gid || st.Uid != sto.Uid || st.Mode&0o7777 != 0o4754 {
		t.Errorf("%s: %d:%d mode %04o; want %d:%d (messagebus) mode 4754", rootfsHelper, st.Uid, st.Gid, st.Mode&0o7777, sto.Uid, sto.Gid)
	}

	for _, s := range rootfsScripts {
		if got := chrootRun(t, res, s.user, s.script); got != want[s.user] {
			t.Errorf("chroot (user %q) prints, in the result:\n%s\nin the original:\n%s", s.user, got, want[s.user])
		}
	}
}

// chrootRun runs script with /bin/sh in a chroot of dir, as user (a
// chroot --userspec, "" for root), and returns what it prints with its
// exit status.
func chrootRun(t *testing.T, dir, user, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{}
	if user != "" {
		args = append(args, "--userspec="+user)
	}
	args = append(args, dir, "/bin/sh", "-c", script)
	cmd := exec.CommandContext(ctx, "chroot", args...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "HOME=/root"}
	cmd.Dir = "/"
	b, err := cmd.CombinedOutput()
	status := "exit 0"
	if err != nil {
		status = err.Error()
	}
	return string(b) + "[" + status + "]\n"
}

// summarizeDiffs shows the first lines of a treediff and how many of each
// kind there are.
func summarizeDiffs(diffs []string) string {
	kinds := map[string]int{}
	for _, d := range diffs {
		kinds[diffKind(d)]++
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		return kinds[ks[i]] > kinds[ks[j]] || kinds[ks[i]] == kinds[ks[j]] && ks[i] < ks[j]
	})
	var b strings.Builder
	b.WriteString("by kind:")
	for _, k := range ks {
		fmt.Fprintf(&b, " %s: %d;", k, kinds[k])
	}
	b.WriteString("\n")
	const show = 60
	for i, d := range diffs {
		if i == show {
			fmt.Fprintf(&b, "... and %d more\n", len(diffs)-show)
			break
		}
		b.WriteString("  " + d + "\n")
	}
	return b.String()
}

// diffKind is what a treediff line says without its path and values:
// "only in b", "mode", "xattr security.capability missing", ...
func diffKind(d string) string {
	_, msg, _ := strings.Cut(d, ": ")
	f := strings.Fields(msg)
	switch {
	case len(f) >= 3 && (f[0] == "only" || f[0] == "xattr"):
		return strings.Join(f[:3], " ")
	case len(f) >= 2 && (f[0] == "hard" || f[0] == "symlink" || f[0] == "content"):
		return strings.Join(f[:2], " ")
	case len(f) > 0:
		return f[0]
	}
	return msg
}

func lstat(t *testing.T, path string) *unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func lgetxattr(path, name string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(path, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// capNetRawSet says whether a security.capability value (struct
// vfs_cap_data, revision 2 or 3) is effective and permits CAP_NET_RAW.
func capNetRawSet(v []byte) bool {
	if len(v) < 12 {
		return false
	}
	magic := binary.LittleEndian.Uint32(v)
	permitted := binary.LittleEndian.Uint32(v[4:])
	const capNetRaw = 13
	return slices.Contains([]uint32{0x02000000, 0x03000000}, magic&^1) && magic&1 != 0 && permitted&(1<<capNetRaw) != 0
}
