package treediff

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// t0 is every entry's modification time once a tree is built.
var t0 = time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.UTC)

// env says what the machine lets the tests build.
type env struct {
	root   bool // uid 0: owners, devices, trusted.* and security.capability
	xattrs bool // the file system under TMPDIR takes user.* attributes and POSIX ACLs
}

func probe(t *testing.T) env {
	t.Helper()
	e := env{root: os.Geteuid() == 0}
	f := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.xattrs = unix.Setxattr(f, "user.probe", []byte("x"), 0) == nil &&
		unix.Setxattr(f, "system.posix_acl_access", acl(0o6, 0o4, 0o4), 0) == nil
	return e
}

// acl encodes a POSIX ACL as the kernel takes it in system.posix_acl_*
// (linux/posix_acl_xattr.h): user::OWNER, user:1000:GROUP, group::GROUP,
// mask::GROUP, other::OTHER.
func acl(owner, group, other uint16) []byte {
	const undefined = 0xffffffff
	b := binary.LittleEndian.AppendUint32(nil, 2) // POSIX_ACL_XATTR_VERSION
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{
		{0x01, owner, undefined}, // ACL_USER_OBJ
		{0x02, group, 1000},      // ACL_USER
		{0x04, group, undefined}, // ACL_GROUP_OBJ
		{0x10, group, undefined}, // ACL_MASK
		{0x20, other, undefined}, // ACL_OTHER
	} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// capNetRaw is security.capability as setcap cap_net_raw+ep writes it
// (VFS_CAP_REVISION_2, effective).
func capNetRaw() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0x02000000|1)
	b = binary.LittleEndian.AppendUint32(b, 1<<13) // permitted: CAP_NET_RAW
	b = binary.LittleEndian.AppendUint32(b, 0)     // inheritable
	b = binary.LittleEndian.AppendUint32(b, 0)     // permitted, high word
	return binary.LittleEndian.AppendUint32(b, 0)  // inheritable, high word
}

