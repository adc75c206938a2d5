package elfwrite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cfi2sframe/cfi2sframe/elfread"
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
// given, atomically: write fills a temporary file in dst's directory,
// which gets mode perm (permission bits plus setuid, setgid and sticky)
// and is renamed over dst. It is the one writer of every command's
// outputs. When dst exists, the new contents are synced before the
// rename and the directory after it, so that a crash leaves either the
// old file or the new one; a new dst is not synced, as cp, ld and
// objcopy do not (a crash can then leave it empty, but nothing is lost).
// If dst is a symbolic link, the file it points to is replaced (or
// created, for a dangling link) and the link is kept. If dst exists and
// is not a regular file (a device, FIFO, directory or socket) nothing is
// written and an error says so. When ctx is done before write is called
// or before the rename, nothing is renamed and the error wraps
// ctx.Err(). On any error the temporary file is removed and dst is left
// untouched; the error names dst once ("dst: what went wrong"). dst may
// be the file the input was read from (in-place conversion). Callers
// preserving the input's mode pass os.Stat(input).Mode().
func WriteFileAtomic(ctx context.Context, dst string, perm fs.FileMode, write func(f *os.File) error) error {
	if err := writeFileAtomic(ctx, dst, perm, write); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
}

func writeFileAtomic(ctx context.Context, dst string, perm fs.FileMode, write func(f *os.File) error) (err error) {
	if dst, err = ResolveOutput(dst); err != nil {
		return err
	}
	_, statErr := os.Lstat(dst)
	replacing := statErr == nil
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if err = ctx.Err(); err != nil {
		return err
	}
	if err = write(tmp); err != nil {
		return err
	}
	if err = ctx.Err(); err != nil {
		return err
	}
	if err = tmp.Chmod(perm & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return err
	}
	if replacing {
		if err = tmp.Sync(); err != nil {
			return err
		}
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(name, dst); err != nil {
		return err
	}
	// Make the rename durable; failure to sync the directory is not an
	// error for the file's contents, which are already in place.
	if !replacing {
		return nil
	}
	if d, derr := os.Open(filepath.Dir(dst)); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
