package elfwrite

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// Dest is where WriteAtomic puts a new file: a name in an open directory.
// Working relative to the open directory, the writer never follows a
// symbolic link that appears on the way meanwhile.
type Dest struct {
	Dir  *os.File // the directory, open
	Name string   // the file's name in Dir (one component)
	Path string   // the path errors name
	// Perm is the new file's mode (permission bits, setuid, setgid and
	// sticky) when Finish is nil.
	Perm fs.FileMode
	// Finish, if set, gives the complete new file its metadata before it
	// takes Name (see internal/fsmeta); Perm is not used then. An error
	// leaves Name as it was.
	Finish func(f *os.File) error
	// Replaces, if set, is the file Name must still be right before it
	// is replaced (in-place conversion: the input); when Name is another
	// file or none by then, Name is left as it is and the error wraps
	// ErrReplaced.
	Replaces *FileID
}

// FileID identifies a file: its device and inode.
type FileID struct{ Dev, Ino uint64 }

// ErrReplaced: the name a Dest replaces was given to another file
// meanwhile.
var ErrReplaced = errors.New("replaced by another file during the run; left as it is")

// TempMarker is in the name of every temporary file WriteAtomic has to
// name: ".NAME" + TempMarker + random hex. Such a file exists only where
// the file system cannot make unnamed files (O_TMPFILE), or for the
// instant between linking a finished file and renaming it over NAME. Tree
// walks take no such file as input; RemoveStale removes one whose writer
// is gone.
const TempMarker = ".cfi2sframe~"

// IsTemp says whether name (one component) is a temporary file's name.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, TempMarker)
}

// WriteAtomic writes a new file at d and is the one writer of every
// command's outputs. write fills a file that has no name (O_TMPFILE) or,
// on a file system without those, a temporary name (IsTemp); while it is
// written it is locked (flock), which tells RemoveStale its writer lives.
// Then Finish (or Perm) gives it its metadata, and it takes d.Name: by
// linking it there when nothing is there, else by linking it to a
// temporary name renamed over d.Name. A killed run thus leaves nothing
// but, rarely, a temporary name whose lock is gone. When d.Name exists,
// the new contents are synced before they take its place and the
// directory after, so that a crash leaves either the old file or the new
// one; a new file is not synced, as cp, ld and objcopy do not. When ctx is
// done before write is called or before the file takes its name, nothing
// is written and the error wraps ctx.Err(). On any error d.Name is left
// as it was and no temporary name remains; the error names d.Path once.
func WriteAtomic(ctx context.Context, d Dest, write func(f *os.File) error) error {
	if err := writeAtomic(ctx, d, write); err != nil {
		return fmt.Errorf("%s: %w", d.Path, err)
	}
	return nil
}