// build makes the tree every case starts from, in dir:
//
//	d/             0755
//	d/f            "hello\n" 0644, xattr user.note=v (and trusted.t=t as root)
//	d/big          600 KiB of noise
//	d/sub/         0750, with an access and a default ACL
//	d/sub/g
//	d/empty/
//	l -> d/f, ldir -> d
//	h1, h2         one file, two names; h3 a file of the same bytes
//	x              04755
//	p              a FIFO
//	s              a socket
//
// and, as root: c (char 1,3), bdev (block 7,0), o (1000:42, 02755), cap
// (security.capability cap_net_raw+ep). Every time is t0.
func build(t *testing.T, dir string, e env) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(rel string) string { return filepath.Join(dir, rel) }
	write := func(rel, s string, mode os.FileMode) {
		t.Helper()
		must(os.WriteFile(p(rel), []byte(s), mode))
		must(os.Chmod(p(rel), mode))
	}
	must(os.MkdirAll(p("d/sub"), 0o755))
	must(os.Mkdir(p("d/empty"), 0o755))
	must(os.Chmod(p("d/sub"), 0o750))
	write("d/f", "hello\n", 0o644)
	noise := make([]byte, 600<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	write("d/big", string(noise), 0o644)
	write("d/sub/g", "g\n", 0o644)
	must(os.Symlink("d/f", p("l")))
	must(os.Symlink("d", p("ldir")))
	write("h1", "linked\n", 0o644)
	must(os.Link(p("h1"), p("h2")))
	write("h3", "linked\n", 0o644)
	write("x", "setuid\n", 0o755|os.ModeSetuid)
	must(unix.Mkfifo(p("p"), 0o644))
	must(unix.Mknod(p("s"), unix.S_IFSOCK|0o644, 0))
	if e.xattrs {
		must(unix.Setxattr(p("d/f"), "user.note", []byte("v"), 0))
		must(unix.Setxattr(p("d/sub"), "system.posix_acl_access", acl(7, 5, 0), 0))
		must(unix.Setxattr(p("d/sub"), "system.posix_acl_default", acl(7, 5, 0), 0))
	}
	if e.root {
		must(unix.Mknod(p("c"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(unix.Mknod(p("bdev"), unix.S_IFBLK|0o660, int(unix.Mkdev(7, 0))))
		write("o", "owned\n", 0o755)
		must(os.Chown(p("o"), 1000, 42))
		must(os.Chmod(p("o"), 0o755|os.ModeSetgid))
		write("cap", "ping\n", 0o755)
		must(unix.Setxattr(p("cap"), "security.capability", capNetRaw(), 0))
		must(unix.Setxattr(p("d/f"), "trusted.t", []byte("t"), 0))
	}
	retime(t, dir, t0)
}

// retime sets the modification time of everything under dir to at,
// symbolic links included, children before their directories.
func retime(t *testing.T, dir string, at time.Time) {
	t.Helper()
	var all []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		all = append(all, path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(all)
	for _, path := range all {
		touch(t, path, at)
	}
}

// touch sets the access and modification times of path, not following a
// symbolic link.
func touch(t *testing.T, path string, at time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(at.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

func stamp(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05.000000000Z") }

func TestCompare(t *testing.T) {
	e := probe(t)
	all := Options{Times: true, DirTimes: true}
	later := t0.Add(time.Hour)
	type tc struct {
		name   string
		root   bool // needs root (env.root)
		xattrs bool // needs user.* and ACLs (env.xattrs)
		opts   *Options
		change func(t *testing.T, b string) // then every time is t0 again
		after  func(t *testing.T, b string) // after the times are reset
		want   []string
		wantB  func(t *testing.T, b string) []string // instead of want, for what b says
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(t *testing.T, path, s string) {
		t.Helper()
		st, err := os.Lstat(path)
		mode := os.FileMode(0o644)
		if err == nil {
			mode = st.Mode()
		}
		must(t, os.WriteFile(path, []byte(s), mode))
	}
	sh := func(t *testing.T, name string, args ...string) {
		t.Helper()
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	onlyF := func(rel string) *Options {
		return &Options{Times: true, DirTimes: true, ContentMayDiffer: func(r string) bool { return r == rel }}
	}
	cases := []tc{
		{name: "equal"},
		{name: "equal, times not compared", opts: &Options{}},
		{
			name:   "content, same size",
			change: func(t *testing.T, b string) { write(t, filepath.Join(b, "d/f"), "hellO\n") },
			want:   []string{"d/f: content differs (first at byte 4)"},
		},
		{
			name: "content, deep in a big file",
			change: func(t *testing.T, b string) {
				f, err := os.OpenFile(filepath.Join(b, "d/big"), os.O_RDWR, 0)
				must(t, err)
				defer f.Close()
				one := make([]byte, 1)
				_, err = f.ReadAt(one, 400000)
				must(t, err)
				one[0] ^= 0x40
				_, err = f.WriteAt(one, 400000)
				must(t, err)
			},
			want: []string{"d/big: content differs (first at byte 400000)"},
		},
		{
			name:   "size",
			change: func(t *testing.T, b string) { write(t, filepath.Join(b, "d/f"), "hello!\n") },
			want:   []string{"d/f: size 6 vs 7"},
		},
		{
			name: "content and size may differ, and then the time",
			opts: onlyF("d/f"),
			change: func(t *testing.T, b string) {
				write(t, filepath.Join(b, "d/f"), "converted, longer\n")
			},
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d/f"), later) },
		},
		{
			name:  "content may differ but is equal: the time must be too",
			opts:  onlyF("d/f"),
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d/f"), later) },
			want:  []string{"d/f: mtime " + stamp(t0) + " vs " + stamp(later)},
		},
		{
			name:   "content may differ for another file only",
			opts:   onlyF("d/big"),
			change: func(t *testing.T, b string) { write(t, filepath.Join(b, "d/f"), "hellO\n") },
			want:   []string{"d/f: content differs (first at byte 4)"},
		},
		{
			name:   "permission bits",
			change: func(t *testing.T, b string) { must(t, os.Chmod(filepath.Join(b, "d/f"), 0o640)) },
			want:   []string{"d/f: mode 0644 vs 0640"},
		},
		{
			name:   "setuid lost",
			change: func(t *testing.T, b string) { must(t, os.Chmod(filepath.Join(b, "x"), 0o755)) },
			want:   []string{"x: mode 4755 vs 0755"},
		},
		{
			name:   "setgid gained, on a directory",
			change: func(t *testing.T, b string) { must(t, os.Chmod(filepath.Join(b, "d"), 0o755|os.ModeSetgid)) },
			want:   []string{"d: mode 0755 vs 2755"},
		},
		{
			name:   "sticky",
			change: func(t *testing.T, b string) { must(t, os.Chmod(filepath.Join(b, "d/empty"), 0o777|os.ModeSticky)) },
			want:   []string{"d/empty: mode 0755 vs 1777"},
		},
		{
			name: "the top's mode",
			change: func(t *testing.T, b string) {
				must(t, os.Chmod(b, 0o700))
			},
			want: []string{".: mode 0755 vs 0700"},
		},
		{
			name: "symlink replaced by the file",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "l")))
				write(t, filepath.Join(b, "l"), "hello\n")
			},
			want: []string{"l: type symlink vs file"},
		},
		{
			name: "directory replaced by a symlink: one line",
			change: func(t *testing.T, b string) {
				must(t, os.RemoveAll(filepath.Join(b, "d/sub")))
				must(t, os.Symlink("../x", filepath.Join(b, "d/sub")))
			},
			want: []string{"d/sub: type dir vs symlink"},
		},
		{
			name: "symlink to a directory not followed",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "ldir")))
				must(t, os.Symlink("d/sub", filepath.Join(b, "ldir")))
			},
			want: []string{`ldir: symlink target "d" vs "d/sub"`},
		},
		{
			name: "symlink target",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "l")))
				must(t, os.Symlink("/d/f", filepath.Join(b, "l")))
			},
			want: []string{`l: symlink target "d/f" vs "/d/f"`},
		},
		{
			name: "FIFO replaced by a file",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "p")))
				write(t, filepath.Join(b, "p"), "")
			},
			want: []string{"p: type fifo vs file"},
		},
		{
			name: "socket replaced by a FIFO",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "s")))
				must(t, unix.Mkfifo(filepath.Join(b, "s"), 0o644))
			},
			want: []string{"s: type socket vs fifo"},
		},
		{
			name:   "only in a",
			change: func(t *testing.T, b string) { must(t, os.Remove(filepath.Join(b, "d/f"))) },
			want:   []string{"d/f: only in a"},
		},
		{
			name:   "only in b",
			change: func(t *testing.T, b string) { write(t, filepath.Join(b, "d/new"), "") },
			want:   []string{"d/new: only in b"},
		},
		{
			name:   "a symlink only in a",
			change: func(t *testing.T, b string) { must(t, os.Remove(filepath.Join(b, "ldir"))) },
			want:   []string{"ldir: only in a"},
		},
		{
			name:   "a directory only in a: one line",
			change: func(t *testing.T, b string) { must(t, os.RemoveAll(filepath.Join(b, "d"))) },
			want: []string{
				"d: only in a (a directory, 5 entries below)",
				// The trees' other names of files below d are
				// none: l and ldir are symlinks, not links.
			},
		},
		{
			name:   "an empty directory only in b",
			change: func(t *testing.T, b string) { must(t, os.Mkdir(filepath.Join(b, "d/sub/e"), 0o755)) },
			want:   []string{"d/sub/e: only in b (a directory, 0 entries below)"},
		},
		{
			name: "hard link broken",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "h2")))
				write(t, filepath.Join(b, "h2"), "linked\n")
			},
			want: []string{"h1: hard links [h1 h2] vs [h1]", "h2: hard links [h1 h2] vs [h2]"},
		},
		{
			name: "hard link made",
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "h3")))
				must(t, os.Link(filepath.Join(b, "h1"), filepath.Join(b, "h3")))
			},
			want: []string{
				"h1: hard links [h1 h2] vs [h1 h2 h3]",
				"h2: hard links [h1 h2] vs [h1 h2 h3]",
				"h3: hard links [h3] vs [h1 h2 h3]",
			},
		},
		{
			name:   "hard link to a name only in b",
			change: func(t *testing.T, b string) { must(t, os.Link(filepath.Join(b, "h1"), filepath.Join(b, "d/extra"))) },
			want: []string{
				"d/extra: only in b",
				"h1: hard links [h1 h2] vs [d/extra h1 h2]",
				"h2: hard links [h1 h2] vs [d/extra h1 h2]",
			},
		},
		{
			name:   "hard links of a name only in one tree count",
			change: func(t *testing.T, b string) { must(t, os.Link(filepath.Join(b, "h1"), filepath.Join(b, "d/sub/h"))) },
			after: func(t *testing.T, b string) {
				// d/sub/h is a new name in b in a directory of both; the
				// same in a directory only in b:
				must(t, os.Mkdir(filepath.Join(b, "new"), 0o755))
				must(t, os.Rename(filepath.Join(b, "d/sub/h"), filepath.Join(b, "new/h")))
				retime(t, b, t0)
			},
			want: []string{
				"h1: hard links [h1 h2] vs [h1 h2 new/h]",
				"h2: hard links [h1 h2] vs [h1 h2 new/h]",
				"new: only in b (a directory, 1 entry below)",
			},
		},
		{
			name:  "file time",
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d/f"), later) },
			want:  []string{"d/f: mtime " + stamp(t0) + " vs " + stamp(later)},
		},
		{
			name:  "file time, to the nanosecond",
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d/f"), t0.Add(1)) },
			want:  []string{"d/f: mtime " + stamp(t0) + " vs " + stamp(t0.Add(1))},
		},
		{
			name:  "file time, times not compared",
			opts:  &Options{DirTimes: true},
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d/f"), later) },
		},
		{
			name:  "symlink time",
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "l"), later) },
			want:  []string{"l: mtime " + stamp(t0) + " vs " + stamp(later)},
		},
		{
			name:  "FIFO time",
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "p"), later) },
			want:  []string{"p: mtime " + stamp(t0) + " vs " + stamp(later)},
		},
		{
			name:  "directory time",
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d"), later) },
			want:  []string{"d: mtime " + stamp(t0) + " vs " + stamp(later)},
		},
		{
			name: "directory time: a file written in it",
			after: func(t *testing.T, b string) {
				write(t, filepath.Join(b, "d/empty/new"), "")
				must(t, os.Remove(filepath.Join(b, "d/empty/new")))
			},
			wantB: func(t *testing.T, b string) []string {
				return []string{"d/empty: mtime " + stamp(t0) + " vs " + stamp(mtime(t, filepath.Join(b, "d/empty")))}
			},
		},
		{
			name:  "directory time, directory times not compared",
			opts:  &Options{Times: true},
			after: func(t *testing.T, b string) { touch(t, filepath.Join(b, "d"), later) },
		},
		{
			name:   "user xattr missing",
			xattrs: true,
			change: func(t *testing.T, b string) { must(t, unix.Removexattr(filepath.Join(b, "d/f"), "user.note")) },
			want:   []string{"d/f: xattr user.note missing"},
		},
		{
			name:   "user xattr extra",
			xattrs: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Setxattr(filepath.Join(b, "d/empty"), "user.more", []byte{1, 2, 0}, 0))
			},
			want: []string{"d/empty: xattr user.more extra"},
		},
		{
			name:   "user xattr value",
			xattrs: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Setxattr(filepath.Join(b, "d/f"), "user.note", []byte("w"), 0))
			},
			want: []string{`d/f: xattr user.note value "v" vs "w"`},
		},
		{
			name:   "access ACL lost",
			xattrs: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Removexattr(filepath.Join(b, "d/sub"), "system.posix_acl_access"))
			},
			want: []string{"d/sub: xattr system.posix_acl_access missing"},
		},
		{
			name:   "default ACL lost",
			xattrs: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Removexattr(filepath.Join(b, "d/sub"), "system.posix_acl_default"))
			},
			want: []string{"d/sub: xattr system.posix_acl_default missing"},
		},
		{
			name:   "ACL entry changed",
			xattrs: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Setxattr(filepath.Join(b, "d/sub"), "system.posix_acl_default", acl(7, 7, 0), 0))
			},
			want: []string{"d/sub: xattr system.posix_acl_default value " +
				hex.EncodeToString(acl(7, 5, 0)) + " vs " + hex.EncodeToString(acl(7, 7, 0))},
		},
		{
			name:   "owner",
			root:   true,
			change: func(t *testing.T, b string) { must(t, os.Chown(filepath.Join(b, "d/big"), 1000, -1)) },
			want:   []string{"d/big: uid 0 vs 1000"},
		},
		{
			name:   "a symlink's group",
			root:   true,
			change: func(t *testing.T, b string) { must(t, os.Lchown(filepath.Join(b, "l"), -1, 42)) },
			want:   []string{"l: gid 0 vs 42"},
		},
		{
			name: "owner and group reset, setgid with them",
			root: true,
			change: func(t *testing.T, b string) {
				must(t, os.Chown(filepath.Join(b, "o"), 0, 0))
			},
			// chown clears setgid on an executable.
			want: []string{"o: gid 42 vs 0", "o: mode 2755 vs 0755", "o: uid 1000 vs 0"},
		},
		{
			name: "file capability missing",
			root: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Removexattr(filepath.Join(b, "cap"), "security.capability"))
			},
			want: []string{"cap: xattr security.capability missing"},
		},
		{
			name: "file capability dropped by a write of the same bytes",
			root: true,
			change: func(t *testing.T, b string) {
				f, err := os.OpenFile(filepath.Join(b, "cap"), os.O_WRONLY, 0)
				must(t, err)
				_, err = f.WriteAt([]byte("p"), 0)
				must(t, err)
				must(t, f.Close())
			},
			want: []string{"cap: xattr security.capability missing"},
		},
		{
			name: "file capability changed",
			root: true,
			change: func(t *testing.T, b string) {
				v := capNetRaw()
				v[4] = 0 // no CAP_NET_RAW
				v[5] = 0x10
				must(t, unix.Setxattr(filepath.Join(b, "cap"), "security.capability", v, 0))
			},
			want: []string{"cap: xattr security.capability value " +
				"0100000200200000000000000000000000000000 vs 0100000200100000000000000000000000000000"},
		},
		{
			name: "trusted xattr value",
			root: true,
			change: func(t *testing.T, b string) {
				must(t, unix.Setxattr(filepath.Join(b, "d/f"), "trusted.t", []byte("u"), 0))
			},
			want: []string{`d/f: xattr trusted.t value "t" vs "u"`},
		},
		{
			name: "device numbers",
			root: true,
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "c")))
				must(t, unix.Mknod(filepath.Join(b, "c"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
			},
			want: []string{"c: rdev 1,3 vs 1,5"},
		},
		{
			name: "char device made a block device",
			root: true,
			change: func(t *testing.T, b string) {
				must(t, os.Remove(filepath.Join(b, "c")))
				must(t, unix.Mknod(filepath.Join(b, "c"), unix.S_IFBLK|0o666, int(unix.Mkdev(1, 3))))
			},
			want: []string{"c: type char dev vs block dev"},
		},
		{
			name: "several differences, sorted",
			change: func(t *testing.T, b string) {
				must(t, os.Chmod(filepath.Join(b, "x"), 0o755))
				must(t, os.Remove(filepath.Join(b, "h3")))
				sh(t, "sh", "-c", "printf x >> "+filepath.Join(b, "d/big"))
			},
			want: []string{"d/big: size 614400 vs 614401", "h3: only in a", "x: mode 4755 vs 0755"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root && !e.root {
				t.Skip("needs root: owners, devices, security.capability and trusted.* attributes")
			}
			if c.xattrs && !e.xattrs {
				t.Skip("the file system under TMPDIR takes no user.* attributes or POSIX ACLs")
			}
			tmp := t.TempDir()
			a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
			build(t, a, e)
			build(t, b, e)
			if c.change != nil {
				c.change(t, b)
				retime(t, b, t0)
			}
			if c.after != nil {
				c.after(t, b)
			}
			o := all
			if c.opts != nil {
				o = *c.opts
			}
			got, err := Compare(a, b, o)
			if err != nil {
				t.Fatal(err)
			}
			want := c.want
			if c.wantB != nil {
				want = c.wantB(t, b)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("Compare (-want +got):\n%s", d)
			}
			// The other way round, every line mirrored: the same count.
			back, err := Compare(b, a, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(got) {
				t.Errorf("Compare(b, a) gives %d lines, Compare(a, b) %d:\n%q\n%q", len(back), len(got), back, got)
			}
		})
	}
}

