package codeentry

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTakenAddresses: the addresses taken without a relocation find the
// functions reached only that way, and no entry is a case block or a
// computed goto's label (every entry starts a function of the unstripped
// build's .symtab).
func TestTakenAddresses(t *testing.T) {
	for _, tc := range []struct {
		name, cc, strip string
		flags           []string
		want            []string // must be entries found as pointers once stripped
	}{
		{"amd64-nopie", "gcc", "strip", []string{"-O2", "-fno-pie", "-no-pie"}, []string{"bye", "cmp_int", "t_one", "t_two"}},
		// In a PIE, t_one and t_two are relocations' pointers.
		{"amd64-pie", "gcc", "strip", []string{"-O2", "-fpie", "-pie"}, []string{"bye", "cmp_int"}},
		{"arm64-pie", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-strip", []string{"-O2", "-fpie", "-pie"}, []string{"bye", "cmp_int"}},
		// slots' base is taken by adrp+add, as a jump table's is: its
		// words are not read (tableWords).
		{"arm64-nopie", "aarch64-linux-gnu-gcc", "aarch64-linux-gnu-strip", []string{"-O2", "-fno-pie", "-no-pie"}, []string{"bye", "cmp_int"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			needTools(t, tc.cc, tc.strip)
			dir := t.TempDir()
			full := filepath.Join(dir, "prog")
			args := append(append([]string{}, tc.flags...), "-o", full, filepath.Join("testdata", "taken.c"))
			if out, err := exec.Command(tc.cc, args...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", tc.cc, err, out)
			}
			stripped := filepath.Join(dir, "prog.stripped")
			run(t, tc.strip, "-o", stripped, full)
			tr := readTruth(t, full)
			code, notes, c := loadPath(t, stripped, Options{DebugDirs: []string{}})
			for _, e := range code.Entries {
				if _, ok := tr.starts[e.Addr]; !ok && c.taken[e.Addr] {
					t.Errorf("entry %#x (%s, sources %08b) is no function's start", e.Addr, srcNames[e.Source], c.cands[e.Addr].srcs)
				}
			}
			for _, n := range tc.want {
				a, ok := tr.byName[n]
				if !ok {
					t.Logf("no function %s (inlined?)", n)
					continue
				}
				if !c.taken[a] {
					t.Errorf("%s at %#x not found as a taken address", n, a)
				}
			}
			t.Logf("found %v, rejected %v", notes.Found, notes.Rejected)
		})
	}
}
