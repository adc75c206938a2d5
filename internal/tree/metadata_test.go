package tree

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/treediff"
)

// capNetRaw is security.capability's value for cap_net_raw=ep (VFS
// capabilities revision 2: magic and effective flag, then permitted and
// inheritable, low and high words).
func capNetRaw() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(b[4:], 1<<13) // CAP_NET_RAW
	return b
}

// metaTree builds, as root, a tree with every kind of metadata a root
// file system holds: files of other owners and groups, setuid, setgid
// and sticky bits, a file capability, POSIX ACLs (access and default),
// user.* and trusted.* attributes, hard links (converted and not), a
// sparse file, symbolic links (one dangling, one of another owner), empty
// directories of other modes and owners, a FIFO, a character device and
// a socket, and a file signed by IMA. It returns the tree and the
// relative paths of the ELF files that get converted.
func metaTree(t *testing.T) (string, map[string]bool) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	hello := filepath.Join("..", "..", "testdata", "example", "hello")
	p := func(rel string) string { return filepath.Join(root, rel) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	converted := map[string]bool{}
	elfFile := func(rel string, mode os.FileMode, uid, gid int) {
		copyFile(t, hello, p(rel))
		must(os.Chown(p(rel), uid, gid))
		must(os.Chmod(p(rel), mode))
		converted[rel] = true
	}
	elfFile("usr/bin/ping", 0o755, 0, 0)
	must(unix.Setxattr(p("usr/bin/ping"), "security.capability", capNetRaw(), 0))
	elfFile("usr/bin/chage", 0o755|os.ModeSetgid, 0, 42)
	elfFile("usr/lib/dbus-launch-helper", 0o754|os.ModeSetuid, 0, 102)
	elfFile("home/user/bin/suid-of-user", 0o755|os.ModeSetuid, 1000, 1000)
	must(unix.Setxattr(p("home/user/bin/suid-of-user"), "user.origin", []byte("built by hand"), 0))
	must(unix.Setxattr(p("home/user/bin/suid-of-user"), "trusted.note", []byte{0, 1, 2}, 0))
	must(os.Link(p("usr/bin/chage"), p("usr/bin/chage-link")))
	converted["usr/bin/chage-link"] = true
	copyFile(t, hello, p("usr/bin/signed"))
	must(unix.Setxattr(p("usr/bin/signed"), "security.ima", []byte{3, 2, 0, 0}, 0))
	for _, d := range []string{"etc", "var"} {
		must(os.MkdirAll(p(d), 0o755))
	}
	must(os.WriteFile(p("etc/shadow"), []byte("root:*:1::::::\n"), 0o640))
	must(os.Chown(p("etc/shadow"), 0, 42))
	must(os.Link(p("etc/shadow"), p("etc/shadow-link")))
	sparse, err := os.Create(p("var/sparse"))
	must(err)
	_, err = sparse.WriteAt([]byte("head"), 0)
	must(err)
	_, err = sparse.WriteAt([]byte("tail"), 64<<20)
	must(err)
	must(sparse.Close())
	for _, d := range []string{"tmp", "dev", "proc", "var/empty"} {
		must(os.MkdirAll(p(d), 0o755))
	}
	must(os.Chmod(p("tmp"), 0o777|os.ModeSticky))
	must(os.Chown(p("var/empty"), 1000, 1000))
	must(os.Chmod(p("var/empty"), 0o700))
	must(os.Symlink("usr/bin", p("bin")))
	must(os.Symlink("does-not-exist", p("usr/bin/dangling")))
	must(os.Symlink("ping", p("home/user/ping")))
	must(os.Lchown(p("home/user/ping"), 1000, 1000))
	must(unix.Mkfifo(p("dev/initctl"), 0o600))
	must(unix.Mknod(p("dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	must(unix.Mknod(p("dev/log"), unix.S_IFSOCK|0o666, 0))
	if setfacl, err := exec.LookPath("setfacl"); err == nil {
		for _, args := range [][]string{
			{"-m", "u:1000:rx", p("usr/bin/ping")},
			{"-m", "d:g:42:rwx", p("var/empty")},
		} {
			if out, err := exec.Command(setfacl, args...).CombinedOutput(); err != nil {
				t.Fatalf("setfacl %v: %v\n%s", args, err, out)
			}
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("setfacl is missing (Debian package acl)")
	}
	// The directories' times last, as a copy keeps them.
	return root, converted
}

func needRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes files of other owners, devices and trusted.* attributes: needs root")
	}
}

// TestMetadataKept converts the tree of metaTree in place and to a copy
// and compares every entry with the original: type, mode bits, owner,
// group, link target, device numbers, every extended attribute,
// hard-link groups and (in the copy) times. Only the converted ELF files'
// bytes may differ; there must be no other difference.
func TestMetadataKept(t *testing.T) {
	needRoot(t)
	orig, converted := metaTree(t)
	mayDiffer := func(rel string) bool { return converted[rel] }
	check := func(name, tree string, o treediff.Options) {
		t.Helper()
		diffs, err := treediff.Compare(orig, tree, o)
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) > 0 {
			t.Errorf("%s: %d differences:\n%s", name, len(diffs), strings.Join(diffs, "\n"))
		}
		for rel := range converted {
			f, err := elf.Open(filepath.Join(tree, rel))
			if err != nil {
				t.Fatal(err)
			}
			if f.Section(".sframe") == nil {
				t.Errorf("%s: %s not converted", name, rel)
			}
			f.Close()
		}
	}

	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), []string{orig}, Options{OutDir: out})
	if err != nil || !sum.OK() {
		t.Fatalf("-o: %+v, %v", sum, err)
	}
	if sum.Counts[Converted] != len(converted) || sum.Counts[Signed] != 1 {
		t.Errorf("-o: %v, want %d converted and 1 signed", sum.Counts, len(converted))
	}
	check("-o", filepath.Join(out, "root"), treediff.Options{ContentMayDiffer: mayDiffer, Times: true, DirTimes: true})
	if k := sum.Kept; k.Symlinks != 3 || k.Devices != 3 || k.HardLinks != 2 || k.Xattrs < 3 {
		t.Errorf("-o: kept %+v", k)
	}
	var so, sc unix.Stat_t
	if err := unix.Stat(filepath.Join(orig, "var/sparse"), &so); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(out, "root/var/sparse"), &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Blocks > so.Blocks+64 {
		t.Errorf("sparse file copied with %d blocks, the original has %d", sc.Blocks, so.Blocks)
	}

	inPlace := filepath.Join(t.TempDir(), "root")
	if o, err := exec.Command("cp", "-a", orig, inPlace).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, o)
	}
	if diffs, _ := treediff.Compare(orig, inPlace, treediff.Options{Times: true}); len(diffs) > 0 {
		t.Fatalf("cp -a made a copy that differs already:\n%s", strings.Join(diffs, "\n"))
	}
	sum, err = Run(context.Background(), []string{inPlace}, Options{})
	if err != nil || !sum.OK() {
		t.Fatalf("--in-place: %+v, %v", sum, err)
	}
	check("--in-place", inPlace, treediff.Options{ContentMayDiffer: mayDiffer})
	if sum.Kept.SpecialBits != 3 || sum.Kept.Xattrs != 2 {
		t.Errorf("--in-place: kept %+v", sum.Kept)
	}
}

