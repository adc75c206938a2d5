package elfread_test

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

const fixtures = "../../testdata/sframe/"

func fixture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(fixtures, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("fixture %s not present", p)
	}
	return p
}

// firstStart decodes the .sframe section and returns the first function's
// start address.
func firstStart(t *testing.T, s *elfread.Section) uint64 {
	t.Helper()
	sec, err := sfsection.Decode(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.FDEs) == 0 {
		t.Fatal("no FDEs")
	}
	return sec.FDEs[0].Start
}

// TestRelocatedObjects checks function addresses after relocating .o
// files against what sid objdump prints for them.
func TestRelocatedObjects(t *testing.T) {
	tests := []struct {
		file  string
		start uint64
	}{
		{"v3-x86_64-O2.o", 0},                          // PCREL: R_X86_64_PC64
		{"v2-x86_64-O2.o", 0xffffffffffffffe4},         // no PCREL: 0 - 28
		{"v3-aarch64-O2-pacb.o", 0},                    // R_AARCH64_PREL64
		{"v3-aarch64be-O2-pacb.o", 0},                  // big-endian
		{"v2-aarch64be-O2-pacb.o", 0xffffffffffffffe4}, // R_AARCH64_PREL32 BE
		{"v3-s390x-funcs.o", 0},                        // R_390_PC64
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := elfread.Open(fixture(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s, err := f.SFrame()
			if err != nil {
				t.Fatal(err)
			}
			if got := firstStart(t, s); got != tt.start {
				t.Errorf("first function at %#x, want %#x", got, tt.start)
			}
		})
	}
}