// TestCopies checks the oracle against the tools it judges: cp -a keeps
// everything, cp -r (no --preserve) loses what a careless copy loses.
func TestCopies(t *testing.T) {
	if _, err := exec.LookPath("cp"); err != nil {
		t.Skip("no cp")
	}
	e := probe(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "a")
	build(t, a, e)
	o := Options{Times: true, DirTimes: true}

	archive := filepath.Join(tmp, "archive")
	if out, err := exec.Command("cp", "-a", a, archive).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	got, err := Compare(a, archive, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("cp -a: %d differences:\n%q", len(got), got)
	}

	plain := filepath.Join(tmp, "plain")
	if out, err := exec.Command("cp", "-r", a, plain).CombinedOutput(); err != nil {
		t.Fatalf("cp -r: %v\n%s", err, out)
	}
	got, err = Compare(a, plain, o)
	if err != nil {
		t.Fatal(err)
	}
	has := func(line string) {
		t.Helper()
		if !slices.Contains(got, line) {
			t.Errorf("cp -r: no line %q in\n%q", line, got)
		}
	}
	has("h1: hard links [h1 h2] vs [h1]")
	has("d/f: mtime " + stamp(t0) + " vs " + stamp(mtime(t, filepath.Join(plain, "d/f"))))
	if e.xattrs {
		has("d/f: xattr user.note missing")
	}
	if e.root {
		has("cap: xattr security.capability missing")
		has("o: uid 1000 vs 0")
	}
}

func mtime(t *testing.T, path string) time.Time {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Mtim.Unix())
}

// TestTops: a top that is a symbolic link is followed; one that is missing
// or not a directory is an error.
func TestTops(t *testing.T) {
	e := probe(t)
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	build(t, a, e)
	build(t, b, e)
	link := filepath.Join(tmp, "link")
	if err := os.Symlink("a", link); err != nil {
		t.Fatal(err)
	}
	got, err := Compare(link, b, Options{Times: true, DirTimes: true})
	if err != nil || len(got) != 0 {
		t.Errorf("Compare(link to a, b) = %q, %v; want no difference", got, err)
	}
	if _, err := Compare(filepath.Join(tmp, "missing"), b, Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Compare(missing, b): %v, want a not-exist error", err)
	}
	if _, err := Compare(a, filepath.Join(b, "d/f"), Options{}); err == nil {
		t.Errorf("Compare(a, a file): no error")
	}
}
