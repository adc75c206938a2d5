// Package treediff compares two directory trees entry by entry, as the
// fidelity of cp -a or rsync -aHAX would be judged: type, the 12 mode
// bits, owner and group, symbolic link targets, device numbers, every
// extended attribute (file capabilities and POSIX ACLs included), the
// bytes of regular files, hard-link groups and modification times. It is
// the tests' oracle for tree conversion, written apart from the code that
// copies metadata so as not to share its mistakes.
//
// It is for Linux: it reads struct stat through syscall and extended
// attributes through golang.org/x/sys/unix, never following a symbolic
// link below the top of either tree.
package treediff

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Options says what may differ.
type Options struct {
	// ContentMayDiffer reports whether a regular file's bytes may differ
	// (the caller passes "is an ELF file the tool converts"); its size
	// then may differ too. nil: every file's bytes must be equal.
	ContentMayDiffer func(rel string) bool
	// Times: modification times must be equal, for every entry but
	// files whose bytes differ (and directories when DirTimes is false).
	// Equal means to the nanosecond. DirTimes alone compares nothing.
	Times    bool
	DirTimes bool
}

// entry is what Compare knows of one name in one tree.
type entry struct {
	st     syscall.Stat_t
	target string   // a symbolic link's target
	xattrs []xattr  // sorted by name
	names  []string // a directory's entries, sorted
}

type xattr struct {
	name  string
	value []byte
}

// inode identifies a file within one tree.
type inode struct{ dev, ino uint64 }

// tree is the state of one side of the walk.
type tree struct {
	root string
	// links maps the inode of every non-directory with more than one
	// link to the paths that name it inside the tree.
	links map[inode][]string
	// ids maps such paths to their inode.
	ids map[string]inode
}

// comparer holds the state of one Compare.
type comparer struct {
	o      Options
	a, b   tree
	diffs  []string
	bufA   []byte
	bufB   []byte
	shared []string // paths present in both trees with the same type, not directories
}

// Compare walks a and b (neither followed if a symbolic link below the
// top) and returns one line per difference ("usr/bin/ping: xattr
// security.capability missing", "bin: type symlink vs dir", "x: only in
// a"), sorted; empty means equal. Paths are relative to the tops, the tops
// themselves being ".". A name only in one tree is one line, whatever is
// below it ("etc: only in a (a directory, 12 entries below)"); so is a
// name whose type differs. The error is for a tree that cannot be read.
//
// The lines say, for a name in both trees:
//
//	REL: type T1 vs T2                  (file, dir, symlink, fifo, char dev, block dev, socket)
//	REL: mode 0755 vs 4755              (the 12 mode bits, octal)
//	REL: uid U1 vs U2, REL: gid G1 vs G2
//	REL: symlink target "t1" vs "t2"
//	REL: rdev MAJ,MIN vs MAJ,MIN
//	REL: xattr NAME missing             (in a, not in b)
//	REL: xattr NAME extra               (in b, not in a)
//	REL: xattr NAME value V1 vs V2
//	REL: size N1 vs N2, REL: content differs (first at byte N)
//	REL: hard links [P...] vs [P...]    (the names of its inode in each tree)
//	REL: mtime T1 vs T2
//
// An attribute value is shown quoted when it is text, else in hex. Not
// compared: a symbolic link's mode (Linux has none: always 0777), access
// and change times, inode flags (chattr; cp -a and rsync -aHAX keep none),
// holes in sparse files, and the size of anything but a regular file.
func Compare(a, b string, o Options) ([]string, error) {
	c := &comparer{
		o:    o,
		a:    tree{root: a, links: map[inode][]string{}, ids: map[string]inode{}},
		b:    tree{root: b, links: map[inode][]string{}, ids: map[string]inode{}},
		bufA: make([]byte, 256<<10),
		bufB: make([]byte, 256<<10),
	}
	// The tops are followed (stat, not lstat): a symbolic link to a tree
	// compares as the tree.
	ea, err := c.a.read(".", true)
	if err != nil {
		return nil, err
	}
	eb, err := c.b.read(".", true)
	if err != nil {
		return nil, err
	}
	if err := c.walk(".", ea, eb); err != nil {
		return nil, err
	}
	c.compareLinks()
	sort.Strings(c.diffs)
	return c.diffs, nil
}

