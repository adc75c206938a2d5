package sframe

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// ErrNoSection is wrapped by the *ELFError of OpenFile, OpenELF and
// OpenELFFile for an ELF file without SFrame data: no .sframe section (by
// type SHT_GNU_SFRAME or by name) and, in a file without section headers,
// no PT_GNU_SFRAME segment. It is elfread.ErrNotFound.
var ErrNoSection = elfread.ErrNotFound

// ELFError is the error of OpenFile, OpenELF and OpenELFFile for an ELF
// file that has no SFrame section (Err wraps ErrNoSection), whose
// section Open refuses (Err is Open's *Error, whose Off is an offset in
// the section) or that cannot be read (Err is elfread's error; Section
// is empty). It names the file once, as os.PathError does.
type ELFError struct {
	File    string // the file's name (elfread.File.Name); "" for OpenELF
	Section string // the section's name (".sframe" also for PT_GNU_SFRAME)
	Offset  uint64 // the section's offset in the file
	Err     error
}

func (e *ELFError) Error() string {
	p := ""
	if e.File != "" {
		p = e.File + ": "
	}
	if errors.Is(e.Err, ErrNoSection) {
		return p + "no .sframe section"
	}
	if e.Section == "" {
		return p + e.Err.Error()
	}
	return fmt.Sprintf("%ssection %s at file offset %#x: %v", p, e.Section, e.Offset, e.Err)
}

func (e *ELFError) Unwrap() error { return e.Err }

// OpenFile reads the SFrame section of the named ELF file and opens it
// for lookups (see Open). The file is closed on return: the Table holds a
// copy of the section. The file must be a regular file (elfread.Open,
// whose errors name the file).
func OpenFile(name string) (*Table, error) {
	f, err := elfread.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return OpenELFFile(f)
}

// OpenELF reads the SFrame section of an ELF file opened with debug/elf
// and opens it for lookups (see Open). The Table holds a copy of the
// section; f may be closed afterwards.
func OpenELF(f *elf.File) (*Table, error) {
	return OpenELFFile(elfread.FromELF(f, ""))
}

// OpenELFFile is OpenELF for a file opened with elfread, which checks the
// section against the file's size and names the file in errors. The
// section is found as elfread's (*File).SFrame finds it: by type
// SHT_GNU_SFRAME, by name, or through PT_GNU_SFRAME when the file has no
// section headers; in a relocatable object it is relocated with every
// section at address 0. The Table's Addr is the section's address.
//
// Every error is an *ELFError naming f.Name: for a file without SFrame
// data, a section Open refuses, or an error reading the file (elfread's,
// which says which part of the file and its offset).
func OpenELFFile(f *elfread.File) (*Table, error) {
	s, err := f.SFrame()
	if errors.Is(err, ErrNoSection) {
		return nil, &ELFError{File: f.Name, Section: ".sframe", Err: ErrNoSection}
	}
	if err != nil {
		return nil, &ELFError{File: f.Name, Err: err}
	}
	t, err := Open(s.Data, s.Addr)
	if err != nil {
		return nil, &ELFError{File: f.Name, Section: s.Name, Offset: s.Offset, Err: err}
	}
	return t, nil
}