// TestSegmentWithoutSections reads PT_GNU_SFRAME from a copy of a shared
// library whose section headers were stripped (objcopy
// --strip-section-headers) and compares it with the section.
func TestSegmentWithoutSections(t *testing.T) {
	f1, err := elfread.Open(fixture(t, "v3-x86_64-lib-lazy.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	want, err := f1.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	f2, err := elfread.Open("testdata/v3-x86_64-lib-lazy-nosections.so")
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	if len(f2.ELF.Sections) != 0 {
		t.Fatalf("test file still has %d sections", len(f2.ELF.Sections))
	}
	got, err := f2.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	if got.Addr != want.Addr || !bytes.Equal(got.Data, want.Data) {
		t.Errorf("segment at %#x (%d bytes), section at %#x (%d bytes)", got.Addr, len(got.Data), want.Addr, len(want.Data))
	}
	if _, err := f2.Section(".eh_frame"); !errors.Is(err, elfread.ErrNotFound) {
		t.Errorf("Section(.eh_frame) on a file without sections: %v", err)
	}
}

func TestSectionByNameAndType(t *testing.T) {
	f, err := elfread.Open(fixture(t, "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byName, err := f.Section(".sframe")
	if err != nil {
		t.Fatal(err)
	}
	byType, err := f.SectionByType(elfread.SHTGNUSFrame)
	if err != nil {
		t.Fatal(err)
	}
	if byName.Addr != byType.Addr || byName.Addr == 0 || !bytes.Equal(byName.Data, byType.Data) {
		t.Errorf("by name %#x/%d bytes, by type %#x/%d bytes", byName.Addr, len(byName.Data), byType.Addr, len(byType.Data))
	}
	eh, err := f.Section(".eh_frame")
	if err != nil || len(eh.Data) == 0 || eh.Machine != elf.EM_X86_64 {
		t.Errorf(".eh_frame: %v", err)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "notelf")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o644)
	truncated := filepath.Join(dir, "truncated")
	exe, err := os.ReadFile(fixture(t, "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(truncated, exe[:40], 0o644)
	self, err := os.Executable() // a Go binary: ELF without .sframe
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path  string
		want  string
		named bool // by Open (an *fs.PathError); errors of File's methods name no file
	}{
		{fifo, "a FIFO, not a regular file", true}, // refused, not waited on
		{dir, "a directory, not a regular file", true},
		{notELF, "not an ELF file", true},
		{truncated, "truncated", true},
		{filepath.Join(dir, "missing"), "no such file", true},
		{self, "no .sframe section", false},
	}
	for _, tt := range tests {
		f, err := elfread.Open(tt.path)
		if err == nil {
			_, err = f.SFrame()
			f.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line saying %q", tt.path, err, tt.want)
			continue
		}
		var pe *fs.PathError
		if named := errors.As(err, &pe); named != tt.named || strings.Count(err.Error(), tt.path) != map[bool]int{true: 1, false: 0}[tt.named] {
			t.Errorf("%s: error %q (%T): want the file named %v", tt.path, err, err, map[bool]string{true: "once", false: "not at all"}[tt.named])
		}
		var ee *elfread.Error
		if !tt.named && !errors.As(err, &ee) {
			t.Errorf("%s: error %v is not an *elfread.Error", tt.path, err)
		}
	}
}

// TestErrorWhere: errors about a part of the file say which part and its
// file offset, in hex, and wrap what tells them apart.
func TestErrorWhere(t *testing.T) {
	exe, err := os.ReadFile(fixture(t, "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = elfread.NewFileBytes(exe[:300], "x")
	var ee *elfread.Error
	if !errors.As(err, &ee) || !strings.HasPrefix(ee.Where, "program header table") || ee.Offset == 0 ||
		err.Error() != fmt.Sprintf("%s at file offset %#x: %s", ee.Where, ee.Offset, ee.Msg) || strings.Contains(err.Error(), "x:") {
		t.Errorf("truncated: %v (%+v), want the program header table at a hex offset, no file name", err, ee)
	}
	f, err := elfread.NewFileBytes(exe, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Section(".nope"); !errors.Is(err, elfread.ErrNotFound) || err.Error() != "no .nope section: section not found" {
		t.Errorf("missing section: %v", err)
	}
	z, err := elfread.NewFileBytes(hostile.Bomb(".debug_frame", hostile.Zlib, 8<<30, 4<<10), "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := z.Section(".debug_frame"); !errors.Is(err, elfread.ErrInflateLimit) || !strings.Contains(err.Error(), "compressed contents claim") ||
		strings.Contains(err.Error(), "--") {
		t.Errorf("bomb: %v, want ErrInflateLimit and no command-line flag", err)
	}
}

// TestFromELF: a file opened with debug/elf gives the section Open gives,
// with the offset its section header (or, without section headers, its
// PT_GNU_SFRAME header) names; errors do not name the file.
func TestFromELF(t *testing.T) {
	for _, name := range []string{fixture(t, "v3-x86_64-exe"), "testdata/v3-x86_64-lib-lazy-nosections.so"} {
		f, err := elfread.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := f.SFrame()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ef, err := elf.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer ef.Close()
		got, err := elfread.FromELF(ef, "").SFrame()
		if err != nil {
			t.Fatal(err)
		}
		off := uint64(0)
		if s := ef.Section(".sframe"); s != nil {
			off = s.Offset
		}
		for _, p := range ef.Progs {
			if p.Type == elfread.PTGNUSFrame && len(ef.Sections) == 0 {
				off = p.Off
			}
		}
		if got.Addr != want.Addr || got.Offset != want.Offset || got.Offset != off || off == 0 || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s: FromELF gives %#x at file offset %#x (%d bytes), Open %#x at %#x (%d bytes), header %#x",
				name, got.Addr, got.Offset, len(got.Data), want.Addr, want.Offset, len(want.Data), off)
		}
	}
	self, err := elf.Open(os.Args[0]) // a Go binary: ELF without .sframe
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	_, err = elfread.FromELF(self, "").SFrame()
	if !errors.Is(err, elfread.ErrNotFound) || strings.HasPrefix(err.Error(), ":") {
		t.Errorf("FromELF without a name, no .sframe: %v", err)
	}
	f := elfread.FromELF(self, "prog")
	if _, err = f.SFrame(); err == nil || strings.Contains(err.Error(), "prog") || f.Name != "prog" {
		t.Errorf("FromELF named prog, no .sframe: %v (Name %q): want the name kept, not in errors", err, f.Name)
	}
}

// TestLoaderSFrameFallback: a linked file whose PT_GNU_SFRAME a loader
// cannot read SFrame data through gives the .sframe section (or the
// segment's bytes at its file offset, without section headers) with a
// Fallback note saying why, or, when nothing stands in for it, an error
// wrapping ErrNoLoaderSFrame; a sound one or one a loader reads (even
// too short) gives the segment and no note. Read from memory and from a
// file alike.
func TestLoaderSFrameFallback(t *testing.T) {
	tests := []struct {
		name    string
		how     hostile.SFrameBreak
		segment bool
		problem string // the note's (or error's) first part, with {size} and {past} for hex numbers
		instead string // the rest of the note; "" for an error
	}{
		{"sound", hostile.SFrameSound, true, "", ""},
		{"too short for the section", hostile.SFrameShort, true, "", ""},
		{"past the end", hostile.SFramePastEnd, false, "PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)", "; read section .sframe instead, which the kernel would not find"},
		{"2 GiB", hostile.SFrameHuge, false, "PT_GNU_SFRAME (offset 0x170, size 0x80000000) lies past the end of the file ({size} bytes)", "; read section .sframe instead, which the kernel would not find"},
		{"empty", hostile.SFrameEmpty, false, "PT_GNU_SFRAME (offset 0x170, size 0) holds no bytes", "; read section .sframe instead, which the kernel would not find"},
		{"in no PT_LOAD", hostile.SFrameUnmapped, false, "PT_GNU_SFRAME (offset 0x170, size 0x34) at address 0x900000 lies outside every PT_LOAD's file-backed part", "; read section .sframe instead, which the kernel would not find"},
		{"in no PT_LOAD, no sections", hostile.SFrameUnmappedNoSection, false, "PT_GNU_SFRAME (offset 0x170, size 0x34) at address 0x900000 lies outside every PT_LOAD's file-backed part", "; read the bytes at its file offset 0x170 instead (there is no .sframe section), which the kernel would not find"},
		{"past the end, no sections", hostile.SFrameNoSection, false, "PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)", ""},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		b := hostile.SFrameLayout(tt.how)
		// {past}: where the generator moves the segment, 0x1000 past the
		// file's end.
		problem := strings.NewReplacer("{size}", fmt.Sprintf("%#x", len(b)), "{past}", fmt.Sprintf("%#x", len(b)+0x1000)).Replace(tt.problem)
		path := filepath.Join(dir, tt.name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, from := range []string{"memory", "file"} {
			t.Run(tt.name+"/"+from, func(t *testing.T) {
				var f *elfread.File
				var err error
				if from == "memory" {
					f, err = elfread.NewFileBytes(b, path)
				} else {
					f, err = elfread.Open(path)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				s, err := f.LoaderSFrame()
				if tt.problem != "" && tt.instead == "" {
					want := problem + ", and there is no .sframe section to read instead"
					if !errors.Is(err, elfread.ErrNoLoaderSFrame) || err.Error() != want {
						t.Errorf("error %v, want %q wrapping ErrNoLoaderSFrame", err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if s.Segment != tt.segment || len(s.Data) == 0 {
					t.Errorf("Segment %v (%d bytes), want %v", s.Segment, len(s.Data), tt.segment)
				}
				if want := problem + tt.instead; s.Fallback != want {
					t.Errorf("Fallback %q, want %q", s.Fallback, want)
				}
			})
		}
	}
}
