package convert

import (
	"bytes"
	"context"
	"errors"
	"github.com/cfi2sframe/cfi2sframe/translate"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestSFrameInMemory: the section Convert returns, from a file, any other
// reader or a path, is the one the command's path (WriteFile) writes
// into the converted file, at the same address, with the same
// diagnostics and CFI errors; and Convert writes nothing.
func TestSFrameInMemory(t *testing.T) {
	files := []string{
		filepath.Join("..", "testdata", "example", "hello"),
		filepath.Join("..", "testdata", "sframe", "v3-x86_64-exe"),
		filepath.Join("..", "testdata", "sframe", "v3-aarch64-lib.so"),
		"/usr/lib/x86_64-linux-gnu/libc.so.6", // skipped functions: diagnostics to compare
	}
	opts := []Options{
		{Force: true},
		{Force: true, Version: sframe.Version2},
		{Force: true, Version: sframe.Version2, PCRel: true},
		{Force: true, NoSignalFrames: true},
	}
	for _, name := range files {
		st, err := os.Stat(name)
		if err != nil {
			continue // a system file that is not there
		}
		dir := t.TempDir()
		for _, o := range opts {
			out := filepath.Join(dir, "out")
			in, err := Open(name)
			if err != nil {
				t.Fatal(err)
			}
			want, err := in.WriteFile(context.Background(), o, out, 0o755)
			in.Close()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			f, err := elfread.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			sec, err := f.SFrame()
			f.Close()
			if err != nil {
				t.Fatalf("%s: converted file: %v", name, err)
			}

			fh, err := os.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			readers := map[string]func() (*Result, error){
				"*os.File":      func() (*Result, error) { return sframeOf(name, fh, st.Size(), o) },
				"*bytes.Reader": func() (*Result, error) { return sframeOf(name, bytes.NewReader(b), int64(len(b)), o) },
				"io.ReaderAt":   func() (*Result, error) { return sframeOf(name, onlyReaderAt{bytes.NewReader(b)}, int64(len(b)), o) },
				"path":          func() (*Result, error) { return sframeOfFile(name, o) },
			}
			for how, conv := range readers {
				res, err := conv()
				if err != nil {
					t.Errorf("%s %+v from %s: %v", name, o, how, err)
					continue
				}
				if !bytes.Equal(res.SFrame, sec.Data) || res.Addr != sec.Addr {
					t.Errorf("%s %+v from %s: .sframe of %d bytes at %#x; the converted file's has %d at %#x",
						name, o, how, len(res.SFrame), res.Addr, len(sec.Data), sec.Addr)
				}
				if d := cmp.Diff(want.Translate, res.Translate, cmp.AllowUnexported(translate.Result{})); d != "" {
					t.Errorf("%s %+v from %s: translation differs from the command's (-command +SFrame):\n%s", name, o, how, d)
				}
				if errText(res.CFIErrors) != errText(want.CFIErrors) {
					t.Errorf("%s %+v from %s: CFI errors %v; the command's: %v", name, o, how, res.CFIErrors, want.CFIErrors)
				}
			}
			fh.Close()
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("SFrame left files behind: %v", ents)
			}
		}
	}
}

// sframeOf converts the size bytes of r in memory: NewFile, Convert,
// Close.
func sframeOf(name string, r io.ReaderAt, size int64, o Options) (*Result, error) {
	f, err := NewFile(name, r, size)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Convert(o)
}

// sframeOfFile is sframeOf on the named file: Open, Convert, Close.
func sframeOfFile(name string, o Options) (*Result, error) {
	f, err := Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Convert(o)
}

// onlyReaderAt hides everything but ReadAt (and says io.EOF with the
// last byte, as a ReaderAt may).
type onlyReaderAt struct{ r *bytes.Reader }

func (o onlyReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := o.r.ReadAt(p, off)
	if err == nil && off+int64(n) == o.r.Size() {
		err = io.EOF
	}
	return n, err
}

func errText(errs []error) string {
	var s []string
	for _, e := range errs {
		s = append(s, e.Error())
	}
	return strings.Join(s, "\n")
}

// TestSFrameErrors: every error of Open, NewFile and Convert is an
// *Error naming the file once, wrapping the kinds the tree form
// classifies by.
func TestSFrameErrors(t *testing.T) {
	dir := t.TempDir()
	exe := fixture(t, "v3-x86_64-exe")
	obj := fixture(t, "v3-x86_64-O2.o")
	files := map[string][]byte{
		"has-sframe": exe,
		"object.o":   obj,
		"script":     []byte("#!/bin/sh\n"),
		"truncated":  exe[:100],
		"empty":      nil,
		"riscv":      otherMachine(t),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		file string
		opts Options
		is   error
		want string
	}{
		{"has-sframe", Options{}, ErrHasSFrame, "already has SFrame data"},
		{"object.o", Options{}, ErrHasSFrame, "already has SFrame data"},
		{"script", Options{}, nil, "not an ELF file"},
		{"truncated", Options{}, nil, "truncated"},
		{"empty", Options{}, nil, "not an ELF file"},
		{"riscv", Options{Force: true}, ErrUnsupported, "unsupported machine"},
		{"missing", Options{}, fs.ErrNotExist, "open: no such file"},
		{".", Options{}, nil, "not a regular file"},
	}
	for _, tc := range tests {
		name := filepath.Join(dir, tc.file)
		b := files[tc.file]
		calls := map[string]func() (*Result, error){
			"Open": func() (*Result, error) { return sframeOfFile(name, tc.opts) },
		}
		if _, ok := files[tc.file]; ok {
			calls["NewFile"] = func() (*Result, error) { return sframeOf(name, bytes.NewReader(b), int64(len(b)), tc.opts) }
		}
		for how, call := range calls {
			_, err := call()
			var e *Error
			switch {
			case err == nil:
				t.Errorf("%s(%s): no error", how, tc.file)
				continue
			case !errors.As(err, &e) || e.File != name:
				t.Errorf("%s(%s): error %v (%T) is not an *Error for the file", how, tc.file, err, err)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Errorf("%s(%s): error %v does not wrap %v", how, tc.file, err, tc.is)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, name+": ") || strings.Count(msg, name) != 1 || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("%s(%s): error %q: want one line naming the file once and saying %q", how, tc.file, msg, tc.want)
			}
		}
	}
	if _, err := sframeOf("x", bytes.NewReader(exe), int64(len(exe))+1, Options{Force: true}); err == nil || !strings.HasPrefix(err.Error(), "x: reading") {
		t.Errorf("size past the reader's end: %v", err)
	}
	// Options are checked before the conversion reads the file, and the error is
	// about no file.
	for how, call := range map[string]func() (*Result, error){
		"Open": func() (*Result, error) { return sframeOfFile(filepath.Join(dir, "has-sframe"), Options{Version: 4}) },
		"NewFile": func() (*Result, error) {
			return sframeOf("x", bytes.NewReader(exe), int64(len(exe)), Options{Version: 4})
		},
	} {
		var oe *OptionError
		if _, err := call(); !errors.As(err, &oe) || oe.Option != "Version" || !strings.Contains(err.Error(), "SFrame version 4") {
			t.Errorf("%s, version 4: error %v, want an *OptionError for Version", how, err)
		}
	}
}
