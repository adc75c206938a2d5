// Package mapped maps input files into memory read-only, for every
// command that reads one (convert, verify, report, dump and the tree
// form): a file's pages are read from the page cache when touched, so the
// parts of a large file a command never looks at cost neither time nor
// private memory. A fault on a mapping (the file truncated by someone
// else meanwhile) is caught by Faulted, not a crash.
package mapped

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// File is an input file's bytes: mapped, or read when the file system
// cannot map or the reader is no file.
type File struct {
	Name string
	Data []byte
	Mode fs.FileMode
	Size int64
	Dev  uint64 // device and inode: to recognise hard links
	Ino  uint64
	Info fs.FileInfo // from fstat of the file opened: for os.SameFile

	file   *os.File // to copy unchanged bytes file to file
	owned  bool     // Close closes file
	mapped bool
}

// MaxSize is the largest input accepted (ELF offsets are 64-bit, but the
// archive and relocatable-object writers build their output in memory).
const MaxSize = 1 << 40

// Open maps the regular file name (a symbolic link is followed to one).
// It refuses anything else: a FIFO with no writer would block, and
// /dev/zero would grow until out of memory. The file is opened without
// blocking and checked with fstat, so what is checked is what is read.
// Close releases the mapping. The error of opening the file is an
// *fs.PathError naming it; the others do not name it.
func Open(name string) (*File, error) {
	fh, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err // *PathError: "open NAME: reason"
	}
	return OpenFile(fh, name)
}

// OpenFile is Open for a file already open (opened without blocking,
// and, in a tree others can write to, without following a symbolic link:
// see internal/tree), named name. It takes fh over: Close closes it, and
// so does an error. Its errors do not name the file.
func OpenFile(fh *os.File, name string) (*File, error) {
	in, err := mapOpen(fh, name)
	if err != nil {
		fh.Close()
		return nil, err
	}
	in.owned = true
	return in, nil
}

// Read maps the size bytes of r when r is an *os.File holding a regular
// file at least that long (not taken over: the caller closes it), and
// reads them into memory otherwise. Its errors do not name the file.
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	switch {
	case size < 0:
		return nil, fmt.Errorf("negative size %d", size)
	case size > MaxSize:
		return nil, fmt.Errorf("%d bytes: larger than the %d bytes accepted", size, int64(MaxSize))
	}
	in := &File{Name: name, Size: size}
	if fh, ok := r.(*os.File); ok && size > 0 {
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() && st.Size() >= size {
			data, mapped, err := mapFile(fh, size)
			if err != nil {
				return nil, err
			}
			in.Data, in.mapped, in.file = data, mapped, fh
			in.Mode, in.Info = st.Mode(), st
			return in, nil
		}
	}
	in.Data = make([]byte, size)
	// A reader may say io.EOF with the last byte.
	if n, err := r.ReadAt(in.Data, 0); err != nil && !(err == io.EOF && int64(n) == size) {
		return nil, fmt.Errorf("reading %d bytes: %w", size, err)
	}
	return in, nil
}

// mapOpen maps the regular file fh, which it does not close.
func mapOpen(fh *os.File, name string) (*File, error) {
	st, err := fh.Stat() // the file actually opened
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s, not a regular file", elfread.KindOf(st.Mode()))
	}
	in := &File{Name: name, Mode: st.Mode(), Size: st.Size(), Info: st, file: fh}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		in.Dev, in.Ino = uint64(sys.Dev), sys.Ino
	}
	switch {
	case st.Size() == 0:
		return in, nil
	case st.Size() > MaxSize:
		return nil, fmt.Errorf("%d bytes: larger than the %d bytes accepted", st.Size(), int64(MaxSize))
	}
	if in.Data, in.mapped, err = mapFile(fh, st.Size()); err != nil {
		return nil, err
	}
	return in, nil
}

// File is the open input file: nil when the bytes were read from another
// reader, or once closed.
func (in *File) File() *os.File { return in.file }

// mapFile maps size bytes of fh read-only, or, on a file system that
// cannot map, reads them; mapped says which (a mapping is released with
// munmap).
func mapFile(fh *os.File, size int64) (data []byte, mapped bool, err error) {
	data, err = mmap(int(fh.Fd()), int(size))
	if err == nil {
		live.add(data)
		return data, true, nil
	}
	data = make([]byte, size)
	if _, err := fh.ReadAt(data, 0); err != nil {
		return nil, false, err
	}
	return data, false, nil
}

// Close releases the mapping, and the file when it was taken over; Data
// must not be used afterwards.
func (in *File) Close() error {
	var err error
	if in.file != nil && in.owned {
		err = in.file.Close()
	}
	in.file = nil
	if !in.mapped {
		in.Data = nil
		return err
	}
	in.mapped = false
	d := in.Data
	in.Data = nil
	live.remove(d)
	if merr := munmap(d); merr != nil {
		return merr
	}
	return err
}

// Mapped says whether Data is a mapping of File.
func (in *File) Mapped() bool { return in.mapped && in.file != nil }

// Faulted runs f and reports whether it faulted on a memory mapping (the
// input truncated meanwhile), which is then not a crash.
func Faulted(f func()) (fault bool) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				fault = true
				return
			}
			panic(r)
		}
	}()
	f()
	return false
}

// Drop gives the pages wholly inside b back: b must lie in the Data of a
// File still open, and is otherwise left alone (bytes read into memory,
// say, which dropping would zero). A mapped file's pages stay in the page
// cache, so dropping costs no data: it only takes them out of the
// process's resident set (which peak RSS counts), and touching them again
// maps them again. A reader that goes through a large mapping once, in
// order, drops what it has passed to keep its RSS to what it reads now.
func Drop(b []byte) {
	if len(b) == 0 {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	page := uintptr(os.Getpagesize())
	lo = (lo + page - 1) &^ (page - 1)
	hi &^= page - 1
	if hi <= lo {
		return
	}
	live.Lock()
	defer live.Unlock() // the mapping is not unmapped meanwhile
	if live.holds(lo, hi) {
		dontneed(lo, hi-lo)
	}
}

// live is the mappings of the Files open, by address: those Drop may
// drop pages of.
var live liveMaps

type liveMaps struct {
	sync.Mutex
	m map[uintptr]uintptr // start to end
}

func (l *liveMaps) add(b []byte) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	l.Lock()
	if l.m == nil {
		l.m = make(map[uintptr]uintptr)
	}
	l.m[p] = p + uintptr(len(b))
	l.Unlock()
}

func (l *liveMaps) remove(b []byte) {
	l.Lock()
	delete(l.m, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	l.Unlock()
}

// holds says whether [lo, hi) lies in one mapping; l is locked.
func (l *liveMaps) holds(lo, hi uintptr) bool {
	for start, end := range l.m {
		if lo >= start && hi <= end {
			return true
		}
	}
	return false
}
