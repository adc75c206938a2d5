package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// checkOutputs refuses, before anything is created, a run with OutDir
// that could not write every output where Options.OutDir puts it: an
// OutDir that is not a directory or cannot be written into; a directory
// argument whose copy would lie inside itself (as cp -r refuses); an
// output that is an input (by any path, symbolic link or hard link); two
// inputs written to one path (symbolic links in OutDir followed); a path
// that would be both an output file and the directory of another output;
// an output that exists and is not a regular file. Each refusal is one
// line naming the inputs and the output path.
func checkOutputs(paths []string, jobs []job, outDir string) error {
	type name struct {
		in, out string
		id      fileID
	}
	var all []name // every name written: first names and hard links
	for _, j := range jobs {
		all = append(all, name{j.in, j.out, j.id})
		for _, l := range j.links {
			all = append(all, name{l.in, l.out, j.id})
		}
	}
	c := &outChecker{dirs: map[string]dirPlace{}}
	if st, err := os.Stat(outDir); err == nil && !st.IsDir() {
		return fmt.Errorf("-o %s: is %s, not a directory (several inputs or a directory are written into directory %s)", outDir, elfread.KindOf(st.Mode()), outDir)
	}
	if p := c.dir(outDir); p.err != nil {
		return fmt.Errorf("-o %s: %v", outDir, p.err)
	}
	for _, p := range paths {
		if st, err := os.Lstat(p); err != nil || !st.IsDir() {
			continue
		}
		src, err := filepath.EvalSymlinks(p)
		if err == nil {
			src, err = filepath.Abs(src)
		}
		if err != nil {
			return err
		}
		dst := filepath.Join(outDir, filepath.Base(filepath.Clean(p)))
		d := c.dir(dst)
		if d.err != nil {
			return fmt.Errorf("%s would be written to %s, but %v", p, dst, d.err)
		}
		if within(d.path, src) {
			return fmt.Errorf("%s would be written into itself (%s)", p, dst)
		}
	}
	inputs := make(map[fileID]string, len(all))
	for _, j := range all {
		if _, ok := inputs[j.id]; !ok && j.id != (fileID{}) {
			inputs[j.id] = j.in
		}
	}
	type use struct{ in, out string }
	files := make(map[string]use, len(all)) // output file -> its input
	dirs := map[string]use{}                // directory an output goes into -> the first such output
	for _, j := range all {
		dst, err := elfwrite.ResolveOutput(j.out)
		if err != nil {
			// A component on the way is not a directory (Lstat's ENOTDIR):
			// say which.
			if d := c.dir(filepath.Dir(j.out)); d.err != nil {
				err = d.err
			}
			return fmt.Errorf("%s would be written to %s, but %v", j.in, j.out, err)
		}
		d := c.dir(filepath.Dir(dst))
		if d.err != nil {
			return fmt.Errorf("%s would be written to %s, but %v", j.in, j.out, d.err)
		}
		if st, err := os.Stat(dst); err == nil {
			if other, ok := inputs[idOf(st)]; ok {
				if other == j.in {
					return fmt.Errorf("%s would be written to %s, the input itself; -o writes elsewhere, --in-place replaces inputs", j.in, j.out)
				}
				return fmt.Errorf("%s would be written to %s, which is the input %s", j.in, j.out, other)
			}
		}
		key := filepath.Join(d.path, filepath.Base(dst))
		if prev, ok := files[key]; ok {
			where := j.out
			if prev.out != j.out {
				where = fmt.Sprintf("%s (as %s and %s)", dst, prev.out, j.out)
			}
			return fmt.Errorf("%s and %s would both be written to %s", prev.in, j.in, where)
		}
		if prev, ok := dirs[key]; ok {
			return fmt.Errorf("%s and %s conflict: %s would be both the output of %s and a directory holding %s", j.in, prev.in, j.out, j.in, prev.out)
		}
		files[key] = use{j.in, j.out}
		for a := filepath.Dir(key); ; a = filepath.Dir(a) {
			if _, ok := dirs[a]; ok {
				break
			}
			if prev, ok := files[a]; ok {
				return fmt.Errorf("%s and %s conflict: %s would be both the output of %s and a directory holding %s", prev.in, j.in, prev.out, prev.in, j.out)
			}
			dirs[a] = use{j.in, j.out}
			if a == filepath.Dir(a) {
				break
			}
		}
	}
	return nil
}

// within says whether path is root or lies below it (both absolute and
// clean).
func within(path, root string) bool {
	return path == root || strings.HasPrefix(path, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}

// dirPlace is where an output directory is, or will be once created: its
// absolute path with the symbolic links of the part that exists resolved.
type dirPlace struct {
	path string
	err  error // it cannot be created or written into
}

type outChecker struct {
	dirs map[string]dirPlace
}

// dir resolves an output directory: the nearest part of it that exists
// must be a directory (symbolic links followed) that can be written into.
func (c *outChecker) dir(dir string) dirPlace {
	if p, ok := c.dirs[dir]; ok {
		return p
	}
	var p dirPlace
	st, err := os.Stat(dir)
	switch {
	case err == nil && st.IsDir():
		if err := syscall.Access(dir, 2|1); err != nil { // W_OK|X_OK
			p.err = fmt.Errorf("cannot write into %s: %v", dir, err)
			break
		}
		if p.path, err = filepath.EvalSymlinks(dir); err == nil {
			p.path, err = filepath.Abs(p.path)
		}
		p.err = err
	case err == nil:
		p.err = fmt.Errorf("%s is %s, not a directory", dir, elfread.KindOf(st.Mode()))
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		if lst, lerr := os.Lstat(dir); lerr == nil {
			p.err = fmt.Errorf("%s is %s, not a directory", dir, elfread.KindOf(lst.Mode()))
			if lst.Mode()&fs.ModeSymlink != 0 {
				p.err = fmt.Errorf("%s is a dangling symbolic link", dir)
			}
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			p.err = err
			break
		}
		pp := c.dir(parent)
		p.err = pp.err
		p.path = filepath.Join(pp.path, filepath.Base(dir))
	default:
		p.err = err
	}
	c.dirs[dir] = p
	return p
}

// fileID identifies a file (device and inode).
type fileID struct{ dev, ino uint64 }

// idOf is st's fileID, or the zero fileID where the system gives none.
func idOf(st fs.FileInfo) fileID {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return fileID{uint64(sys.Dev), sys.Ino}
	}
	return fileID{}
}

// dirMaker creates output directories and remembers which it created, so
// that a run that fails can remove those it left empty.
type dirMaker struct {
	mu   sync.Mutex
	made []string // in the order created: parents before children
}

// mkdirAll is os.MkdirAll(dir, 0o755), remembering what it created.
func (m *dirMaker) mkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mkdirAllLocked(dir)
}

func (m *dirMaker) mkdirAllLocked(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if st.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := m.mkdirAllLocked(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if st, serr := os.Stat(dir); serr == nil && st.IsDir() {
			return nil // made meanwhile by someone else: not ours
		}
		return err
	}
	m.made = append(m.made, dir)
	return nil
}

// removeEmpty removes the directories mkdirAll created that are empty,
// children first. Only empty directories go (rmdir, never unlink), so
// whatever was written into them, by this run or anyone else, stays.
func (m *dirMaker) removeEmpty() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := len(m.made) - 1; i >= 0; i-- {
		_ = syscall.Rmdir(m.made[i])
	}
	m.made = nil
}