// TestPreserveDates: with PreserveDates a converted file keeps its times.
func TestPreserveDates(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "hello")
	copyFile(t, filepath.Join("..", "..", "testdata", "example", "hello"), f)
	ts := []unix.Timespec{{Sec: 1000000000, Nsec: 5}, {Sec: 1234567890, Nsec: 123456789}}
	if err := unix.UtimesNano(f, ts); err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), []string{dir}, Options{PreserveDates: true})
	if err != nil || sum.Counts[Converted] != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(f, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mtim != ts[1] || st.Atim != ts[0] {
		t.Errorf("times %v %v, want %v", st.Atim, st.Mtim, ts)
	}
}

// TestRefused: in place, a file whose metadata cannot be kept is left as
// it was with a refusal that names what would be lost: an immutable file,
// and, for a user who is not root, a file of another owner.
func TestRefused(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "immutable")
	copyFile(t, filepath.Join("..", "..", "testdata", "example", "hello"), f)
	before, _ := os.ReadFile(f)
	if out, err := exec.Command("chattr", "+i", f).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	defer exec.Command("chattr", "-i", f).Run()
	var recs []Record
	sum, err := Run(context.Background(), []string{dir}, Options{Record: func(r Record) { recs = append(recs, r) }})
	if err != nil || sum.OK() || sum.Counts[Refused] != 1 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if !strings.Contains(recs[0].Error, "immutable") {
		t.Errorf("refusal: %s", recs[0].Error)
	}
	if after, _ := os.ReadFile(f); !bytes.Equal(after, before) {
		t.Errorf("immutable file changed")
	}
}

// TestRefusedNotOwner: run as an ordinary user (a child process with
// another uid), a conversion in place of a file the user may rewrite
// (its directory is writable) but whose owner the user cannot give the
// new file is refused, and the file stays as it was.
func TestRefusedNotOwner(t *testing.T) {
	if os.Getenv("TREE_CHILD") == "1" {
		sum, err := Run(context.Background(), []string{os.Getenv("TREE_DIR")}, Options{Record: func(r Record) { os.Stderr.WriteString(r.Error + "\n") }})
		if err != nil || sum.Counts[Refused] != 1 {
			t.Fatalf("%+v, %v", sum, err)
		}
		return
	}
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(filepath.Dir(filepath.Dir(dir)), 0o755)
	os.Chmod(dir, 0o777)
	f := filepath.Join(dir, "setuid-root")
	copyFile(t, filepath.Join("..", "..", "testdata", "example", "hello"), f)
	os.Chmod(f, 0o755|os.ModeSetuid)
	before, _ := os.ReadFile(f)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary where nobody may run it.
	exe := filepath.Join(filepath.Dir(dir), "tree.test")
	copyFile(t, self, exe)
	cmd := exec.Command(exe, "-test.run=^TestRefusedNotOwner$")
	cmd.Dir = filepath.Dir(dir)
	cmd.Env = append(os.Environ(), "TREE_CHILD=1", "TREE_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "cannot keep its owner 0:0") {
		t.Errorf("refusal does not name the owner:\n%s", out)
	}
	after, _ := os.ReadFile(f)
	var st unix.Stat_t
	unix.Stat(f, &st)
	if !bytes.Equal(after, before) || st.Uid != 0 || st.Mode&unix.S_ISUID == 0 {
		t.Errorf("file changed: uid %d mode %o", st.Uid, st.Mode)
	}
}
