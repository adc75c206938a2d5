package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/layer"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// TestHints: the command's words for convert's typed errors: the flag
// that gets past a conversion error, the flag an option error is about;
// other errors pass unchanged, and errors.Is/As still see the cause.
func TestHints(t *testing.T) {
	has := &convert.Error{File: "f", Err: convert.ErrHasSFrame}
	layout := &convert.Error{File: "f", Err: fmt.Errorf("%w: no room", convert.ErrLayout)}
	other := &convert.Error{File: "f", Err: errors.New("bad")}
	bomb := hostile.ZstdZeros(128 << 20)
	r, err := layer.NewReader(context.Background(), layer.Zstd, bytes.NewReader(bomb), int64(len(bomb)), layer.Bounds{Expansion: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, expansion := io.Copy(io.Discard, r)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"has SFrame", has, "f: already has SFrame data (.sframe or PT_GNU_SFRAME); use --force to replace it"},
		{"has SFrame, wrapped again", fmt.Errorf("x: %w", has), "x: f: already has SFrame data (.sframe or PT_GNU_SFRAME); use --force to replace it"},
		{"layout", layout, "f: no layout that strip, objcopy, eu-strip and patchelf keep: no room (--fragile-layout writes one that strip, eu-strip and patchelf may break)"},
		{"no hint", other, "f: bad"},
		{"hinted already", withHint(has), "f: already has SFrame data (.sframe or PT_GNU_SFRAME); use --force to replace it"},
		{"inflate limit", fmt.Errorf("f: %w", &elfread.Error{Where: "section .debug_frame", Offset: 0x40, Msg: "compressed contents claim 8 bytes", Err: elfread.ErrInflateLimit}),
			"f: section .debug_frame at file offset 0x40: compressed contents claim 8 bytes; see --max-inflate"},
		{"unsupported", &convert.Error{File: "f", Err: fmt.Errorf("%w machine EM_S390 (x86-64 and AArch64 are supported)", convert.ErrUnsupported)},
			"f: unsupported machine EM_S390 (x86-64 and AArch64 are supported)"},
		{"expansion", fmt.Errorf("p.deb: data.tar.zst: %w", expansion), "p.deb: data.tar.zst: zstd: expands past 64 MiB + 1 × its 4 KiB (--max-expansion)"},
		{"dictionary", &layer.LimitError{What: "dictionary", Got: 3 << 30, Limit: layer.MaxWindow}, "the block declares a 3 GiB dictionary, over the 128 MiB limit"},
	}
	for _, tc := range tests {
		got := withHint(tc.err)
		if got.Error() != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("%s: the hinted error does not wrap the original", tc.name)
		}
	}
	for _, tc := range []struct {
		opts convert.Options
		want string
	}{
		{convert.Options{Version: 4}, "--sframe-version: SFrame version 4 cannot be written (2 or 3)"},
		{convert.Options{PCRel: true}, "--pcrel applies to SFrame version 2 only (version 3 start addresses are always PC-relative)"},
	} {
		err := tc.opts.Validate()
		if got := flagError(err); got == nil || got.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.opts, got, tc.want)
		}
	}
	if err := errors.New("plain"); flagError(err) != err {
		t.Errorf("flagError changed an error that is not an option error")
	}
}

// TestHintsInCommand: what the user sees: one line naming the file once
// with the flag to give; in the tree form the same in the JSON record; an
// option error once, before any file, naming the flag.
func TestHintsInCommand(t *testing.T) {
	exe := "../../testdata/sframe/v3-x86_64-exe"
	out := filepath.Join(t.TempDir(), "out")
	_, _, err := runCmd("-q", exe, "-o", out)
	if err == nil || err.Error() != exe+": already has SFrame data (.sframe or PT_GNU_SFRAME); use --force to replace it" {
		t.Errorf("single file: %v", err)
	}
	stdout, _, err := runCmd("-q", "--json", "-o", t.TempDir(), exe, "../../testdata/example/hello")
	if err != nil {
		t.Fatalf("tree: %v", err)
	}
	var rec struct{ File, Outcome, Error string }
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.File == exe {
			break
		}
	}
	if rec.Outcome != "has-sframe" || !strings.HasSuffix(rec.Error, "; use --force to replace it") || strings.Count(rec.Error, exe) != 1 {
		t.Errorf("tree record %+v: want has-sframe with the --force hint", rec)
	}
	for _, args := range [][]string{
		{"--pcrel", exe, "-o", out},
		{"--pcrel", "-o", t.TempDir(), exe, "../../testdata/example/hello"},
	} {
		_, stderr, err := runCmd(args...)
		if err == nil || !strings.HasPrefix(err.Error(), "--pcrel applies to SFrame version 2 only") || stderr != "" {
			t.Errorf("%v: %v, stderr %q: want the option refused once, before any file", args, err, stderr)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("refused conversions wrote %s", out)
	}
}
