package convert

import (
	"errors"
	"fmt"
)

// The errors of this package are values a caller tells apart with
// errors.Is and errors.As, and they say nothing of the command line: a
// command turns them into the hints its users need (which flag to give).
// An error about a file is an *Error naming it once, wrapping one of the
// errors below or a lower package's (elfread, cfi, elfwrite, relobj),
// none of which names the file; an *OptionError is about no file.

// Error is the failure of one file's conversion: the file's name and what
// went wrong. It names the file once, as os.PathError does.
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// OptionError is an Options value that cannot be used (Options.Validate).
type OptionError struct {
	Option string // the field of Options: "Version", "PCRel"
	Msg    string // what is wrong with it
}

func (e *OptionError) Error() string { return "option " + e.Option + ": " + e.Msg }

// unsupportedError is an input that is not converted: an ELF machine,
// class or type. It matches ErrUnsupported.
type unsupportedError struct {
	what   string // "machine EM_RISCV"
	detail string // what is taken instead, or why not
}

func (e *unsupportedError) Error() string {
	return fmt.Sprintf("unsupported %s (%s)", e.what, e.detail)
}

func (e *unsupportedError) Is(target error) bool { return target == ErrUnsupported }

// layoutError is a linked file in which the program header table cannot
// grow where strip, objcopy, eu-strip and patchelf expect it
// (elfwrite.LayoutError), when Options.FragileLayout is not set. It
// matches ErrLayout.
type layoutError struct {
	reason string // elfwrite's account of why
}

func (e *layoutError) Error() string {
	return ErrLayout.Error() + ": " + e.reason
}

func (e *layoutError) Is(target error) bool { return target == ErrLayout }

// rejectedError is a linked file whose output the reader that
// ForReader's options are for would drop whole (such as the kernel's for
// a file whose functions lie in two executable segments); nothing is
// written. It matches ErrUnsupported:
// the tree form counts such files as unsupported and leaves them alone.
type rejectedError struct {
	violation string // the first rule broken that makes the reader drop it
}

func (e *rejectedError) Error() string {
	return fmt.Sprintf("%v by the reader: %s; nothing written", ErrUnsupported, e.violation)
}

func (e *rejectedError) Is(target error) bool { return target == ErrUnsupported }

// ErrUnsupported is matched by the error for an input that is not
// converted: an ELF machine, class or type other than those taken, or an
// output the reader that ForReader's options are for would drop whole.
var ErrUnsupported = errors.New("unsupported")

// ErrLayout is matched by the error for a linked file in which the
// program header table cannot grow where strip, objcopy, eu-strip and
// patchelf expect it, when Options.FragileLayout is not set.
var ErrLayout = errors.New("no layout that strip, objcopy, eu-strip and patchelf keep")

// ErrHasSFrame is the error for an input that already has SFrame data
// when Options.Force is not set.
var ErrHasSFrame = errors.New("already has SFrame data (.sframe or PT_GNU_SFRAME)")

// ErrNoCFI is wrapped by the error for an input without call-frame
// information.
var ErrNoCFI = errors.New("no call-frame information (.eh_frame or .debug_frame) to convert")

// errChanged is the error for an input that shrank while it was read (a
// fault on its mapping).
var errChanged = errors.New("input file changed (truncated) while it was being read")
