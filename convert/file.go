package convert

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// Input is an input file mapped into memory read-only: its pages are read
// from the page cache when touched, so the parts of a large file that a
// conversion never looks at cost neither time nor private memory.
type Input struct {
	Name string
	Data []byte
	Mode fs.FileMode
	Size int64
	Dev  uint64 // device and inode: to recognise hard links
	Ino  uint64
	Info fs.FileInfo // from fstat of the file opened: for os.SameFile

	file   *os.File // kept open to copy unchanged bytes file to file
	mapped bool
}

// maxInput is the largest input accepted (ELF offsets are 64-bit, but the
// archive and relocatable-object writers build their output in memory).
const maxInput = 1 << 40

// OpenInput maps the regular file name (a symbolic link is followed to
// one). It refuses anything else: a FIFO with no writer would block, and
// /dev/zero would grow until out of memory. The file is opened without
// blocking and checked with fstat, so what is checked is what is read.
// Close releases the mapping. An error names the file once: the
// *fs.PathError of opening it, or an *Error.
func OpenInput(name string) (*Input, error) {
	fh, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err // *PathError: "open NAME: reason"
	}
	return OpenInputFile(fh, name)
}

// OpenInputFile is OpenInput for a file already open (opened without
// blocking, and, in a tree others can write to, without following a
// symbolic link: see internal/tree), named name in errors. It takes f
// over: Close closes it, and so does an error.
func OpenInputFile(fh *os.File, name string) (*Input, error) {
	keep := false
	defer func() {
		if !keep {
			fh.Close()
		}
	}()
	st, err := fh.Stat() // the file actually opened
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: name, Err: fmt.Errorf("%s, not a regular file", elfread.KindOf(st.Mode()))}
	}
	in := &Input{Name: name, Mode: st.Mode(), Size: st.Size(), Info: st}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		in.Dev, in.Ino = uint64(sys.Dev), sys.Ino
	}
	switch {
	case st.Size() == 0:
		keep = true
		in.file = fh
		return in, nil
	case st.Size() > maxInput:
		return nil, &Error{File: name, Err: fmt.Errorf("%d bytes: larger than the %d bytes accepted", st.Size(), int64(maxInput))}
	}
	if in.Data, in.mapped, err = mapFile(fh, st.Size()); err != nil {
		return nil, &Error{File: name, Err: err}
	}
	keep = true
	in.file = fh
	return in, nil
}

// File is the open input file (nil once closed).
func (in *Input) File() *os.File { return in.file }

// mapFile maps size bytes of fh read-only, or, on a file system that
// cannot map, reads them; mapped says which (a mapping is released with
// munmap).
func mapFile(fh *os.File, size int64) (data []byte, mapped bool, err error) {
	data, err = mmap(int(fh.Fd()), int(size))
	if err == nil {
		return data, true, nil
	}
	data = make([]byte, size)
	if _, err := fh.ReadAt(data, 0); err != nil {
		return nil, false, err
	}
	return data, false, nil
}

// Close releases the mapping and the file; Data must not be used
// afterwards.
func (in *Input) Close() error {
	var err error
	if in.file != nil {
		err = in.file.Close()
		in.file = nil
	}
	if !in.mapped {
		return err
	}
	in.mapped = false
	d := in.Data
	in.Data = nil
	if merr := munmap(d); merr != nil {
		return merr
	}
	return err
}

// ConvertInput converts a mapped input. A fault on the mapping (another
// process truncated the file) becomes an error wrapping ErrChanged
// instead of a crash. Errors about the file are *Error naming in.Name.
func ConvertInput(in *Input, o Options) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	return convertInput(in, o, nil)
}

// convertInput is ConvertInput with normalized options, starting from
// the plan early (see convertBytes).
func convertInput(in *Input, o Options, early *earlyWrite) (res *Result, err error) {
	if faulted(func() { res, err = convertBytes(in.Data, o, early) }) {
		res, err = nil, ErrChanged
	}
	if err != nil {
		return nil, &Error{File: in.Name, Err: err}
	}
	return res, nil
}

// WriteResult writes a conversion's output to dst through
// elfwrite.WriteFileAtomic, with mode perm. An output ConvertInput left
// unbuilt (a linked file) is written straight from the plan: the input's
// unchanged bytes are copied from in's file to the temporary file
// (copy_file_range), the rest assembled in a small buffer. When ctx is
// cancelled before the rename, the temporary file is removed and dst is
// untouched.
func WriteResult(ctx context.Context, dst string, perm fs.FileMode, in *Input, res *Result) error {
	return writeResult(ctx, pathDest(dst, perm), in, res)
}

// WriteResultTo is WriteResult to a destination in an open directory,
// which also says the new file's metadata (elfwrite.Dest).
func WriteResultTo(ctx context.Context, d elfwrite.Dest, in *Input, res *Result) error {
	return writeResult(ctx, openDest(d), in, res)
}

// dest is where an output goes: a path, or an elfwrite.Dest.
type dest struct {
	path string
	perm fs.FileMode
	d    *elfwrite.Dest
}

func pathDest(path string, perm fs.FileMode) dest { return dest{path: path, perm: perm} }
func openDest(d elfwrite.Dest) dest               { return dest{d: &d} }

func (t dest) write(ctx context.Context, fill func(f *os.File) error) error {
	if t.d != nil {
		return elfwrite.WriteAtomic(ctx, *t.d, fill)
	}
	return elfwrite.WriteFileAtomic(ctx, t.path, t.perm, fill)
}

