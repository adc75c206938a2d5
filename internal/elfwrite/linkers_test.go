package elfwrite

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// TestRealLinkers converts what each linker Debian ships writes (GNU ld,
// gold, lld, mold; x86-64), runs it, and checks which strategy made room
// for the program headers: the layout moves .interp and notes only,
// merging PT_NOTEs or dropping an executable's PT_PHDR where that frees
// enough; the dynamic tables move only where nothing else is left
// (libraries and PIEs of lld and mold, whose single PT_NOTE and the
// notes before the tables are too small, and libraries with only a
// build-id note), which patchelf handles for position-independent files.
func TestRealLinkers(t *testing.T) {
	gcc := lookTool(t, "gcc")
	if out, err := exec.Command(gcc, "-dumpmachine").Output(); err != nil || !strings.HasPrefix(string(out), "x86_64") {
		t.Skip("system gcc does not target x86-64")
	}
	const (
		grow   = "grow the table, moving .interp and notes"
		merge  = "merge PT_NOTEs"
		drop   = "drop an executable's PT_PHDR"
		tables = "move the dynamic tables"
	)
	type want struct{ pie, nopie, static, staticPIE, lib string }
	linkers := []struct {
		name string
		want want
	}{
		{"bfd", want{pie: grow, nopie: grow, static: merge, staticPIE: merge, lib: tables}},
		{"gold", want{pie: grow, nopie: grow, static: merge, lib: tables}},
		{"lld", want{pie: tables, nopie: drop, static: drop, staticPIE: tables, lib: tables}},
		{"mold", want{pie: grow, nopie: grow, static: drop, staticPIE: tables, lib: tables}},
	}
	sf := minimalSFrame(binary.LittleEndian, 3, -8)
	for _, l := range linkers {
		t.Run(l.name, func(t *testing.T) {
			ld := "ld." + l.name
			if l.name == "mold" {
				ld = "mold"
			}
			if _, err := exec.LookPath(ld); err != nil {
				if toolchain.Required() {
					t.Fatalf("%s not installed", ld)
				}
				t.Skipf("%s not installed", ld)
			}
			cases := []struct {
				name, want string
				cflags     []string
				shared     bool
			}{
				{"pie", l.want.pie, []string{"-pie", "-fPIE"}, true},
				{"nopie", l.want.nopie, []string{"-no-pie"}, false},
				{"static", l.want.static, []string{"-static"}, false},
				{"static-pie", l.want.staticPIE, []string{"-static-pie", "-fPIE"}, false},
			}
			for _, c := range cases {
				if c.want == "" {
					continue // gold cannot link a static PIE
				}
				t.Run(c.name, func(t *testing.T) {
					dir := t.TempDir()
					bin, libDir := buildHello(t, dir, gcc, realCase{name: c.name, cflags: append(c.cflags, "-fuse-ld="+l.name), shared: c.shared})
					checkStrategy(t, bin, sf, c.want)
					var libs []string
					if libDir != "" {
						lib := filepath.Join(libDir, "libanswer.so")
						// Relink the library with the linker under test.
						run(t, nil, gcc, "-O2", "-shared", "-fPIC", "-fuse-ld="+l.name, "-Wl,-soname,libanswer.so", "-o", lib, filepath.Join(dir, "lib.c"))
						checkStrategy(t, lib, sf, l.want.lib)
						libs = []string{lib}
					}
					if checkRealFiles(t, bin, libs, sf, nil, "x86_64") {
						t.Errorf("%s: linker-like layout refused", bin)
					}
				})
			}
		})
	}
}

// checkStrategy plans f for sf and requires the named strategy.
func checkStrategy(t *testing.T, f string, sf []byte, want string) {
	t.Helper()
	in, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(in, uint64(len(sf)), Options{})
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(f), err)
	}
	if p.Strategy != want {
		t.Errorf("%s: strategy %q (moved %v), want %q", filepath.Base(f), p.Strategy, p.Moved, want)
	}
}
