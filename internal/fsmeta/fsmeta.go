// Package fsmeta reads what a file is besides its bytes (owner, group,
// mode bits, extended attributes, inode flags, times) from an open file
// and gives it to another, as cp -a and rsync -aHAX keep it. POSIX ACLs
// and file capabilities are extended attributes (system.posix_acl_*,
// security.capability) and travel with the others.
//
// Everything works on open descriptors or on names relative to an open
// directory, never following a symbolic link, so that a tree others can
// write to cannot steer it elsewhere.
package fsmeta

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Xattr is one extended attribute.
type Xattr struct {
	Name  string
	Value []byte
}

// Meta is a file's metadata.
type Meta struct {
	Mode     uint32 // st_mode: type and all 12 mode bits
	Uid, Gid uint32
	Rdev     uint64
	Atime    unix.Timespec
	Mtime    unix.Timespec
	Xattrs   []Xattr // sorted by name
	// Flags are the inode flags (chattr) the owner may change, as
	// FS_IOC_GETFLAGS gives them; 0 where the file system has none.
	Flags uint32
}

// Inode flags (linux/fs.h) that matter here.
const (
	FlagImmutable = 0x00000010 // FS_IMMUTABLE_FL, chattr +i
	FlagAppend    = 0x00000020 // FS_APPEND_FL, chattr +a
	// userModifiable is FS_FL_USER_MODIFIABLE: the flags chattr sets.
	userModifiable = 0x000380FF
)

// Perm is the 12 mode bits: permissions, setuid, setgid and sticky.
func (m *Meta) Perm() uint32 { return m.Mode & 0o7777 }

// Xattr returns the value of the attribute name and whether there is one.
func (m *Meta) Xattr(name string) ([]byte, bool) {
	i, ok := slices.BinarySearchFunc(m.Xattrs, name, func(x Xattr, n string) int { return strings.Compare(x.Name, n) })
	if !ok {
		return nil, false
	}
	return m.Xattrs[i].Value, true
}

// maxXattrs bounds what is read of one file's attributes: the list of
// names and each value are at most 64 KiB on Linux (XATTR_LIST_MAX,
// XATTR_SIZE_MAX).
const maxXattr = 64 << 10

// Read reads the metadata of the open file f (a regular file or a
// directory; not a symbolic link).
func Read(f *os.File) (*Meta, error) {
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	m := fromStat(&st)
	var err error
	if m.Xattrs, err = readXattrs(func(b []byte) (int, error) { return unix.Flistxattr(fd, b) },
		func(n string, b []byte) (int, error) { return unix.Fgetxattr(fd, n, b) }); err != nil {
		return nil, err
	}
	if flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS); err == nil {
		m.Flags = flags & userModifiable
	}
	return m, nil
}

// ReadAt reads the metadata of name in the open directory dir without
// following it: for symbolic links, devices, FIFOs and sockets, which
// cannot be opened for reading. Their inode flags are not read.
func ReadAt(dir *os.File, name string) (*Meta, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	m := fromStat(&st)
	p := procPath(dir, name)
	var err error
	m.Xattrs, err = readXattrs(func(b []byte) (int, error) { return unix.Llistxattr(p, b) },
		func(n string, b []byte) (int, error) { return unix.Lgetxattr(p, n, b) })
	if err != nil {
		return nil, err
	}
	return m, nil
}

// procPath names name in the open directory dir through /proc/self/fd,
// for the system calls that take only a path (lgetxattr and kin): the
// directory is the one open, whatever was renamed meanwhile, and the last
// component is not followed by the l* calls.
func procPath(dir *os.File, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name)
}

func fromStat(st *unix.Stat_t) *Meta {
	return &Meta{Mode: st.Mode, Uid: st.Uid, Gid: st.Gid, Rdev: st.Rdev, Atime: st.Atim, Mtime: st.Mtim}
}

// readXattrs lists and reads every attribute; a file system without
// extended attributes has none.
func readXattrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) ([]Xattr, error) {
	buf := make([]byte, 1024)
	n, err := list(buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = list(nil); err == nil {
			buf = make([]byte, min(n, maxXattr))
			n, err = list(buf)
		}
	}
	switch {
	case errors.Is(err, unix.ENOTSUP):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing extended attributes: %w", err)
	}
	var xs []Xattr
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name == "" {
			continue
		}
		v, err := getXattr(get, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading extended attribute %s: %w", name, err)
		}
		xs = append(xs, Xattr{name, v})
	}
	slices.SortFunc(xs, func(a, b Xattr) int { return strings.Compare(a.Name, b.Name) })
	return xs, nil
}

func getXattr(get func(string, []byte) (int, error), name string) ([]byte, error) {
	buf := make([]byte, 256)
	n, err := get(name, buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = get(name, nil); err != nil {
			return nil, err
		}
		buf = make([]byte, min(n, maxXattr))
		n, err = get(name, buf)
	}
	if err != nil {
		return nil, err
	}
	return slices.Clone(buf[:n]), nil
}

// SignedBy says why a file whose extended attributes has looks up
// must be left alone: an IMA or EVM signature over its content ("" if
// none). has looks an attribute up, wherever the file's attributes are
// (the file system, a tar header's PAX records).
func SignedBy(has func(name string) bool) string {
	for _, name := range []string{"security.ima", "security.evm"} {
		if has(name) {
			return "signed (" + name + " would no longer match)"
		}
	}
	return ""
}

// moduleSignature ends a kernel module signed by sign-file.
const moduleSignature = "~Module signature appended~\n"

// Signature says why a file's content must not change: a signature over
// it that would no longer match ("" if none).
func Signature(m *Meta, data []byte) string {
	if why := SignedBy(func(name string) bool { _, ok := m.Xattr(name); return ok }); why != "" {
		return why
	}
	if bytes.HasSuffix(data, []byte(moduleSignature)) {
		return "signed (an appended module signature would no longer match)"
	}
	return ""
}

// Sealed says why the file may not be replaced ("" if it may): immutable
// or append-only (chattr +i, +a).
func (m *Meta) Sealed() string {
	if m.Flags&(FlagImmutable|FlagAppend) != 0 {
		return "immutable or append-only (chattr +i, +a)"
	}
	return ""
}
