package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// segmentDir writes hostile.SFrameLayout's files into a fresh directory,
// with a converted program (hello.v3) and a GNU-linked one (gnu), and
// returns it and a replacer for the numbers the messages hold: {size},
// the generated files' size, and {past}, where they move PT_GNU_SFRAME
// (0x1000 past the end).
func segmentDir(t *testing.T) (string, *strings.Replacer) {
	t.Helper()
	dir := t.TempDir()
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	gnu, err := os.ReadFile("../../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"hello.v3": withSFrame(t, hello, func(sframe.Function) bool { return true }),
		"gnu":      gnu,
	}
	size := 0
	for name, how := range map[string]hostile.SFrameBreak{
		"sound": hostile.SFrameSound, "past-end": hostile.SFramePastEnd, "huge": hostile.SFrameHuge, "empty": hostile.SFrameEmpty,
		"short": hostile.SFrameShort, "unmapped": hostile.SFrameUnmapped, "unmapped-nosections": hostile.SFrameUnmappedNoSection,
		"nosections": hostile.SFrameNoSection,
	} {
		files[name] = hostile.SFrameLayout(how)
		if how == hostile.SFrameSound {
			size = len(files[name])
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, strings.NewReplacer("{size}", fmt.Sprintf("%#x", size), "{past}", fmt.Sprintf("%#x", size+0x1000))
}

// TestDumpBrokenSFrameSegment: dump of a file whose PT_GNU_SFRAME the
// kernel cannot read SFrame data through dumps what it reads instead and
// says so, once, in one line on stderr naming the file; exit 0, as the
// data is sound. With nothing to read instead it fails. A sound file,
// converted or GNU-linked, gets no such line.
func TestDumpBrokenSFrameSegment(t *testing.T) {
	dir, nums := segmentDir(t)
	const instead = "; read section .sframe instead, which the kernel would not find"
	tests := []struct {
		file   string
		json   bool
		code   int
		stderr string // the one line, exactly
	}{
		{file: "sound"},
		{file: "hello.v3"},
		{file: "gnu"},
		{file: "gnu", json: true},
		{file: "past-end", stderr: "past-end: warning: PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)" + instead},
		{file: "past-end", json: true, stderr: "past-end: warning: PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)" + instead},
		{file: "huge", stderr: "huge: warning: PT_GNU_SFRAME (offset 0x170, size 0x80000000) lies past the end of the file ({size} bytes)" + instead},
		{file: "empty", stderr: "empty: warning: PT_GNU_SFRAME (offset 0x170, size 0) holds no bytes" + instead},
		{file: "unmapped", stderr: "unmapped: warning: PT_GNU_SFRAME (offset 0x170, size 0x34) at address 0x900000 lies outside every PT_LOAD's file-backed part" + instead},
		{file: "unmapped-nosections", stderr: "unmapped-nosections: warning: PT_GNU_SFRAME (offset 0x170, size 0x34) at address 0x900000 lies outside every PT_LOAD's file-backed part; read the bytes at its file offset 0x170 instead (there is no .sframe section), which the kernel would not find"},
		// What the kernel reads, too short: an error, as for any malformed
		// section.
		{file: "short", code: 1, stderr: "cfi2sframe: short: PT_GNU_SFRAME at file offset 0x170: FRE sub-section (offset 0x10, length 0x8) does not fit in the 0x10 bytes after the header at offset 0x10"},
		{file: "nosections", code: 1, stderr: "cfi2sframe: nosections: PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes), and there is no .sframe section to read instead"},
	}
	for _, tt := range tests {
		args := []string{"dump", tt.file}
		if tt.json {
			args = []string{"dump", "--json", tt.file}
		}
		t.Run(strings.Join(args[1:], " "), func(t *testing.T) {
			r := runChild(t, dir, args...)
			want := nums.Replace(tt.stderr)
			if want != "" {
				want += "\n"
			}
			if r.code != tt.code || r.stderr != want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", r.code, r.stderr, tt.code, want)
			}
			switch {
			case tt.code != 0:
				if r.stdout != "" {
					t.Errorf("failed, yet printed:\n%s", r.stdout)
				}
			case tt.json:
				var v struct {
					Functions []json.RawMessage `json:"functions"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || len(v.Functions) == 0 {
					t.Errorf("--json: %v, %d functions:\n%s", err, len(v.Functions), r.stdout)
				}
			case !strings.Contains(r.stdout, "Contents of the SFrame section .sframe:") || !strings.Contains(r.stdout, "func idx [0]"):
				t.Errorf("no dump on stdout:\n%s", r.stdout)
			}
		})
	}
}

// TestVerifyBrokenSFrameSegment: verify fails a file whose PT_GNU_SFRAME
// the kernel cannot read SFrame data through, with a layout line saying
// why (the CFI is checked against the .sframe section instead, when there
// is one), and passes a sound file, converted or GNU-linked, with none.
func TestVerifyBrokenSFrameSegment(t *testing.T) {
	dir, nums := segmentDir(t)
	const none = ": the kernel reads SFrame data only through PT_GNU_SFRAME and would find none"
	tests := []struct {
		file    string
		layout  []string // the file's layout lines, exactly, after "FILE: layout: "
		summary string   // in the summary line
	}{
		{file: "sound", summary: "1 functions, 16 bytes checked: 0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 0 skipped as cfi2sframe skips them, 0 layout problems"},
		{file: "hello.v3", summary: "0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 0 skipped as cfi2sframe skips them, 0 layout problems"},
		{file: "gnu", summary: "0 disagreements, 0 ranges without CFI, 1 signal frames marked as such, 0 CFI functions missing from .sframe, 0 skipped as cfi2sframe skips them, 0 layout problems"},
		{file: "past-end", summary: "1 functions, 16 bytes checked: 0 disagreements", layout: []string{
			"PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)" + none,
			"section .sframe [0x500000,+0x34) at file offset 0x170 and PT_GNU_SFRAME [0x500000,+0x34) at file offset {past} differ",
			"section .sframe at 0x500000 has file offset 0x170, the PT_LOAD mapping it reads it from {past}",
		}},
		{file: "huge", summary: "1 functions, 16 bytes checked: 0 disagreements", layout: []string{
			"PT_GNU_SFRAME (offset 0x170, size 0x80000000) lies past the end of the file ({size} bytes)" + none,
		}},
		{file: "empty", summary: "1 functions, 16 bytes checked: 0 disagreements", layout: []string{
			"PT_GNU_SFRAME (offset 0x170, size 0) holds no bytes" + none,
			"section .sframe [0x500000,+0x34) at file offset 0x170 and PT_GNU_SFRAME [0x500000,+0x0) at file offset 0x170 differ",
		}},
		// p_filesz short of the section: the kernel reads a cut section.
		{file: "short", summary: "1 functions, 16 bytes checked: 0 disagreements", layout: []string{
			"section .sframe [0x500000,+0x34) at file offset 0x170 and PT_GNU_SFRAME [0x500000,+0x2c) at file offset 0x170 differ",
			"PT_GNU_SFRAME at file offset 0x170: FRE sub-section (offset 0x10, length 0x8) does not fit in the 0x10 bytes after the header at offset 0x10; checked section .sframe instead",
		}},
		{file: "unmapped", summary: "1 functions, 16 bytes checked: 0 disagreements", layout: []string{
			"PT_GNU_SFRAME (offset 0x170, size 0x34) at address 0x900000 lies outside every PT_LOAD's file-backed part" + none,
			"section .sframe [0x500000,+0x34) at file offset 0x170 and PT_GNU_SFRAME [0x900000,+0x34) at file offset 0x170 differ",
		}},
		// No section headers: nothing to read instead, and no CFI found.
		{file: "nosections", summary: "0 functions, 0 bytes checked: 0 disagreements, 0 ranges without CFI, 0 CFI functions missing from .sframe, 0 skipped as cfi2sframe skips them, 1 layout problems", layout: []string{
			"PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)" + none,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := runChild(t, dir, "verify", tt.file)
			var layout []string
			for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
				if rest, ok := strings.CutPrefix(l, tt.file+": layout: "); ok {
					layout = append(layout, rest)
				}
			}
			var want []string
			for _, l := range tt.layout {
				want = append(want, nums.Replace(l))
			}
			if strings.Join(layout, "\n") != strings.Join(want, "\n") {
				t.Errorf("layout lines:\n%s\nwant:\n%s\nstdout:\n%s", strings.Join(layout, "\n"), strings.Join(want, "\n"), r.stdout)
			}
			stderr := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if !strings.HasPrefix(stderr[0], tt.file+": ") || !strings.Contains(stderr[0], tt.summary) {
				t.Errorf("summary %q, want %q", stderr[0], tt.summary)
			}
			code, lines := 0, 1
			if len(want) > 0 {
				code, lines = 1, 2
				if last := stderr[len(stderr)-1]; last != "cfi2sframe: 1 of 1 files disagree with their CFI, lack functions it describes or have a broken layout" {
					t.Errorf("last line %q", last)
				}
			}
			if r.code != code || len(stderr) != lines {
				t.Errorf("exit %d, %d stderr lines; want %d, %d:\n%s", r.code, len(stderr), code, lines, r.stderr)
			}
		})
	}
}

// TestVerifyForBrokenSFrameSegment: the readers that find SFrame data
// through PT_GNU_SFRAME (the kernel, glibc) reject a file whose segment
// cannot be followed, whatever its .sframe section holds, and say why;
// libsframe, which reads the section, takes it. A sound file passes.
func TestVerifyForBrokenSFrameSegment(t *testing.T) {
	dir, nums := segmentDir(t)
	if r := runChild(t, dir, "verify", "--for", "kernel", "hello.v3"); r.code != 0 {
		t.Errorf("a converted program: exit %d: %s", r.code, r.stdout)
	}
	for _, reader := range []string{"kernel", "glibc", "libsframe"} {
		for _, tt := range []struct{ file, why string }{
			{"sound", ""},
			{"hello.v3", ""},
			{"past-end", "PT_GNU_SFRAME (offset {past}, size 0x34) lies past the end of the file ({size} bytes)"},
			{"empty", "PT_GNU_SFRAME (offset 0x170, size 0) holds no bytes"},
			{"unmapped", "PT_GNU_SFRAME (offset 0x170, size 0x34) at address 0x900000 lies outside every PT_LOAD's file-backed part"},
		} {
			t.Run(reader+"/"+tt.file, func(t *testing.T) {
				r := runChild(t, dir, "verify", "--for", reader, tt.file)
				rejected := tt.why != "" && reader != "libsframe"
				if !rejected {
					// The generated files break other rules of some
					// readers (a V3 section for glibc, a text range for
					// the kernel); never this one.
					if strings.Contains(r.stdout, "pt-gnu-sframe") {
						t.Errorf("stdout %q", r.stdout)
					}
					return
				}
				want := tt.file + ": " + reader + ": header: pt-gnu-sframe: " + nums.Replace(tt.why) + "; read section .sframe instead, which the kernel would not find; " + reader + " finds SFrame data only through PT_GNU_SFRAME (reject)"
				if r.code != 1 || strings.TrimSpace(r.stdout) != want {
					t.Errorf("exit %d, stdout:\n%s\nwant:\n%s", r.code, r.stdout, want)
				}
			})
		}
	}
}
