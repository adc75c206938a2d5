package trace

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadObject(t *testing.T) {
	hello := filepath.Join("..", "..", "testdata", "example", "hello")
	o, err := loadObject(hello, "/usr/bin/hello", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Path != "/usr/bin/hello" || o.BuildID != "b611906ad035909b5dfd1bc49784329e0a3b6ab8" {
		t.Errorf("path %q build ID %q", o.Path, o.BuildID)
	}
	if o.Table != nil || o.NoSFrame != "no .sframe" {
		t.Errorf("table %v, no-SFrame reason %q", o.Table, o.NoSFrame)
	}
	if len(o.fdes) == 0 {
		t.Errorf("no DWARF FDEs loaded (%s)", o.cfiErr)
	}
	// A PIE's text mapped at file offset 0x1000.
	m := &MapEntry{Lo: 0x555555555000, Hi: 0x555555556000, Perms: "r-xp", Offset: 0x1000}
	if b, ok := o.Bias(m); !ok || b != 0x555555554000 {
		t.Errorf("bias %#x %v, want 0x555555554000", b, ok)
	}
	if _, ok := o.Bias(&MapEntry{Lo: 0x1000, Hi: 0x2000, Offset: 0x100000}); ok {
		t.Error("bias found for an offset past every PT_LOAD")
	}
	if got := o.Symbolize(o.syms[0].lo); got != o.syms[0].name {
		t.Errorf("Symbolize(%#x) = %q, want %q", o.syms[0].lo, got, o.syms[0].name)
	}
	for _, s := range o.syms {
		if s.name == "main" && o.Symbolize(s.lo+1) != "main" {
			t.Errorf("main+1 is %q", o.Symbolize(s.lo+1))
		}
	}

	exe := filepath.Join("..", "..", "testdata", "sframe", "v3-x86_64-exe")
	o, err = loadObject(exe, exe, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.Table == nil {
		t.Fatalf("no SFrame table: %s", o.NoSFrame)
	}
	if o.Symbolize(0x400390+4) != "_start" {
		t.Errorf("_start+4 is %q", o.Symbolize(0x400394))
	}
	if b, ok := o.Bias(&MapEntry{Lo: 0x400000, Hi: 0x401000, Perms: "r-xp"}); !ok || b != 0 {
		t.Errorf("non-PIE bias %#x %v", b, ok)
	}
}

// A stripped executable still has _start: the SFrame function at the
// entry point.
func TestEntryNamedStart(t *testing.T) {
	exe := filepath.Join("..", "..", "testdata", "sframe", "v3-x86_64-exe")
	o, err := loadObject(exe, exe, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.syms = nil // as if stripped
	if got := o.Symbolize(0x400390 + 4); got == "_start" {
		t.Fatalf("entry+4 is %q without symbols", got)
	}
	o.nameEntry(0x400390)
	if got := o.Symbolize(0x400390 + 4); got != "_start" {
		t.Errorf("entry+4 is %q, want _start", got)
	}
	o.nameEntry(0x400391) // no function starts there: nothing named
	if len(o.syms) != 1 {
		t.Errorf("symbols %v", o.syms)
	}
}

func TestLoadObjectRefusesNonRegular(t *testing.T) {
	if _, err := loadObject(t.TempDir(), "dir", false, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// An object whose .sframe is malformed is kept without a table, and the
// reason (shown after the object's path) says where the section is.
func TestLoadObjectBadSFrame(t *testing.T) {
	exe := filepath.Join("..", "..", "testdata", "sframe", "v3-x86_64-exe")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	off := ef.Section(".sframe").Offset
	ef.Close()
	b[off], b[off+1] = 0, 0
	o, err := readObject(bytes.NewReader(b), int64(len(b)), "/bin/bad", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("bad .sframe at file offset %#x: bad magic 0x0000 at offset 0x0", off)
	if o.Table != nil || o.NoSFrame != want {
		t.Errorf("table %v, no-SFrame reason %q, want %q", o.Table, o.NoSFrame, want)
	}
}
