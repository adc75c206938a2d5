package convert

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// SFrame converts a linked ELF file (an executable or shared library) in
// memory and writes nothing: the Result holds the .sframe section that
// converting the file with the same options writes into the output
// (SFrame, byte for byte), the address it is encoded for there (Addr: the
// functions keep the file's own addresses; the section's own address
// matters to PC-relative start fields) and what the conversion found
// (Translate's diagnostics and counts, CFIErrors, FDEs, Reader, Warning).
// Output is nil. It runs the pipeline Convert runs (cfi → translate →
// sframe encoder, the output planned by elfwrite for the section's
// address, not built), so the memory it takes is the command's: one FDE
// executed at a time, the section's bytes, and the input.
//
// The input is the size bytes of r, named name in errors. An *os.File
// holding a regular file is mapped read-only, as the command maps its
// inputs; any other reader is read into memory first (the pipeline reads
// the file as bytes). For an *elf.File, pass the reader it was opened
// from.
//
// Options that cannot be used give an *OptionError; every other error is
// an *Error naming the file once. Relocatable objects and archives are
// refused (an *UnsupportedError): their .sframe means nothing without
// the relocations in the file (use Convert). A file that already has
// SFrame data is refused (ErrHasSFrame) unless o.Force; one where the
// program header table cannot grow in place (*LayoutError) unless
// o.FragileLayout, whose layout then gives the address.
func SFrame(name string, r io.ReaderAt, size int64, o Options) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	in, err := readInput(r, size)
	if err != nil {
		return nil, &Error{File: name, Err: err}
	}
	in.Name = name
	defer in.Close() // the mapping; an *os.File is the caller's
	return sframeOf(in, o)
}

// readInput maps the size bytes of r when r is an *os.File holding a
// regular file at least that long, and reads them otherwise.
func readInput(r io.ReaderAt, size int64) (*Input, error) {
	switch {
	case size < 0:
		return nil, fmt.Errorf("negative size %d", size)
	case size > maxInput:
		return nil, fmt.Errorf("%d bytes: larger than the %d bytes accepted", size, int64(maxInput))
	}
	in := &Input{Size: size}
	if fh, ok := r.(*os.File); ok && size > 0 {
		if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() && st.Size() >= size {
			data, mapped, err := mapFile(fh, size)
			if err != nil {
				return nil, err
			}
			in.Data, in.mapped = data, mapped
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

// SFrameFile is SFrame on the named file, which must be a regular file
// (a symbolic link is followed to one); it is mapped as OpenInput maps
// the command's inputs.
func SFrameFile(name string, o Options) (*Result, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	in, err := OpenInput(name)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &Error{File: name, Err: fmt.Errorf("%s: %w", pe.Op, pe.Err)} // the name once
		}
		return nil, err
	}
	defer in.Close()
	return sframeOf(in, o)
}

// sframeOf is SFrame on an input in memory: the linked-file conversion,
// planned and not built, its plan dropped, as it refers to the input.
func sframeOf(in *Input, o Options) (*Result, error) {
	if isArchive(in.Data) {
		return nil, &Error{File: in.Name, Err: &UnsupportedError{What: "static archive", Detail: "it has no .sframe of its own: its members' need their relocations; convert the archive"}}
	}
	if t, ok := elfType(in.Data); ok && t == elf.ET_REL {
		return nil, &Error{File: in.Name, Err: &UnsupportedError{What: "relocatable object", Detail: "its .sframe needs its relocations; convert the object"}}
	}
	res, err := convertInput(in, o, nil)
	if err != nil {
		return nil, err
	}
	res.plan, res.Output = nil, nil
	return res, nil
}

// elfType reads e_type from an ELF header, if there is one.
func elfType(b []byte) (elf.Type, bool) {
	if len(b) < 18 || !bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
		return 0, false
	}
	switch elf.Data(b[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		return elf.Type(uint16(b[16]) | uint16(b[17])<<8), true
	case elf.ELFDATA2MSB:
		return elf.Type(uint16(b[17]) | uint16(b[16])<<8), true
	}
	return 0, false
}
