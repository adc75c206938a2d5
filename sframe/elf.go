package sframe

import (
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// ErrNoSection is wrapped by the *ELFError of OpenFile and OpenELF for an
// ELF file without SFrame data: no PT_GNU_SFRAME segment that a PT_LOAD
// maps, and no .sframe section (by type SHT_GNU_SFRAME or by name).
var ErrNoSection = errors.New("no .sframe section")

// ELFError is the error of OpenFile and OpenELF for an ELF file that has
// no SFrame data (Err wraps ErrNoSection), whose SFrame data Open refuses
// (Err is Open's *Error, whose Off is an offset in the section) or that
// cannot be read (Section is empty). It names the file once, as
// os.PathError does.
type ELFError struct {
	File    string // the file's name; "" for OpenELF
	Section string // ".sframe" (the section's name), or "PT_GNU_SFRAME"
	Offset  uint64 // the SFrame data's offset in the file
	Err     error
}

func (e *ELFError) Error() string {
	p := ""
	if e.File != "" {
		p = e.File + ": "
	}
	switch {
	case errors.Is(e.Err, ErrNoSection):
		return p + ErrNoSection.Error()
	case e.Section == "":
		return p + e.Err.Error()
	case e.Section == "PT_GNU_SFRAME":
		return fmt.Sprintf("%sPT_GNU_SFRAME at file offset %#x: %v", p, e.Offset, e.Err)
	}
	return fmt.Sprintf("%ssection %s at file offset %#x: %v", p, e.Section, e.Offset, e.Err)
}

func (e *ELFError) Unwrap() error { return e.Err }

// OpenFile reads the SFrame data of the named ELF file, as OpenELF finds
// it, and opens it for lookups (see Open). The file is closed on return:
// the Table holds a copy of the data. The file must be a regular file:
// the error of one that cannot be opened as an ELF file names it; every
// other is an *ELFError naming it.
func OpenFile(name string) (*Table, error) {
	f, err := elfread.Open(name)
	if err != nil {
		return nil, err // naming the file
	}
	defer f.Close()
	return openELF(f)
}

// OpenELF reads the SFrame data of an ELF file opened with debug/elf,
// the bytes a loader reads, and opens it for lookups (see Open). In a
// linked file that is the PT_GNU_SFRAME segment, read where the PT_LOAD
// covering its address maps it from; in a relocatable object, or a
// linked file whose PT_GNU_SFRAME is missing, empty or outside every
// PT_LOAD, the .sframe section (by type SHT_GNU_SFRAME, then by name),
// relocated in an object with every section at address 0; in a file
// without section headers, the PT_GNU_SFRAME segment's own bytes. The
// Table's Addr is the data's address. The Table holds a copy of the data;
// f may be closed afterwards.
//
// Every error is an *ELFError: for a file without SFrame data, data Open
// refuses, or an error reading the file (which says which part of the
// file and its offset).
func OpenELF(f *elf.File) (*Table, error) {
	return openELF(elfread.FromELF(f, ""))
}

func openELF(f *elfread.File) (*Table, error) {
	s, err := f.LoaderSFrame()
	if errors.Is(err, elfread.ErrNotFound) {
		return nil, &ELFError{File: f.Name, Section: ".sframe", Err: ErrNoSection}
	}
	if err != nil {
		return nil, &ELFError{File: f.Name, Err: err}
	}
	t, err := Open(s.Data, s.Addr)
	if err != nil {
		e := &ELFError{File: f.Name, Section: s.Name, Offset: s.Offset, Err: err}
		if s.Segment {
			e.Section = "PT_GNU_SFRAME"
		}
		return nil, e
	}
	return t, nil
}
