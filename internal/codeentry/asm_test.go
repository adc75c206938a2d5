package codeentry

import (
	"debug/elf"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"path/filepath"
	"testing"
)

// TestJumpTargets: a loop head and a cold-style part, each after
// alignment padding that follows the end of a path, are reached by
// branches only: neither may be an entry.
func TestJumpTargets(t *testing.T) {
	needTools(t, "gcc", "strip")
	dir := t.TempDir()
	full := filepath.Join(dir, "loop")
	run(t, "gcc", "-nostdlib", "-static", "-no-pie", "-o", full, filepath.Join("testdata", "loop_amd64.S"))
	stripped := full + ".stripped"
	run(t, "strip", "-o", stripped, full)
	tr := readTruth(t, full)
	code, notes, _ := loadPath(t, stripped, Options{DebugDirs: []string{}})
	got := map[uint64]bool{}
	for _, e := range code.Entries {
		got[e.Addr] = true
	}
	for a, name := range tr.labels {
		if got[a] {
			t.Errorf("label %s at %#x, reached only by branches, is an entry", name, a)
		}
	}
	for a, name := range tr.starts {
		if !got[a] {
			t.Errorf("function %s at %#x is not an entry", name, a)
		}
	}
	if notes.Rejected[RejectJumpTarget] == 0 {
		t.Errorf("no candidate rejected as a jump target: %v", notes.Rejected)
	}
}

// TestGaps: with half the functions described (as CFI would), the
// start of each gap is an entry from the gap, and a function's start.
func TestGaps(t *testing.T) {
	full, stripped := build(t, toolchains[0])
	tr := readTruth(t, full)
	ef, err := elf.Open(full)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	var described []Span
	var undescribed []uint64
	for i, s := range syms {
		if _, ok := tr.starts[s.Value]; !ok || s.Size == 0 || tr.starts[s.Value] != s.Name {
			continue
		}
		if i%2 == 0 {
			described = append(described, Span{s.Value, s.Value + s.Size})
		} else {
			undescribed = append(undescribed, s.Value)
		}
	}
	sort.Slice(described, func(i, j int) bool { return described[i].Lo < described[j].Lo })
	code, _, _ := loadPath(t, stripped, Options{DebugDirs: []string{}, Described: described})
	gaps := 0
	for _, e := range code.Entries {
		if e.Source != codeflow.FromGap {
			continue
		}
		gaps++
		if _, ok := tr.starts[e.Addr]; !ok && !afterLeadingPad(code, tr, e.Addr) {
			t.Errorf("gap entry %#x is no function's start", e.Addr)
		}
		if code.Described(e.Addr, e.End) {
			t.Errorf("gap entry %#x-%#x overlaps a described range", e.Addr, e.End)
		}
	}
	if gaps == 0 {
		t.Errorf("no gap entries among %d described and %d undescribed functions", len(described), len(undescribed))
	}
	for _, d := range described {
		if !code.Described(d.Lo, d.Lo+1) {
			t.Errorf("Described(%#x) is false", d.Lo)
		}
	}
	t.Logf("%d gap entries, %d functions undescribed", gaps, len(undescribed))
}
