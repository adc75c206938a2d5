package tree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/fsmeta"
)

// The copy OutDir receives is what cp -a makes: beside the files (each
// written by one()), every directory, symbolic link (dangling ones too),
// device, FIFO and socket, with owner, group, mode, extended attributes
// and times, and hard links as hard links (relink). Directories are made
// as the files need them, mode 0700 (nobody else enters them while they
// fill), and given their own metadata and times last, deepest first, once
// nothing more is written into them.

// openOutputs creates OutDir and the copy of each directory argument in
// it (recording them in mk), and opens them for the run.
func openOutputs(mk *dirMaker, roots []*root, outDir string) error {
	if err := mk.mkdirAll(outDir); err != nil {
		return err
	}
	for _, r := range roots {
		if err := mk.mkdirAll(r.out); err != nil {
			return err
		}
		flags := os.O_RDONLY | unix.O_DIRECTORY
		if r.isDir {
			flags |= unix.O_NOFOLLOW // OutDir/base(D) is ours: never a link
		}
		f, err := os.OpenFile(r.out, flags, 0)
		if err != nil {
			return err
		}
		r.outTop = f
	}
	return nil
}

// below opens the directory rel below r's output top, creating what is
// missing (mode 0700; finishCopy gives the copy its modes) without
// following links.
func (m *dirMaker) below(r *root, rel string) (*os.File, error) {
	return openBelow(r.outTop, rel, r.out, m.mkdirAt)
}

// mkdirAt makes name in parent (shown as display), mode 0700, unless it
// is there, remembering it for removeEmpty.
func (m *dirMaker) mkdirAt(parent *os.File, name, display string) error {
	err := unix.Mkdirat(int(parent.Fd()), name, 0o700)
	switch {
	case err == nil:
		m.mu.Lock()
		m.made = append(m.made, display)
		m.mu.Unlock()
	case !errors.Is(err, unix.EEXIST):
		return &os.PathError{Op: "mkdir", Path: display, Err: err}
	}
	return nil
}

// finishCopy completes the copy of a directory argument once its files
// are written: the directories no file needed, symbolic links, devices,
// FIFOs and sockets; temporary files of killed runs (whose writer is
// gone) are removed; then every directory gets its metadata and times,
// deepest first. What fails is reported as a failed record.
func finishCopy(r *root, mk *dirMaker, report func(Record), k *Kept) {
	if !r.isDir {
		return
	}
	fo := fsmeta.Options{Times: true, BestEffort: euid != 0}
	fail := func(rel string, err error) {
		p := filepath.Join(r.display, rel)
		err = fmt.Errorf("%s: copying to %s: %w", p, filepath.Join(r.out, rel), err)
		report(Record{File: p, Outcome: Failed, Error: err.Error(), Err: err})
	}
	var dirs []dirEntry
	for _, e := range r.entries {
		if e.meta.Mode&unix.S_IFMT == unix.S_IFDIR {
			d, err := mk.below(r, e.rel)
			if err != nil {
				fail(e.rel, err)
				continue
			}
			removeStale(d, k)
			d.Close()
			dirs = append(dirs, e)
			continue
		}
		parent, err := mk.below(r, filepath.Dir(e.rel))
		if err != nil {
			fail(e.rel, err)
			continue
		}
		if err := makeEntry(parent, filepath.Base(e.rel), e, fo); err != nil {
			fail(e.rel, err)
		} else if e.meta.Mode&unix.S_IFMT == unix.S_IFLNK {
			k.Symlinks++
		} else {
			k.Devices++
		}
		parent.Close()
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		e := dirs[i]
		d, err := mk.below(r, e.rel)
		if err == nil {
			_, err = fsmeta.Apply(d, e.meta, fo)
			d.Close()
		}
		if err != nil {
			fail(e.rel, err)
			continue
		}
		k.Dirs++
	}
}

// makeEntry makes name in dir again as e (a symbolic link, device, FIFO
// or socket) with its metadata: under a temporary name renamed over name.
func makeEntry(dir *os.File, name string, e dirEntry, fo fsmeta.Options) error {
	tmp := entryTemp(name)
	fd := int(dir.Fd())
	_ = unix.Unlinkat(fd, tmp, 0)
	var err error
	if e.meta.Mode&unix.S_IFMT == unix.S_IFLNK {
		err = unix.Symlinkat(e.target, fd, tmp)
	} else {
		err = unix.Mknodat(fd, tmp, e.meta.Mode&(unix.S_IFMT|0o777), int(e.meta.Rdev))
	}
	if err != nil {
		return err
	}
	if _, err = fsmeta.ApplyAt(dir, tmp, e.meta, fo); err == nil {
		err = unix.Renameat(fd, tmp, fd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(fd, tmp, 0)
	}
	return err
}

// entrySuffix ends the temporary name under which makeEntry makes an
// entry: finishCopy runs once at a time in a copy, so one left behind is
// a killed run's.
const entrySuffix = elfwrite.TempMarker + "entry"

func entryTemp(name string) string {
	if len(name) > 200 { // NAME_MAX is 255
		name = name[:200]
	}
	return "." + name + entrySuffix
}

// removeStale removes the temporary files of killed runs in dir: files
// whose writer is gone, and entries makeEntry left.
func removeStale(dir *os.File, k *Kept) {
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return
	}
	for _, n := range names {
		removed := false
		switch {
		case !elfwrite.IsTemp(n):
		case strings.HasSuffix(n, entrySuffix):
			removed = unix.Unlinkat(int(dir.Fd()), n, 0) == nil
		default:
			removed, _ = elfwrite.RemoveStale(dir, n)
		}
		if removed {
			k.Stale++
		}
	}
}

// copySparse copies size bytes of src to dst, leaving holes where src has
// them (SEEK_DATA, SEEK_HOLE), so that a sparse file stays sparse; the
// data runs are copied file to file (copy_file_range).
func copySparse(dst, src *os.File, size int64) error {
	sfd := int(src.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole from here
		}
		if err != nil {
			return copyAll(dst, src, size) // no SEEK_DATA here
		}
		hole, err := unix.Seek(sfd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		hole = min(hole, size)
		for pos := data; pos < hole; {
			in, out := pos, pos
			n, err := unix.CopyFileRange(sfd, &in, int(dst.Fd()), &out, int(hole-pos), 0)
			if err != nil || n == 0 {
				if _, err := io.Copy(io.NewOffsetWriter(dst, pos), io.NewSectionReader(src, pos, hole-pos)); err != nil {
					return err
				}
				break
			}
			pos += int64(n)
		}
		off = hole
	}
	return dst.Truncate(size)
}

func copyAll(dst, src *os.File, size int64) error {
	_, err := io.Copy(io.NewOffsetWriter(dst, 0), io.NewSectionReader(src, 0, size))
	if err == nil {
		err = dst.Truncate(size)
	}
	return err
}
