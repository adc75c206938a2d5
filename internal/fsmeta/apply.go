package fsmeta

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Options says how Apply gives a file metadata.
type Options struct {
	// Times sets the access and modification times too.
	Times bool
	// BestEffort keeps what may be kept, as cp -a does for a user who is
	// not root: an owner or an attribute that may not be set is left out
	// (and setuid and setgid with an owner that could not be kept), and
	// Apply returns what was left out instead of failing.
	BestEffort bool
}

// LostError says what of a file's metadata could not be given to its
// replacement: the replacement must then not take the file's place.
type LostError struct {
	What string // "owner 1000:42", "extended attribute security.capability", ...
	Err  error
}

func (e *LostError) Error() string { return fmt.Sprintf("cannot keep its %s: %v", e.What, e.Err) }
func (e *LostError) Unwrap() error { return e.Err }

// target is what Apply works on: an open file, or a name in an open
// directory (symbolic links, devices, FIFOs and sockets, not followed).
type target interface {
	chown(uid, gid int) error
	chmod(mode uint32) error
	list([]byte) (int, error)
	get(name string, b []byte) (int, error)
	set(name string, v []byte) error
	remove(name string) error
	times(ts []unix.Timespec) error
	stat(st *unix.Stat_t) error
	setFlags(flags uint32) error
}

type fdTarget int

func (t fdTarget) chown(uid, gid int) error            { return unix.Fchown(int(t), uid, gid) }
func (t fdTarget) chmod(mode uint32) error             { return unix.Fchmod(int(t), mode) }
func (t fdTarget) list(b []byte) (int, error)          { return unix.Flistxattr(int(t), b) }
func (t fdTarget) get(n string, b []byte) (int, error) { return unix.Fgetxattr(int(t), n, b) }
func (t fdTarget) set(n string, v []byte) error        { return unix.Fsetxattr(int(t), n, v, 0) }
func (t fdTarget) remove(n string) error               { return unix.Fremovexattr(int(t), n) }
func (t fdTarget) times(ts []unix.Timespec) error {
	return unix.UtimesNanoAt(int(t), "", ts, unix.AT_EMPTY_PATH)
}
func (t fdTarget) stat(st *unix.Stat_t) error  { return unix.Fstat(int(t), st) }
func (t fdTarget) setFlags(flags uint32) error { return setFlags(int(t), flags) }
func (t atTarget) chown(uid, gid int) error {
	return unix.Fchownat(t.dir, t.name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
}
func (t atTarget) list(b []byte) (int, error)          { return unix.Llistxattr(t.proc, b) }
func (t atTarget) get(n string, b []byte) (int, error) { return unix.Lgetxattr(t.proc, n, b) }
func (t atTarget) set(n string, v []byte) error        { return unix.Lsetxattr(t.proc, n, v, 0) }
func (t atTarget) remove(n string) error               { return unix.Lremovexattr(t.proc, n) }
func (t atTarget) stat(st *unix.Stat_t) error {
	return unix.Fstatat(t.dir, t.name, st, unix.AT_SYMLINK_NOFOLLOW)
}
func (t atTarget) setFlags(uint32) error { return nil }
func (t atTarget) times(ts []unix.Timespec) error {
	return unix.UtimesNanoAt(t.dir, t.name, ts, unix.AT_SYMLINK_NOFOLLOW)
}
func setFlags(fd int, flags uint32) error {
	return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, int(flags))
}
func (t atTarget) chmod(mode uint32) error {
	if t.link {
		return nil // a symbolic link's mode cannot be changed, nor matters
	}
	return unix.Fchmodat(t.dir, t.name, mode, 0)
}

type atTarget struct {
	dir        int
	name, proc string
	link       bool
}

// Apply gives the open file f (a regular file or a directory) m's owner,
// group, extended attributes (removing any m does not have, such as an
// ACL inherited from the directory), mode bits and the owner's inode
// flags but immutable and append-only, and, with o.Times, m's times. The
// owner comes first, as chown clears setuid, setgid and
// security.capability; the mode after the attributes, as setting an
// ACL changes it. An error is a *LostError naming what could not be
// kept; with o.BestEffort, what was left out is returned instead.
func Apply(f *os.File, m *Meta, o Options) (lost []string, err error) {
	return apply(fdTarget(f.Fd()), m, o)
}

// ApplyAt is Apply for name in the open directory dir, not followed: a
// symbolic link (whose mode is not set), a device, FIFO or socket. Inode
// flags are not set.
func ApplyAt(dir *os.File, name string, m *Meta, o Options) (lost []string, err error) {
	return apply(atTarget{int(dir.Fd()), name, procPath(dir, name), m.Mode&unix.S_IFMT == unix.S_IFLNK}, m, o)
}

func apply(t target, m *Meta, o Options) (lost []string, err error) {
	var st unix.Stat_t
	if err := t.stat(&st); err != nil {
		return nil, err
	}
	mode := m.Perm()
	// keep records what could not be kept: an error unless best effort.
	keep := func(what string, err error) error {
		if err == nil {
			return nil
		}
		if !o.BestEffort || !permissionError(err) {
			return &LostError{what, err}
		}
		lost = append(lost, what)
		return nil
	}
	if st.Uid != m.Uid || st.Gid != m.Gid {
		err := t.chown(int(m.Uid), int(m.Gid))
		if err != nil && o.BestEffort {
			// As cp -a: keep the group alone if it may be, and never
			// setuid or setgid with an owner or group not the original.
			if t.chown(-1, int(m.Gid)) == nil {
				mode &^= unix.S_ISUID
			} else {
				mode &^= unix.S_ISUID | unix.S_ISGID
			}
		}
		if err := keep(fmt.Sprintf("owner %d:%d", m.Uid, m.Gid), err); err != nil {
			return lost, err
		}
	}
	for _, x := range m.Xattrs {
		if err := keep("extended attribute "+x.Name, t.set(x.Name, x.Value)); err != nil {
			return lost, err
		}
	}
	have, err := readXattrs(t.list, t.get)
	if err != nil {
		return lost, err
	}
	for _, x := range have {
		if _, ok := m.Xattr(x.Name); !ok {
			if err := keep("lack of extended attribute "+x.Name, t.remove(x.Name)); err != nil {
				return lost, err
			}
		}
	}
	if err := keep(fmt.Sprintf("mode %04o", m.Perm()), t.chmod(mode)); err != nil {
		return lost, err
	}
	if err := t.stat(&st); err != nil {
		return lost, err
	}
	if m.Mode&unix.S_IFMT != unix.S_IFLNK && st.Mode&0o7777 != mode {
		// chmod drops setgid silently for a group the caller is not in.
		if err := keep(fmt.Sprintf("mode %04o", m.Perm()), fmt.Errorf("%w: it became %04o", errModeDropped, st.Mode&0o7777)); err != nil {
			return lost, err
		}
	}
	if f := m.Flags &^ (FlagImmutable | FlagAppend); f != 0 {
		if err := keep(fmt.Sprintf("inode flags %#x", f), t.setFlags(f)); err != nil {
			return lost, err
		}
	}
	if o.Times {
		if err := keep("times", t.times([]unix.Timespec{m.Atime, m.Mtime})); err != nil {
			return lost, err
		}
	}
	return lost, nil
}

// permissionError says whether err is the system refusing a change the
// caller may not make, which a best-effort copy leaves out.
func permissionError(err error) bool {
	var le *LostError
	if errors.As(err, &le) {
		err = le.Err
	}
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, errModeDropped)
}

// errModeDropped: chmod succeeded but the system left bits out.
var errModeDropped = errors.New("the system dropped mode bits")