func writeResult(ctx context.Context, t dest, in *Input, res *Result) error {
	return t.write(ctx, func(f *os.File) error {
		switch {
		case res.plan == nil:
			_, err := f.Write(res.Output)
			return err
		case in.file != nil:
			return res.plan.WriteFile(f, in.file, res.SFrame)
		}
		return res.plan.Write(f, res.SFrame)
	})
}

// ConvertWrite is ConvertInput followed by WriteResult(ctx, dst, perm,
// in, res), but for a linked file it starts writing before the
// conversion ends: the input bytes whose place in the output does not
// depend on the .sframe size (the loaded image, nearly all of the file)
// are copied to the temporary output file on another goroutine while the
// CFI is translated, and the rest is written once the section is encoded
// (elfwrite.EarlyRuns, WriteFileAfter). The output is the same as
// WriteResult's. A result with Unchanged set is returned unwritten, as
// ConvertInput returns it; a conversion error leaves no file behind and
// is returned as ConvertInput returns it, before any write error.
func ConvertWrite(ctx context.Context, in *Input, o Options, dst string, perm fs.FileMode) (*Result, error) {
	return convertWrite(ctx, in, o, pathDest(dst, perm))
}

// ConvertWriteTo is ConvertWrite to a destination in an open directory,
// which also says the new file's metadata (elfwrite.Dest).
func ConvertWriteTo(ctx context.Context, in *Input, o Options, d elfwrite.Dest) (*Result, error) {
	return convertWrite(ctx, in, o, openDest(d))
}

func convertWrite(ctx context.Context, in *Input, o Options, dst dest) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	if !in.mapped || in.file == nil || !bytes.HasPrefix(in.Data, []byte(elf.ELFMAG)) {
		return convertThenWrite(ctx, in, o, dst)
	}
	// The writer plans the output for an empty section (as Place does
	// first), hands the plan over for the conversion to start from, copies
	// what lies in front of the section and waits for the rest.
	planned := make(chan *elfwrite.Plan, 1) // nil: no plan, nothing copied early
	copying := make(chan struct{})          // closed when the early copy is over
	final := make(chan *Result, 1)          // nil: the conversion failed
	written := make(chan error, 1)          // errNoEarly: nothing was written
	go func() { written <- writeEarly(ctx, in, o, dst, planned, copying, final) }()
	res, err := convertInput(in, o, &earlyWrite{plan: sync.OnceValue(func() *elfwrite.Plan { return <-planned }), copying: copying})
	if err != nil || res.Unchanged {
		final <- nil
		<-written // the temporary file, if any, is gone
		return res, err
	}
	final <- res
	if werr := <-written; werr != errNoEarly {
		return res, werr
	}
	return res, writeResult(ctx, dst, in, res)
}

// writeEarly is ConvertWrite's writer: it plans in's output for an empty
// section and sends the plan on planned (nil when there is none, and
// then returns errNoEarly), copies the runs in front of the section to a
// temporary file, closes copying (whatever happens), waits for the
// conversion's result on final (nil: it failed) and writes the rest.
func writeEarly(ctx context.Context, in *Input, o Options, dst dest, planned chan<- *elfwrite.Plan, copying chan<- struct{}, final <-chan *Result) error {
	copied := sync.OnceFunc(func() { close(copying) })
	defer copied()
	var p *elfwrite.Plan
	var runs []elfwrite.Run
	if faulted(func() { p, runs = earlyPlan(in.Data, o) }) || len(runs) == 0 {
		planned <- nil
		return errNoEarly
	}
	planned <- p
	return dst.write(ctx, func(f *os.File) error {
		err := elfwrite.CopyRuns(f, in.file, runs)
		copied()
		if err != nil {
			return err
		}
		res := <-final
		if res == nil {
			return errors.New("conversion failed")
		}
		if res.plan == nil { // cannot happen for a linked file
			return errors.New("no output plan")
		}
		// The unchanged bytes come from the mapping too: a fault on it
		// is an error here as in ConvertInput.
		if faulted(func() { err = res.plan.WriteFileAfter(f, in.file, res.SFrame, runs) }) {
			return ErrChanged
		}
		return err
	})
}

// errNoEarly: ConvertWrite's writer found nothing to copy early.
var errNoEarly = errors.New("nothing to copy early")

// convertThenWrite is ConvertInput, then WriteResult unless there is
// nothing to write.
func convertThenWrite(ctx context.Context, in *Input, o Options, dst dest) (*Result, error) {
	res, err := convertInput(in, o, nil)
	if err != nil || res.Unchanged {
		return res, err
	}
	return res, writeResult(ctx, dst, in, res)
}

// earlyPlan returns the plan of a linked file for an empty section (with
// the layout convert will use: the fragile one only where the standard
// one is refused and o allows it) and the runs of input bytes in front of
// the section; nil when there is none (not a linked file, already has
// SFrame, ...: convert reports why).
func earlyPlan(in []byte, o Options) (*elfwrite.Plan, []elfwrite.Run) {
	opts := elfwrite.Options{Replace: o.Force}
	p, err := elfwrite.NewPlan(in, 0, opts)
	var le *elfwrite.LayoutError
	if errors.As(err, &le) && o.FragileLayout {
		opts.AppendSegment = true
		p, err = elfwrite.NewPlan(in, 0, opts)
	}
	if err != nil {
		return nil, nil
	}
	return p, p.EarlyRuns()
}

// faulted runs f and reports whether it faulted on a memory mapping (the
// input truncated meanwhile), which is then not a crash.
func faulted(f func()) (fault bool) {
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
