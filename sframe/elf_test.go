package sframe_test

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestOpenFileAndELF: OpenFile and OpenELF give the table of the section
// elfread finds, and a file opened either way answers lookups alike.
func TestOpenFileAndELF(t *testing.T) {
	name := filepath.Join("..", "testdata", "sframe", "v3-x86_64-exe")
	f, err := elfread.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.SFrame()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	want, err := sframe.Open(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	byPath, err := sframe.OpenFile(name)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	byELF, err := sframe.OpenELF(ef)
	ef.Close() // the table holds a copy
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []*sframe.Table{byPath, byELF} {
		if got.Addr != want.Addr || !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("table at %#x %+v, want %#x %+v", got.Addr, got.Header, want.Addr, want.Header)
		}
		for pc := uint64(0x400350); pc < 0x400650; pc++ {
			g, gerr := got.Lookup(pc)
			w, werr := want.Lookup(pc)
			if g != w || gerr != werr {
				t.Fatalf("%#x: %+v, %v; want %+v, %v", pc, g, gerr, w, werr)
			}
		}
	}
}

// TestOpenFileErrors: a file without SFrame data and a malformed section
// give an *ELFError naming the file, the section and its file offset.
func TestOpenFileErrors(t *testing.T) {
	exe, err := os.ReadFile(filepath.Join("..", "testdata", "sframe", "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(filepath.Join("..", "testdata", "sframe", "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	off := ef.Section(".sframe").Offset
	ef.Close()
	bad := filepath.Join(t.TempDir(), "bad-magic")
	exe[off], exe[off+1] = 0, 0
	if err := os.WriteFile(bad, exe, 0o644); err != nil {
		t.Fatal(err)
	}

	_, err = sframe.OpenFile(os.Args[0]) // a Go binary: no .sframe
	var ee *sframe.ELFError
	if !errors.As(err, &ee) || !errors.Is(err, sframe.ErrNoSection) || ee.File != os.Args[0] ||
		err.Error() != os.Args[0]+": no .sframe section" {
		t.Errorf("file without .sframe: %v", err)
	}

	_, err = sframe.OpenFile(bad)
	var de *sframe.Error
	// A linked file's SFrame data is read as a loader reads it, through
	// PT_GNU_SFRAME.
	want := fmt.Sprintf("%s: PT_GNU_SFRAME at file offset %#x: bad magic 0x0000 at offset 0x0", bad, off)
	if !errors.As(err, &ee) || !errors.As(err, &de) || errors.Is(err, sframe.ErrNoSection) ||
		ee.Section != "PT_GNU_SFRAME" || ee.Offset != off || err.Error() != want {
		t.Errorf("bad magic: %v\nwant %s", err, want)
	}

	ef, err = elf.Open(bad)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	_, err = sframe.OpenELF(ef) // no file name to give
	if !errors.As(err, &ee) || !strings.HasPrefix(err.Error(), "PT_GNU_SFRAME at file offset ") {
		t.Errorf("OpenELF, bad magic: %v", err)
	}

	dir := t.TempDir()
	if _, err := sframe.OpenFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") || strings.Count(err.Error(), dir) != 1 {
		t.Errorf("a directory: %v", err)
	}

	// A file whose section cannot be read: an *ELFError naming it once,
	// with elfread's account of where. Without PT_GNU_SFRAME (its program
	// header made PT_NULL) the section is what is read.
	huge, err := os.ReadFile(filepath.Join("..", "testdata", "sframe", "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ef.Sections {
		if s.Name == ".sframe" { // sh_size of its 64-byte section header
			shoff := binary.LittleEndian.Uint64(huge[40:])
			binary.LittleEndian.PutUint64(huge[shoff+uint64(i)*64+32:], 1<<30)
		}
	}
	for i, p := range ef.Progs {
		if p.Type == elf.ProgType(elfread.PTGNUSFrame) { // p_type of its 56-byte program header
			phoff := binary.LittleEndian.Uint64(huge[32:])
			binary.LittleEndian.PutUint32(huge[phoff+uint64(i)*56:], uint32(elf.PT_NULL))
		}
	}
	name := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(name, huge, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = sframe.OpenFile(name)
	var re *elfread.Error
	if !errors.As(err, &ee) || !errors.As(err, &re) || ee.File != name || ee.Section != "" ||
		!strings.HasPrefix(err.Error(), name+": section .sframe at file offset 0x") || strings.Count(err.Error(), name) != 1 {
		t.Errorf("unreadable section: %v (%+v)", err, ee)
	}
}
