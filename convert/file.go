package convert

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
)

// File is an input opened for conversion: a linked ELF file, a
// relocatable object or a static archive, mapped read-only. Its pages are
// read from the page cache when touched, so the parts of a large file
// that a conversion never looks at cost neither time nor private memory,
// and a fault on the mapping (another process truncated the file) is an
// error saying the input changed, not a crash.
type File struct {
	in *mapped.File
}

// Open opens the regular file name (a symbolic link is followed to one)
// and maps it. It refuses anything else: a FIFO with no writer would
// block, and /dev/zero would grow until out of memory. The file is opened
// without blocking and checked with fstat, so what is checked is what is
// read. Close releases it. An error is an *Error naming the file once.
func Open(name string) (*File, error) {
	in, err := mapped.Open(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err) // the name once
		}
		return nil, &Error{File: name, Err: err}
	}
	return &File{in: in}, nil
}

// NewFile opens the size bytes of r, named name in errors, for
// conversion. An *os.File holding a regular file at least that long is
// mapped read-only, as Open maps files, and its unchanged bytes are
// copied file to file when the output is written; any other reader is
// read into memory first (the conversion reads the file as bytes). r is
// not closed by Close. An error is an *Error naming the file once.
func NewFile(name string, r io.ReaderAt, size int64) (*File, error) {
	in, err := mapped.Read(r, size, name)
	if err != nil {
		return nil, &Error{File: name, Err: err}
	}
	return &File{in: in}, nil
}

// Close releases the file's mapping (and the file, when Open opened it).
// A Result's Write needs the file open.
func (f *File) Close() error { return f.in.Close() }

// Convert converts the file: a linked file's output is laid out, an
// object's or archive's built in memory; Result.Write writes it. Options
// that cannot be used give an *OptionError; every other error is an
// *Error naming the file once.
func (f *File) Convert(o Options) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	return f.convert(o, nil)
}

// convert is Convert with normalized options, starting from the plan
// early (see convertBytes).
func (f *File) convert(o Options, early *earlyWrite) (res *Result, err error) {
	if mapped.Faulted(func() { res, err = convertBytes(f.in.Data, o, early) }) {
		res, err = nil, errChanged
	}
	if err != nil {
		return nil, &Error{File: f.in.Name, Err: err}
	}
	res.in = f
	return res, nil
}

// Write writes the output to w. A linked file's is written from its
// layout: the input's unchanged bytes, when w is an *os.File and the
// input was mapped from a file, are copied file to file
// (copy_file_range), the rest assembled in a small buffer. The input
// must still be open.
func (r *Result) Write(w io.Writer) error {
	if r.plan == nil {
		_, err := w.Write(r.output)
		return err
	}
	in := r.in.in
	if in.Data == nil && in.Size > 0 {
		return errors.New("the input is closed")
	}
	if f, ok := w.(*os.File); ok && in.File() != nil {
		return r.plan.WriteFile(f, in.File(), r.SFrame)
	}
	return r.plan.Write(w, r.SFrame)
}

// WriteFile converts the file and writes the output to name, atomically:
// a new file, with mode perm, that takes name only once it is complete
// (a symbolic link is written through; a device or FIFO is refused).
// For a linked file it starts writing before the conversion ends: the
// input bytes whose place in the output does not depend on the .sframe
// size (the loaded image, nearly all of the file) are copied to the new
// file on another goroutine while the CFI is translated, and the rest is
// written once the section is encoded. When ctx is cancelled before the
// new file takes name, name is untouched. A conversion error leaves no
// file behind and is returned as Convert returns it, before any write
// error; a write error names name once.
func (f *File) WriteFile(ctx context.Context, o Options, name string, perm fs.FileMode) (*Result, error) {
	return convertWrite(ctx, f, o, pathDest(name, perm))
}

// dest is where WriteFile puts the output: a path, and the new file's
// mode.
type dest struct {
	path string
	perm fs.FileMode
}

func pathDest(path string, perm fs.FileMode) dest { return dest{path: path, perm: perm} }

// write is the one atomic writer of every command (elfwrite).
func (t dest) write(ctx context.Context, fill func(f *os.File) error) error {
	return elfwrite.WriteFileAtomic(ctx, t.path, t.perm, fill)
}

func writeResult(ctx context.Context, t dest, res *Result) error {
	return t.write(ctx, func(f *os.File) error { return res.Write(f) })
}

func convertWrite(ctx context.Context, f *File, o Options, dst dest) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	in := f.in
	if !in.Mapped() || !bytes.HasPrefix(in.Data, []byte(elf.ELFMAG)) {
		return convertThenWrite(ctx, f, o, dst)
	}
	// The writer plans the output for an empty section (as Place does
	// first), hands the plan over for the conversion to start from, copies
	// what lies in front of the section and waits for the rest.
	planned := make(chan *elfwrite.Plan, 1) // nil: no plan, nothing copied early
	copying := make(chan struct{})          // closed when the early copy is over
	final := make(chan *Result, 1)          // nil: the conversion failed
	written := make(chan error, 1)          // errNoEarly: nothing was written
	go func() { written <- writeEarly(ctx, in, o, dst, planned, copying, final) }()
	res, err := f.convert(o, &earlyWrite{plan: sync.OnceValue(func() *elfwrite.Plan { return <-planned }), copying: copying})
	if err != nil || res.Unchanged != "" {
		final <- nil
		<-written // the temporary file, if any, is gone
		if err != nil {
			return res, err
		}
		return res, writeResult(ctx, dst, res)
	}
	final <- res
	if werr := <-written; werr != errNoEarly {
		return res, werr
	}
	return res, writeResult(ctx, dst, res)
}

// writeEarly is WriteFile's writer: it plans in's output for an empty
// section and sends the plan on planned (nil when there is none, and
// then returns errNoEarly), copies the runs in front of the section to a
// temporary file, closes copying (whatever happens), waits for the
// conversion's result on final (nil: it failed) and writes the rest.
func writeEarly(ctx context.Context, in *mapped.File, o Options, dst dest, planned chan<- *elfwrite.Plan, copying chan<- struct{}, final <-chan *Result) error {
	copied := sync.OnceFunc(func() { close(copying) })
	defer copied()
	var p *elfwrite.Plan
	var runs []elfwrite.Run
	if mapped.Faulted(func() { p, runs = earlyPlan(in.Data, o) }) || len(runs) == 0 {
		planned <- nil
		return errNoEarly
	}
	planned <- p
	return dst.write(ctx, func(f *os.File) error {
		err := elfwrite.CopyRuns(f, in.File(), runs)
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
		// is an error here as in Convert.
		if mapped.Faulted(func() { err = res.plan.WriteFileAfter(f, in.File(), res.SFrame, runs) }) {
			return errChanged
		}
		return err
	})
}

// errNoEarly: WriteFile's writer found nothing to copy early.
var errNoEarly = errors.New("nothing to copy early")

// convertThenWrite is Convert, then the write of its output.
func convertThenWrite(ctx context.Context, f *File, o Options, dst dest) (*Result, error) {
	res, err := f.convert(o, nil)
	if err != nil {
		return res, err
	}
	return res, writeResult(ctx, dst, res)
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
