package convert

import (
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
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

// UnsupportedError is an input that is not converted: an ELF machine,
// class or type, or a kind of file a function does not take. It matches
// ErrUnsupported.
type UnsupportedError struct {
	What   string // "machine EM_RISCV", "static archive"
	Detail string // what is taken instead, or why not
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unsupported %s (%s)", e.What, e.Detail)
}

func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// LayoutError is a linked file in which the program header table cannot
// grow where strip, objcopy, eu-strip and patchelf expect it
// (elfwrite.LayoutError), when Options.FragileLayout is not set.
type LayoutError struct {
	Reason string // elfwrite's account of why
}

func (e *LayoutError) Error() string {
	return "no layout that strip, objcopy, eu-strip and patchelf keep: " + e.Reason
}

// RejectedError is a linked file whose output Options.For's reader would
// drop whole (a acceptance.Reject violation, such as the kernel's for a
// file whose functions lie in two executable segments); nothing is
// written. It matches ErrUnsupported: the tree form counts such files as
// unsupported and leaves them alone.
type RejectedError struct {
	Violation acceptance.Violation // the first rule of kind acceptance.Reject broken
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%v by the reader: %v; nothing written", ErrUnsupported, e.Violation)
}

func (e *RejectedError) Is(target error) bool { return target == ErrUnsupported }

// ErrUnsupported is matched by every *UnsupportedError and
// *RejectedError.
var ErrUnsupported = errors.New("unsupported")

// ErrHasSFrame is the error for an input that already has SFrame data
// when Options.Force is not set.
var ErrHasSFrame = errors.New("already has SFrame data (.sframe or PT_GNU_SFRAME)")

// ErrNoCFI is wrapped by the error for an input without call-frame
// information.
var ErrNoCFI = errors.New("no call-frame information (.eh_frame or .debug_frame) to convert")

// ErrChanged is the error for an input that shrank while it was read (a
// fault on its mapping).
var ErrChanged = errors.New("input file changed (truncated) while it was being read")
