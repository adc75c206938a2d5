package translate

import (
	"debug/elf"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/elfread"
)

// eachLinked calls fn with every linked (not ET_REL) x86-64 and AArch64
// fixture of testdata/sframe and, with system, this machine's ls and libc
// when they are there; it closes each file after fn and returns how many
// it opened.
func eachLinked(t *testing.T, system bool, fn func(name string, f *elfread.File)) int {
	t.Helper()
	paths, err := filepath.Glob("../testdata/sframe/v*-*")
	if err != nil {
		t.Fatal(err)
	}
	if system {
		paths = append(paths, "/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6")
	}
	n := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if strings.HasSuffix(name, ".objdump") || strings.Contains(name, "s390x") {
			continue
		}
		f, err := elfread.Open(p)
		if err != nil {
			if strings.HasPrefix(p, "/usr/") {
				continue // not on this machine
			}
			t.Fatal(err)
		}
		if f.ELF.Type != elf.ET_REL {
			n++
			fn(name, f)
		}
		f.Close()
	}
	return n
}
