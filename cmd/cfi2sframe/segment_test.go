package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/hostile"
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
