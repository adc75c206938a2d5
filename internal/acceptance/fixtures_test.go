package acceptance_test

import (
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
)

// LoadELF returns a linked file's .sframe bytes, address and executable
// PT_LOAD ranges.
func loadELF(t *testing.T, name string) acceptance.Input {
	t.Helper()
	f, err := elf.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".sframe")
	if s == nil {
		t.Fatalf("%s: no .sframe", name)
	}
	b, err := s.Data()
	if err != nil {
		t.Fatal(err)
	}
	in := acceptance.Input{Section: b, Addr: s.Addr}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			in.Exec = append(in.Exec, acceptance.Range{Lo: p.Vaddr, Hi: p.Vaddr + p.Memsz})
		}
	}
	return in
}

// TestGNUFixtures runs every reader's rules on the linked files GNU ld
// wrote (testdata/sframe: sid's V3, trixie's V2 without PCREL). What each
// reader finds there is asserted: the figures are GNU's own output's
// standing with the real readers.
func TestGNUFixtures(t *testing.T) {
	files, err := filepath.Glob("../../testdata/sframe/v[23]-*")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, name := range files {
		base := filepath.Base(name)
		if strings.HasSuffix(base, ".objdump") || strings.HasSuffix(base, ".o") {
			continue
		}
		in := loadELF(t, name)
		for _, r := range acceptance.All {
			res := acceptance.Check(r, in)
			line := fmt.Sprintf("%s %s: ok", base, r)
			if v := res.First(); v != nil {
				rules := map[string]int{}
				for _, v := range res.Violations {
					rules[v.Rule]++
				}
				var rs []string
				for k, n := range rules {
					rs = append(rs, fmt.Sprintf("%s=%d", k, n))
				}
				sort.Strings(rs)
				line = fmt.Sprintf("%s %s: %s; first: %s", base, r, strings.Join(rs, ","), v)
			}
			got = append(got, line)
		}
	}
	golden := "testdata/gnu-fixtures.golden"
	want := strings.Join(got, "\n") + "\n"
	if *update {
		if err := os.WriteFile(golden, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(b), want); diff != "" {
		t.Errorf("readers' findings on GNU's output changed (-golden +now; go test -update rewrites it):\n%s", diff)
	}
}

var update = flag.Bool("update", false, "rewrite the golden files")