func (c *comparer) add(rel, format string, args ...any) {
	c.diffs = append(c.diffs, rel+": "+fmt.Sprintf(format, args...))
}

// walk compares rel, present in both trees, and what is below it.
func (c *comparer) walk(rel string, ea, eb *entry) error {
	same, err := c.compareEntry(rel, ea, eb)
	if err != nil {
		return err
	}
	if !same || kind(ea.st.Mode) != unix.S_IFDIR {
		return nil
	}
	// A merge of the two sorted listings.
	na, nb := ea.names, eb.names
	for len(na) > 0 || len(nb) > 0 {
		var name string
		inA, inB := false, false
		switch {
		case len(nb) == 0 || len(na) > 0 && na[0] < nb[0]:
			name, inA, na = na[0], true, na[1:]
		case len(na) == 0 || nb[0] < na[0]:
			name, inB, nb = nb[0], true, nb[1:]
		default:
			name, inA, inB, na, nb = na[0], true, true, na[1:], nb[1:]
		}
		sub := path.Join(rel, name)
		switch {
		case inA && inB:
			ca, err := c.a.read(sub, false)
			if err != nil {
				return err
			}
			cb, err := c.b.read(sub, false)
			if err != nil {
				return err
			}
			if err := c.walk(sub, ca, cb); err != nil {
				return err
			}
		case inA:
			if err := c.only(sub, &c.a, "a"); err != nil {
				return err
			}
		default:
			if err := c.only(sub, &c.b, "b"); err != nil {
				return err
			}
		}
	}
	return nil
}

// only reports rel, present in one tree t only (side "a" or "b"), with the
// number of entries below it when it is a directory.
func (c *comparer) only(rel string, t *tree, side string) error {
	e, err := t.read(rel, false)
	if err != nil {
		return err
	}
	if kind(e.st.Mode) != unix.S_IFDIR {
		c.add(rel, "only in %s", side)
		return nil
	}
	n, err := t.scan(rel, e)
	if err != nil {
		return err
	}
	c.add(rel, "only in %s (a directory, %s below)", side, plural(n, "entry", "entries"))
	return nil
}

// scan reads what is below the directory rel, which is not compared, and
// returns the number of entries. Reading records their hard links, so
// that a link to them from a name in both trees shows.
func (t *tree) scan(rel string, e *entry) (int, error) {
	n := 0
	for _, name := range e.names {
		n++
		sub := path.Join(rel, name)
		ce, err := t.read(sub, false)
		if err != nil {
			return 0, err
		}
		if kind(ce.st.Mode) == unix.S_IFDIR {
			m, err := t.scan(sub, ce)
			if err != nil {
				return 0, err
			}
			n += m
		}
	}
	return n, nil
}

