package elfwrite

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces dst with what write produces, atomically: it
// writes to a temporary file in dst's directory, syncs it, gives it mode
// perm (permission bits plus setuid, setgid and sticky), and renames it
// over dst. If dst is a symbolic link, the file it points to is replaced
// and the link is kept. On any error the temporary file is removed and dst
// is left untouched. dst may be the file the input was read from
// (in-place conversion). Callers preserving the input's mode pass
// os.Stat(input).Mode().
func WriteFileAtomic(dst string, perm fs.FileMode, write func(w io.Writer) error) (err error) {
	if resolved, rerr := filepath.EvalSymlinks(dst); rerr == nil {
		dst = resolved
	} else if !errors.Is(rerr, fs.ErrNotExist) {
		return rerr
	}
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
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(perm & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(name, dst); err != nil {
		return err
	}
	// Make the rename durable; failure to sync the directory is not an
	// error for the file's contents, which are already in place.
	if d, derr := os.Open(filepath.Dir(dst)); derr == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
