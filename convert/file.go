package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"syscall"

	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/relobj"
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
// Close releases the mapping.
func OpenInput(name string) (*Input, error) {
	fh, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err // *PathError: "open NAME: reason"
	}
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
		return nil, fmt.Errorf("%s: %s, not a regular file", name, elfread.KindOf(st.Mode()))
	}
	in := &Input{Name: name, Mode: st.Mode(), Size: st.Size(), Info: st}
	keep = true
	in.file = fh
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		in.Dev, in.Ino = uint64(sys.Dev), sys.Ino
	}
	switch {
	case st.Size() == 0:
		return in, nil
	case st.Size() > maxInput:
		return nil, fmt.Errorf("%s: %d bytes: larger than the %d bytes accepted", name, st.Size(), int64(maxInput))
	}
	data, err := syscall.Mmap(int(fh.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		// Some file systems cannot map: read it instead.
		data = make([]byte, st.Size())
		if _, err := io.ReadFull(fh, data); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		in.Data = data
		return in, nil
	}
	in.Data, in.mapped = data, true
	return in, nil
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
	if merr := syscall.Munmap(d); merr != nil {
		return merr
	}
	return err
}

// ErrChanged is wrapped by the error for an input that shrank while it
// was read (a fault on its mapping).
var ErrChanged = errors.New("input file changed (truncated) while it was being read")

// ConvertInput converts a mapped input. A fault on the mapping (another
// process truncated the file) becomes an error wrapping ErrChanged
// instead of a crash.
func ConvertInput(in *Input, o Options) (res *Result, err error) {
	return convertInput(in, o, nil)
}

// convertInput is ConvertInput starting from the plan first (see convert).
func convertInput(in *Input, o Options, first *elfwrite.Plan) (res *Result, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); ok {
				res, err = nil, &Error{File: in.Name, Err: ErrChanged}
				return
			}
			panic(r)
		}
	}()
	return convert(in.Name, in.Data, o, true, first)
}

// WriteOutput writes data to dst through a temporary file in dst's
// directory that is renamed over dst (see elfwrite.WriteFileAtomic), with
// mode perm. When ctx is cancelled before the rename, the temporary file
// is removed and dst is untouched.
func WriteOutput(ctx context.Context, dst string, perm fs.FileMode, data []byte) error {
	err := elfwrite.WriteFileAtomic(dst, perm, func(w io.Writer) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
}

// WriteResult writes a conversion's output to dst as WriteOutput does.
// An output ConvertInput left unbuilt (a linked file) is written straight
// from the plan: the input's unchanged bytes are copied from in's file to
// the temporary file (copy_file_range), the rest assembled in a small
// buffer.
func WriteResult(ctx context.Context, dst string, perm fs.FileMode, in *Input, res *Result) error {
	if res.plan == nil {
		return WriteOutput(ctx, dst, perm, res.Output)
	}
	err := elfwrite.WriteFileAtomic(dst, perm, func(w io.Writer) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if f, ok := w.(*os.File); ok && in.file != nil {
			err = res.plan.WriteFile(f, in.file, res.SFrame)
		} else {
			err = res.plan.Write(w, res.SFrame)
		}
		if err != nil {
			return err
		}
		return ctx.Err()
	})
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
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
	var runs []elfwrite.Run
	var first *elfwrite.Plan
	if in.mapped && in.file != nil && !bytes.HasPrefix(in.Data, []byte(relobj.ArchiveMagic)) {
		opts := elfwrite.Options{Replace: o.Force}
		p, err := elfwrite.NewPlan(in.Data, 0, opts)
		var le *elfwrite.LayoutError
		if errors.As(err, &le) && o.FragileLayout {
			opts.AppendSegment = true
			p, err = elfwrite.NewPlan(in.Data, 0, opts)
		}
		if err == nil {
			runs, first = p.EarlyRuns(), p
		}
	}
	if len(runs) == 0 {
		res, err := ConvertInput(in, o)
		if err != nil || res.Unchanged {
			return res, err
		}
		return res, WriteResult(ctx, dst, perm, in, res)
	}

	final := make(chan *Result, 1) // nil: the conversion failed
	written := make(chan error, 1)
	go func() {
		written <- elfwrite.WriteFileAtomic(dst, perm, func(w io.Writer) (err error) {
			f, ok := w.(*os.File)
			if !ok {
				return fmt.Errorf("elfwrite gave a %T, not a file", w)
			}
			if err := elfwrite.CopyRuns(f, in.file, runs); err != nil {
				return err
			}
			res := <-final
			if res == nil {
				return errors.New("conversion failed")
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if res.plan == nil { // cannot happen for a linked file
				return fmt.Errorf("no output plan for %s", in.Name)
			}
			// The unchanged bytes come from the mapping too: a fault on
			// it is an error here as in ConvertInput.
			old := debug.SetPanicOnFault(true)
			defer func() {
				debug.SetPanicOnFault(old)
				if r := recover(); r != nil {
					if _, ok := r.(interface{ Addr() uintptr }); ok {
						err = ErrChanged
						return
					}
					panic(r)
				}
			}()
			if err := res.plan.WriteFileAfter(f, in.file, res.SFrame, runs); err != nil {
				return err
			}
			return ctx.Err()
		})
	}()
	res, err := convertInput(in, o, first)
	if err != nil || res.Unchanged {
		final <- nil
		<-written // the temporary file is gone
		return res, err
	}
	final <- res
	if err := <-written; err != nil {
		return res, fmt.Errorf("%s: %w", dst, err)
	}
	return res, nil
}