// compareEntry compares what rel is in both trees, its contents if a
// regular file; same is false when the types differ (nothing else is
// compared then).
func (c *comparer) compareEntry(rel string, ea, eb *entry) (same bool, err error) {
	ka, kb := kind(ea.st.Mode), kind(eb.st.Mode)
	if ka != kb {
		c.add(rel, "type %s vs %s", kindName(ka), kindName(kb))
		for _, x := range []struct {
			t *tree
			e *entry
		}{{&c.a, ea}, {&c.b, eb}} {
			if kind(x.e.st.Mode) == unix.S_IFDIR {
				if _, err := x.t.scan(rel, x.e); err != nil {
					return false, err
				}
			}
		}
		return false, nil
	}
	if pa, pb := ea.st.Mode&0o7777, eb.st.Mode&0o7777; pa != pb && ka != unix.S_IFLNK {
		c.add(rel, "mode %04o vs %04o", pa, pb)
	}
	if ea.st.Uid != eb.st.Uid {
		c.add(rel, "uid %d vs %d", ea.st.Uid, eb.st.Uid)
	}
	if ea.st.Gid != eb.st.Gid {
		c.add(rel, "gid %d vs %d", ea.st.Gid, eb.st.Gid)
	}
	switch ka {
	case unix.S_IFLNK:
		if ea.target != eb.target {
			c.add(rel, "symlink target %q vs %q", ea.target, eb.target)
		}
	case unix.S_IFCHR, unix.S_IFBLK:
		if ea.st.Rdev != eb.st.Rdev {
			c.add(rel, "rdev %s vs %s", devName(ea.st.Rdev), devName(eb.st.Rdev))
		}
	}
	c.compareXattrs(rel, ea.xattrs, eb.xattrs)
	contentDiffers := false
	if ka == unix.S_IFREG {
		may := c.o.ContentMayDiffer != nil && c.o.ContentMayDiffer(rel)
		if ea.st.Size != eb.st.Size {
			contentDiffers = true
			if !may {
				c.add(rel, "size %d vs %d", ea.st.Size, eb.st.Size)
			}
		} else {
			at, err := c.firstDifference(rel)
			if err != nil {
				return true, err
			}
			if at >= 0 {
				contentDiffers = true
				if !may {
					c.add(rel, "content differs (first at byte %d)", at)
				}
			}
		}
	}
	if ka != unix.S_IFDIR {
		c.shared = append(c.shared, rel)
	}
	checkTime := c.o.Times && !contentDiffers && (ka != unix.S_IFDIR || c.o.DirTimes)
	if checkTime && ea.st.Mtim != eb.st.Mtim {
		c.add(rel, "mtime %s vs %s", timeName(ea.st.Mtim), timeName(eb.st.Mtim))
	}
	return true, nil
}

func (c *comparer) compareXattrs(rel string, xa, xb []xattr) {
	for len(xa) > 0 || len(xb) > 0 {
		switch {
		case len(xb) == 0 || len(xa) > 0 && xa[0].name < xb[0].name:
			c.add(rel, "xattr %s missing", xa[0].name)
			xa = xa[1:]
		case len(xa) == 0 || xb[0].name < xa[0].name:
			c.add(rel, "xattr %s extra", xb[0].name)
			xb = xb[1:]
		default:
			if !bytes.Equal(xa[0].value, xb[0].value) {
				c.add(rel, "xattr %s value %s vs %s", xa[0].name, valueName(xa[0].value), valueName(xb[0].value))
			}
			xa, xb = xa[1:], xb[1:]
		}
	}
}

// firstDifference compares the bytes of rel, a regular file of the same
// size in both trees, a buffer at a time, and returns the offset of the
// first byte that differs, or -1.
func (c *comparer) firstDifference(rel string) (int64, error) {
	fa, err := openNoFollow(filepath.Join(c.a.root, rel))
	if err != nil {
		return 0, err
	}
	defer fa.Close()
	fb, err := openNoFollow(filepath.Join(c.b.root, rel))
	if err != nil {
		return 0, err
	}
	defer fb.Close()
	var off int64
	for {
		na, erra := io.ReadFull(fa, c.bufA)
		nb, errb := io.ReadFull(fb, c.bufB)
		n := min(na, nb)
		if i := firstMismatch(c.bufA[:n], c.bufB[:n]); i >= 0 {
			return off + int64(i), nil
		}
		if na != nb {
			// The sizes were equal when listed: one changed since.
			return off + int64(n), nil
		}
		off += int64(n)
		endA, endB := isEnd(erra), isEnd(errb)
		if erra != nil && !endA {
			return 0, erra
		}
		if errb != nil && !endB {
			return 0, errb
		}
		if endA || endB {
			if endA != endB {
				return off, nil
			}
			return -1, nil
		}
	}
}

func isEnd(err error) bool { return err == io.EOF || err == io.ErrUnexpectedEOF }

func firstMismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