func writeAtomic(ctx context.Context, d Dest, write func(f *os.File) error) (err error) {
	dirfd := int(d.Dir.Fd())
	var old unix.Stat_t
	statErr := unix.Fstatat(dirfd, d.Name, &old, unix.AT_SYMLINK_NOFOLLOW)
	replacing := statErr == nil
	if replacing && old.Mode&unix.S_IFMT != unix.S_IFREG && old.Mode&unix.S_IFMT != unix.S_IFLNK {
		return fmt.Errorf("is %s, not a regular file; refusing to replace it", kindOfMode(old.Mode))
	}
	f, tmpName, err := createTemp(dirfd, d.Name)
	if err != nil {
		return fmt.Errorf("creating the new file in its directory: %w", err)
	}
	defer func() {
		if err != nil && tmpName != "" {
			_ = unix.Unlinkat(dirfd, tmpName, 0)
		}
		f.Close()
	}()
	if err = ctx.Err(); err != nil {
		return err
	}
	if err = write(f); err != nil {
		return err
	}
	if d.Finish != nil {
		err = d.Finish(f)
	} else if err = f.Chmod(d.Perm & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		err = fmt.Errorf("setting the mode: %w", err)
	}
	if err != nil {
		return err
	}
	if replacing {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = ctx.Err(); err != nil {
		return err
	}
	if d.Replaces != nil {
		var now unix.Stat_t
		if unix.Fstatat(dirfd, d.Name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || (FileID{now.Dev, now.Ino}) != *d.Replaces {
			return ErrReplaced
		}
	}
	if tmpName == "" {
		if !replacing {
			lerr := linkTemp(f, dirfd, d.Name)
			if lerr == nil {
				return nil
			}
			if !errors.Is(lerr, unix.EEXIST) {
				return fmt.Errorf("linking the new file into place: %w", lerr)
			}
		}
		if tmpName, err = linkTempName(f, dirfd, d.Name); err != nil {
			return fmt.Errorf("linking the new file to a temporary name: %w", err)
		}
	}
	if err = unix.Renameat(dirfd, tmpName, dirfd, d.Name); err != nil {
		return fmt.Errorf("renaming the new file into place: %w", err)
	}
	tmpName = ""
	// Make the rename durable; failure to sync the directory is not an
	// error for the file's contents, which are already in place.
	if replacing {
		_ = d.Dir.Sync()
	}
	return nil
}

// createTemp makes the new file in dirfd: without a name where the file
// system can (tmpName ""), else under a fresh temporary name for name;
// either way locked, for RemoveStale.
func createTemp(dirfd int, name string) (f *os.File, tmpName string, err error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
			return nil, "", err
		}
		for i := 0; ; i++ {
			tmpName = tempName(name)
			fd, err = unix.Openat(dirfd, tmpName, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			if err == nil || !errors.Is(err, unix.EEXIST) || i == 100 {
				break
			}
		}
		if err != nil {
			return nil, "", err
		}
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil && tmpName != "" {
		unix.Close(fd)
		_ = unix.Unlinkat(dirfd, tmpName, 0)
		return nil, "", err
	}
	return os.NewFile(uintptr(fd), name), tmpName, nil
}

func tempName(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	base := name
	if len(base) > 200 { // NAME_MAX is 255
		base = base[:200]
	}
	return "." + base + TempMarker + hex.EncodeToString(b[:])
}

// linkTemp gives the unnamed file f the name name in dirfd: through
// /proc/self/fd, which any user may do, or, without /proc (a chroot),
// with AT_EMPTY_PATH, which needs CAP_DAC_READ_SEARCH.
func linkTemp(f *os.File, dirfd int, name string) error {
	err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), dirfd, name, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		if _, serr := os.Stat("/proc/self/fd"); serr != nil {
			err = unix.Linkat(int(f.Fd()), "", dirfd, name, unix.AT_EMPTY_PATH)
		}
	}
	return err
}

// linkTempName links the unnamed file f to a fresh temporary name for
// name and returns it.
func linkTempName(f *os.File, dirfd int, name string) (string, error) {
	for i := 0; ; i++ {
		tmp := tempName(name)
		err := linkTemp(f, dirfd, tmp)
		if err == nil {
			return tmp, nil
		}
		if !errors.Is(err, unix.EEXIST) || i == 100 {
			return "", err
		}
	}
}

// RemoveStale removes name in dir if it is a temporary file (IsTemp) whose
// writer is gone: a regular file nobody holds the lock of. It says
// whether it did.
func RemoveStale(dir *os.File, name string) (bool, error) {
	if !IsTemp(name) {
		return false, nil
	}
	dirfd := int(dir.Fd())
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	var st, now unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, nil
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return false, nil // its writer is still at work
	}
	// Still the file locked, not one put there meanwhile.
	if unix.Fstatat(dirfd, name, &now, unix.AT_SYMLINK_NOFOLLOW) != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		return false, nil
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		return false, err
	}
	return true, nil
}

// kindOfMode names a file type from st_mode bits.
func kindOfMode(mode uint32) string {
	return elfread.KindOf(typeBits(mode))
}

func typeBits(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFLNK:
		return fs.ModeSymlink
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return 0
}

// LinkAtomic makes toName in toDir another name of fromName in fromDir (a
// hard link), replacing what toName was in one step: the link is made
// under a temporary name (IsTemp) renamed over toName.
func LinkAtomic(fromDir *os.File, fromName string, toDir *os.File, toName string) error {
	for i := 0; ; i++ {
		tmp := tempName(toName)
		err := unix.Linkat(int(fromDir.Fd()), fromName, int(toDir.Fd()), tmp, 0)
		if errors.Is(err, unix.EEXIST) && i < 100 {
			continue
		}
		if err != nil {
			return err
		}
		if err := unix.Renameat(int(toDir.Fd()), tmp, int(toDir.Fd()), toName); err != nil {
			_ = unix.Unlinkat(int(toDir.Fd()), tmp, 0)
			return err
		}
		return nil
	}
}
