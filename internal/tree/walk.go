package tree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
)

// A tree others can write to must not steer the walk, or the writes,
// outside it: every directory is opened relative to its parent's open
// descriptor with O_NOFOLLOW, and every file relative to its directory's,
// as hardened rm -rf and chown -R do. A directory swapped for a symbolic
// link meanwhile makes the open fail (ELOOP or ENOTDIR) and that file
// fail, instead of leading out of the tree.

// openFlags open a directory below another without following a link.
const openDirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// openFileFlags open a regular file to read without following a link,
// blocking on a FIFO or taking a terminal.
const openFileFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// openAt opens name in dir with flags, as an *os.File named display.
func openAt(dir *os.File, name string, flags int, display string) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), name, flags, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || (flags&unix.O_DIRECTORY != 0 && errors.Is(err, unix.ENOTDIR)) {
			err = errSwapped
		}
		return nil, &os.PathError{Op: "open", Path: display, Err: err}
	}
	return os.NewFile(uintptr(fd), display), nil
}

// errSwapped: a component of a path found a directory or a file, and is a
// symbolic link or another type now.
var errSwapped = errors.New("changed during the run (a symbolic link or another kind of file now); not followed")

// openBelow opens the directory rel (a relative path, "." for top
// itself) below top without following a symbolic link in any component:
// in one openat2 with RESOLVE_NO_SYMLINKS and RESOLVE_BENEATH, or, where
// the kernel has no openat2 (before 5.6), one component at a time with
// O_NOFOLLOW. display names top in errors. With create set, a missing
// component is made (create is given its open parent, its name and its
// path shown; it may find it there already).
func openBelow(top *os.File, rel, display string, create func(parent *os.File, name, display string) error) (*os.File, error) {
	if rel == "." || rel == "" {
		return openAt(top, ".", openDirFlags, display)
	}
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(int(top.Fd()), rel, &unix.OpenHow{
			Flags:   uint64(openDirFlags &^ unix.O_NOFOLLOW),
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
		})
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), filepath.Join(display, rel)), nil
		case errors.Is(err, unix.ENOSYS):
			noOpenat2.Store(true)
		case errors.Is(err, unix.ENOENT) && create != nil:
		case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV):
			return nil, &os.PathError{Op: "open", Path: filepath.Join(display, rel), Err: errSwapped}
		default:
			return nil, &os.PathError{Op: "open", Path: filepath.Join(display, rel), Err: err}
		}
	}
	dir, err := openAt(top, ".", openDirFlags, display)
	if err != nil {
		return nil, err
	}
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		display = filepath.Join(display, c)
		if create != nil {
			if err := create(dir, c, display); err != nil {
				dir.Close()
				return nil, err
			}
		}
		next, err := openAt(dir, c, openDirFlags, display)
		dir.Close()
		if err != nil {
			return nil, err
		}
		dir = next
	}
	return dir, nil
}

// noOpenat2 is set once the kernel said it has no openat2.
var noOpenat2 atomic.Bool

// dirEntry is a directory, symbolic link, device, FIFO or socket found by
// the walk: what a copy (OutDir) makes again.
type dirEntry struct {
	rel    string // below its root's top ("." the top itself)
	meta   *fsmeta.Meta
	target string // a symbolic link's
}

// maxPath is the longest path the walk accepts (PATH_MAX less the
// terminating NUL): records and messages name every file by its path.
const maxPath = 4095

// walker lists a tree: file is called for each regular file, other for
// every other entry (directories included, before what they hold).
// Temporary files of WriteAtomic are passed over; with clean set, those
// whose writer is gone are removed (stale counts them). An entry that
// changes while it is read (a race with another user of the tree: a
// directory now a link, a link now a file) is passed to failed and the
// walk goes on; only a path longer than maxPath, or the top directory
// unreadable, stops it.
type walker struct {
	file   func(rel, display string, st *unix.Stat_t)
	other  func(e dirEntry)
	failed func(display string, err error)
	clean  bool
	stale  int
}

// walkDir reports the open directory sub (rel, display), which its
// parent listed with st (nil for the top), and walks it.
func (w *walker) walkDir(sub *os.File, rel, display string, st *unix.Stat_t) error {
	m, err := fsmeta.Read(sub)
	if err == nil && st != nil {
		var now unix.Stat_t
		if err = unix.Fstat(int(sub.Fd()), &now); err == nil && idOfStat(&now) != idOfStat(st) {
			err = errSwapped
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", display, err)
	}
	names, err := sub.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%s: %w", display, err)
	}
	w.other(dirEntry{rel: rel, meta: m})
	slices.Sort(names)
	for _, name := range names {
		crel, cdisp := filepath.Join(rel, name), filepath.Join(display, name)
		if len(cdisp) > maxPath {
			return &os.PathError{Op: "walk", Path: cdisp, Err: unix.ENAMETOOLONG}
		}
		if err := w.entry(sub, name, crel, cdisp); err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) && pe.Op == "walk" {
				return err
			}
			w.failed(cdisp, err)
		}
	}
	return nil
}

// entry looks at name in dir (crel, cdisp) and descends into it if it is
// a directory.
func (w *walker) entry(dir *os.File, name, crel, cdisp string) error {
	if elfwrite.IsTemp(name) {
		if !w.clean {
			return nil
		}
		if removed, _ := elfwrite.RemoveStale(dir, name); removed {
			w.stale++
		}
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile
		}
		return &os.PathError{Op: "lstat", Path: cdisp, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		w.file(crel, cdisp, &st)
	case unix.S_IFDIR:
		sub, err := openAt(dir, name, openDirFlags, cdisp)
		if err != nil {
			return err
		}
		defer sub.Close()
		return w.walkDir(sub, crel, cdisp, &st)
	default:
		m, err := fsmeta.ReadAt(dir, name)
		if err != nil {
			return fmt.Errorf("%s: %w", cdisp, err)
		}
		e := dirEntry{rel: crel, meta: m}
		if m.Mode&unix.S_IFMT == unix.S_IFLNK {
			if e.target, err = readlinkAt(dir, name); err != nil {
				if errors.Is(err, unix.EINVAL) { // not a link any more
					err = errSwapped
				}
				return fmt.Errorf("%s: %w", cdisp, err)
			}
		}
		w.other(e)
	}
	return nil
}

func readlinkAt(dir *os.File, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(int(dir.Fd()), name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", errors.New("symbolic link target too long")
}

func idOfStat(st *unix.Stat_t) fileID { return fileID{st.Dev, st.Ino} }