func openNoFollow(name string) (*os.File, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// compareLinks compares the hard-link group of every non-directory name
// present in both trees.
func (c *comparer) compareLinks() {
	for _, rel := range c.shared {
		ga := c.a.group(rel)
		gb := c.b.group(rel)
		if !slices.Equal(ga, gb) {
			c.add(rel, "hard links %s vs %s", groupName(ga), groupName(gb))
		}
	}
}

// group returns the sorted names of rel's inode in the tree, rel included.
func (t *tree) group(rel string) []string {
	id, ok := t.ids[rel]
	if !ok {
		return []string{rel}
	}
	g := slices.Clone(t.links[id])
	slices.Sort(g)
	return g
}

// read returns what rel is in t; follow follows a symbolic link (the top).
func (t *tree) read(rel string, follow bool) (*entry, error) {
	name := filepath.Join(t.root, rel)
	e := &entry{}
	var err error
	if follow {
		err = syscall.Stat(name, &e.st)
	} else {
		err = syscall.Lstat(name, &e.st)
	}
	if err != nil {
		return nil, &os.PathError{Op: "stat", Path: name, Err: err}
	}
	if follow && kind(e.st.Mode) != unix.S_IFDIR {
		return nil, fmt.Errorf("%s: not a directory", name)
	}
	switch kind(e.st.Mode) {
	case unix.S_IFLNK:
		if e.target, err = os.Readlink(name); err != nil {
			return nil, err
		}
	case unix.S_IFDIR:
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		e.names, err = f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return nil, err
		}
		slices.Sort(e.names)
	}
	if e.xattrs, err = readXattrs(name); err != nil {
		return nil, err
	}
	if kind(e.st.Mode) != unix.S_IFDIR && e.st.Nlink > 1 {
		id := inode{uint64(e.st.Dev), e.st.Ino}
		t.links[id] = append(t.links[id], rel)
		t.ids[rel] = id
	}
	return e, nil
}

// readXattrs returns every extended attribute of name, not following a
// symbolic link, sorted by name.
func readXattrs(name string) ([]xattr, error) {
	buf := make([]byte, 1024)
	var n int
	for {
		var err error
		n, err = unix.Llistxattr(name, buf)
		if errors.Is(err, unix.ERANGE) {
			if n, err = unix.Llistxattr(name, nil); err != nil {
				return nil, xattrError("llistxattr", name, err)
			}
			buf = make([]byte, n+1024)
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, xattrError("llistxattr", name, err)
		}
		break
	}
	var xs []xattr
	for _, a := range strings.Split(string(buf[:n]), "\x00") {
		if a == "" {
			continue
		}
		v, err := getXattr(name, a)
		if errors.Is(err, unix.ENODATA) {
			continue // removed since the listing
		}
		if err != nil {
			return nil, xattrError("lgetxattr "+a, name, err)
		}
		xs = append(xs, xattr{a, v})
	}
	slices.SortFunc(xs, func(x, y xattr) int { return strings.Compare(x.name, y.name) })
	return xs, nil
}

func getXattr(name, attr string) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Lgetxattr(name, attr, buf)
		if errors.Is(err, unix.ERANGE) {
			if n, err = unix.Lgetxattr(name, attr, nil); err != nil {
				return nil, err
			}
			buf = make([]byte, n+256)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n:n], nil
	}
}

func xattrError(op, name string, err error) error {
	return &os.PathError{Op: op, Path: name, Err: err}
}

func kind(mode uint32) uint32 { return mode & unix.S_IFMT }

func kindName(k uint32) string {
	switch k {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "char dev"
	case unix.S_IFBLK:
		return "block dev"
	case unix.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("type %#o", k)
}

func devName(rdev uint64) string {
	return fmt.Sprintf("%d,%d", unix.Major(rdev), unix.Minor(rdev))
}

func timeName(ts syscall.Timespec) string {
	return time.Unix(ts.Sec, ts.Nsec).UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// valueName shows an attribute value: quoted if it is text, else in hex,
// cut after 64 bytes.
func valueName(v []byte) string {
	cut := ""
	if len(v) > 64 {
		v, cut = v[:64], "..."
	}
	text := len(v) > 0
	for i, b := range v {
		if b == 0 && i == len(v)-1 {
			continue // a C string's terminator
		}
		if b < 0x20 || b >= 0x7f {
			text = false
			break
		}
	}
	if text {
		return strconv.Quote(string(v)) + cut
	}
	return fmt.Sprintf("%x%s", v, cut)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func groupName(g []string) string { return "[" + strings.Join(g, " ") + "]" }
