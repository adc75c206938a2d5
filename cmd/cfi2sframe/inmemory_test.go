package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestInMemoryMatchesCommand: convert's Open and Convert give the .sframe the
// command writes into the converted file (bytes and address) and the
// diagnostics it prints with --diagnostics json, for the committed example
// and, where it is installed, libc (which has skipped functions).
func TestInMemoryMatchesCommand(t *testing.T) {
	files := []string{"../../testdata/example/hello", "/usr/lib/x86_64-linux-gnu/libc.so.6"}
	cases := []struct {
		args []string
		opts convert.Options
	}{
		{nil, convert.Options{}},
		{[]string{"--sframe-version", "2", "--pcrel"}, convert.Options{Version: sframe.Version2, PCRel: true}},
		{[]string{"--signal-frames=false"}, convert.Options{NoSignalFrames: true}},
	}
	for _, name := range files {
		if _, err := os.Stat(name); err != nil {
			continue
		}
		for _, c := range cases {
			out := filepath.Join(t.TempDir(), "out")
			stdout, stderr, err := runCmd(append(append([]string{"--diagnostics", "json"}, c.args...), name, "-o", out)...)
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", name, c.args, err, stderr)
			}
			f, err := elfread.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			sec, err := f.SFrame()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			cf, err := convert.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cf.Convert(c.opts)
			cf.Close()
			if err != nil {
				t.Fatalf("%s %v: %v", name, c.args, err)
			}
			if !bytes.Equal(res.SFrame, sec.Data) || res.Addr != sec.Addr {
				t.Errorf("%s %v: in memory %d bytes at %#x; the command wrote %d at %#x", name, c.args, len(res.SFrame), res.Addr, len(sec.Data), sec.Addr)
			}
			errs := make([]string, len(res.CFIErrors))
			for i, e := range res.CFIErrors {
				errs[i] = e.Error()
			}
			want, _ := json.Marshal(struct {
				File        string   `json:"file"`
				CFIErrors   []string `json:"cfi_errors"`
				Diagnostics any      `json:"diagnostics"`
			}{name, errs, res.Translate.Diags})
			var got bytes.Buffer
			if err := json.Compact(&got, []byte(stdout)); err != nil {
				t.Fatalf("%s %v: --diagnostics json: %v\n%s", name, c.args, err, stdout)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s %v: the command's diagnostics\n%s\nin memory\n%s", name, c.args, stdout, want)
			}
		}
	}
}

// TestConvertInMemory: trace's converter gives the section convert gives
// in memory, and errors that do not name the file (trace names the object
// beside them) but keep their meaning; objects are refused.
func TestConvertInMemory(t *testing.T) {
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	sec, addr, err := convertInMemory("hello", bytes.NewReader(hello), int64(len(hello)))
	want, werr := sframeInMemory("hello", bytes.NewReader(hello), int64(len(hello)))
	if err != nil || werr != nil || !bytes.Equal(sec, want.SFrame) || addr != want.Addr {
		t.Errorf("hello: %d bytes at %#x, %v; in memory: %v", len(sec), addr, err, werr)
	}
	exe, err := os.ReadFile("../../testdata/sframe/v3-x86_64-lib-now.so")
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(exe[18:], uint16(elf.EM_RISCV)) // e_machine
	_, _, err = convertInMemory("lib.so", bytes.NewReader(exe), int64(len(exe)))
	if !errors.Is(err, convert.ErrUnsupported) || strings.Contains(err.Error(), "lib.so") {
		t.Errorf("RISC-V: %v, want an unsupported-machine error not naming the file", err)
	}
	obj, err := os.ReadFile("../../testdata/sframe/v3-x86_64-O2.o")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := convertInMemory("x.o", bytes.NewReader(obj), int64(len(obj))); err == nil || !strings.Contains(err.Error(), "relocatable object") {
		t.Errorf("object: %v, want it refused", err)
	}
}
