package codeentry

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDataRefs: Code.Refs holds the read-only data an instruction names
// (a const array indexed RIP-relative) and the data a relocated pointer
// names (the strings of a pointer array), sorted and each once, and
// nothing in the code or in writable data.
func TestDataRefs(t *testing.T) {
	needTools(t, "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, "refs.c")
	prog := `static const int tbl[] = {3, 1, 4, 1, 5, 9, 2, 6};
const char *const names[] = {"alpha-ref", "beta-ref"};
int counter;
__attribute__((noinline)) int look(unsigned i) { return tbl[i & 7] + counter; }
const char *name(unsigned i) { return names[i & 1]; }
int main(int argc, char **argv) { (void)argv; return look(argc) + name(argc)[0]; }
`
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "refs")
	run(t, "gcc", "-O2", "-fpie", "-pie", "-o", full, src)
	code, _, _ := loadPath(t, full, Options{DebugDirs: []string{}})
	ef, err := elf.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	want := map[string]uint64{}
	syms, _ := ef.Symbols()
	for _, s := range syms {
		if s.Name == "tbl" || s.Name == "counter" {
			want[s.Name] = s.Value
		}
	}
	for _, s := range ef.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_WRITE != 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		d, _ := s.Data()
		if i := bytes.Index(d, []byte("alpha-ref\x00")); i >= 0 {
			want["alpha"] = s.Addr + uint64(i)
		}
	}
	if len(want) != 3 {
		t.Fatalf("symbols or strings not found: %v", want)
	}
	if !slices.IsSorted(code.Refs) || len(slices.Compact(slices.Clone(code.Refs))) != len(code.Refs) {
		t.Errorf("Refs not sorted or not unique: %x", code.Refs)
	}
	for _, n := range []string{"tbl", "alpha"} {
		if _, ok := slices.BinarySearch(code.Refs, want[n]); !ok {
			t.Errorf("%s at %#x not in Refs %x", n, want[n], code.Refs)
		}
	}
	if _, ok := slices.BinarySearch(code.Refs, want["counter"]); ok {
		t.Errorf("counter (writable) at %#x in Refs", want["counter"])
	}
	for _, a := range code.Refs {
		for _, r := range code.Text {
			if a >= r.Addr && a < r.Addr+uint64(len(r.Data)) {
				t.Errorf("Refs holds %#x, in the code", a)
			}
		}
	}
}
