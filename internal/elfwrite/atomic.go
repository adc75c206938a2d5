package elfwrite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// ResolveOutput follows dst through symbolic links, dangling ones too, to
// the path that will be written: a symlink output is written through to
// its target, never replaced. It refuses a target that exists and is not
// a regular file (device, FIFO, directory, socket): renaming over it would
// replace, say, /dev/null with a regular file.
//
// Commands call it before doing the work, so a bad -o fails at once;
// WriteFileAtomic calls it again at the end.
func ResolveOutput(dst string) (string, error) {
	for i := 0; ; i++ {
		if i == 40 {
			return "", errors.New("too many levels of symbolic links")
		}
		st, err := os.Lstat(dst)
		if errors.Is(err, fs.ErrNotExist) {
			return dst, nil
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink == 0 {
			if !st.Mode().IsRegular() {
				return "", fmt.Errorf("is %s, not a regular file; refusing to replace it", elfread.KindOf(st.Mode()))
			}
			return dst, nil
		}
		target, err := os.Readlink(dst)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(dst), target)
		}
		dst = target
	}
}

// WriteFileAtomic replaces dst with what write writes to the file it is
// given, atomically, through WriteAtomic: the new file gets mode perm
// (permission bits plus setuid, setgid and sticky). If dst is a symbolic
// link, the file it points to is replaced (or created, for a dangling
// link) and the link is kept. If dst exists and is not a regular file (a
// device, FIFO, directory or socket) nothing is written and an error
// says so. The error names dst once ("dst: what went wrong"). dst may be
// the file the input was read from (in-place conversion). Callers
// preserving the input's mode pass os.Stat(input).Mode().
func WriteFileAtomic(ctx context.Context, dst string, perm fs.FileMode, write func(f *os.File) error) error {
	d, err := OpenDest(dst, perm)
	if err != nil {
		return err
	}
	defer d.Dir.Close()
	return WriteAtomic(ctx, d, write)
}

// OpenDest resolves dst (ResolveOutput) and opens its directory: the
// destination of a new file of mode perm at path dst. The caller closes
// its Dir. An error names dst.
func OpenDest(dst string, perm fs.FileMode) (Dest, error) {
	res, err := ResolveOutput(dst)
	if err != nil {
		return Dest{}, fmt.Errorf("%s: %w", dst, err)
	}
	dir, err := os.OpenFile(filepath.Dir(res), os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return Dest{}, fmt.Errorf("%s: %w", dst, err)
	}
	return Dest{Dir: dir, Name: filepath.Base(res), Path: dst, Perm: perm}, nil
}
