package elfwrite

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Scratch makes a temporary file for the run's own use (a spooled layer
// or package member, a large file's input or output) in dir, or in
// os.TempDir() when dir is "". It has no name from birth (O_TMPFILE), so
// that no kill at any instant leaves it behind; on a file system without
// unnamed files it gets a fresh name that is removed before Scratch
// returns. The file is open for reading and writing; closing it frees it.
func Scratch(dir string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(unnamed)"), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	f, err := os.CreateTemp(dir, "cfi2sframe-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
