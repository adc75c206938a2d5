package main

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func newDumpCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "dump [--json] FILE...",
		Short: "Print the .sframe section of ELF files or raw SFrame sections",
		Long: `dump prints the SFrame section of each FILE in the layout of
GNU objdump --sframe (the header, then every function's start, size and
rows: the CFA, frame pointer and return address rules from each PC on),
or as JSON with --json. FILE is an ELF file with a .sframe section (or
PT_GNU_SFRAME segment), or a raw SFrame section such as objcopy -O binary
--only-section=.sframe extracts. SFrame versions 1, 2 and 3 are read, in
either byte order. The whole section is checked first: a malformed one is
an error and prints nothing.

In a linked file the section dumped is the one a loader reads, through
PT_GNU_SFRAME. When that cannot be followed (it holds no bytes, lies past
the end of the file or outside every PT_LOAD) the .sframe section is
dumped instead, after a warning line on stderr saying why: the kernel
reads SFrame data only through PT_GNU_SFRAME and would find none.`,
		Example: `  cfi2sframe dump /usr/lib/x86_64-linux-gnu/libc.so.6 | less
  cfi2sframe dump --json prog > prog-sframe.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, name := range args {
				if err := dumpFile(cmd.OutOrStdout(), cmd.ErrOrStderr(), name, asJSON); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of objdump-style text")
	return cmd
}

// dumped is an SFrame section loadSFrame read for dump.
type dumped struct {
	t       *sframe.Table // reads the file's bytes: call done when finished with it
	secName string
	format  string // objdump's name for the file's format
	// note, when the file's PT_GNU_SFRAME could not be followed, says why
	// and what was read instead (elfread.Section.Fallback).
	note string
	done func()
}

// loadSFrame reads FILE as a raw SFrame section or an ELF file and checks
// its SFrame section.
func loadSFrame(name string) (d *dumped, err error) {
	in, err := openMapped(name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			in.Close()
		}
	}()
	done := func() { in.Close() }
	data := in.Data
	if len(data) >= 2 && (binary.LittleEndian.Uint16(data) == sframe.Magic || binary.BigEndian.Uint16(data) == sframe.Magic) {
		t, err := checkedTable(data, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return &dumped{t: t, secName: ".sframe", format: "binary", done: done}, nil
	}
	// The bytes a loader reads (as sframe.OpenELF finds them), in place,
	// from the mapping.
	f, err := elfread.NewFileBytes(data, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	es, err := f.LoaderSFrame()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t, err := checkedTable(es.Data, es.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, es.Where(), err)
	}
	return &dumped{t: t, secName: es.Name, format: elfFormat(f.ELF), note: es.Fallback, done: done}, nil
}

// checkedTable opens an SFrame section and checks all of it, as dump and
// verify read all of it.
func checkedTable(b []byte, addr uint64) (*sframe.Table, error) {
	t, err := sframe.Open(b, addr)
	if err != nil {
		return nil, err
	}
	if err := t.Check(); err != nil {
		return nil, err
	}
	return t, nil
}

func elfFormat(f *elf.File) string {
	bits := "elf64"
	if f.Class == elf.ELFCLASS32 {
		bits = "elf32"
	}
	switch f.Machine {
	case elf.EM_X86_64:
		return bits + "-x86-64"
	case elf.EM_AARCH64:
		if f.ByteOrder == binary.BigEndian {
			return bits + "-bigaarch64"
		}
		return bits + "-littleaarch64"
	case elf.EM_S390:
		return bits + "-s390"
	}
	if f.ByteOrder == binary.BigEndian {
		return bits + "-big"
	}
	return bits + "-little"
}

// dumpFile dumps name's SFrame section to w. When the file's
// PT_GNU_SFRAME could not be followed and another copy was dumped (the
// kernel would find none), it says so on stderr first, in one line (the
// JSON has no place for it).
func dumpFile(w, stderr io.Writer, name string, asJSON bool) error {
	d, err := loadSFrame(name)
	if err != nil {
		return err
	}
	defer d.done()
	if d.note != "" {
		fmt.Fprintf(stderr, "%s: warning: %s\n", name, d.note)
	}
	if asJSON {
		return d.t.DumpJSON(w)
	}
	if _, err := fmt.Fprintf(w, "\n%s:     file format %s\n\nContents of the SFrame section %s:\n", name, d.format, d.secName); err != nil {
		return err
	}
	return d.t.Dump(w)
}
