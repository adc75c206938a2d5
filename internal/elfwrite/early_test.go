package elfwrite

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFileAfter writes p's output as convert's File.WriteFile does: the early runs
// of a plan for size 0 copied first (CopyRuns), then WriteFileAfter told
// they are done. With wrong, the runs copied are not those of the plan
// (each one shifted by a byte), as if the early plan had been wrong:
// WriteFileAfter must then write those bytes itself, so the output is the
// same.
func writeFileAfter(t *testing.T, in []byte, p *Plan, data []byte, wrong bool) []byte {
	t.Helper()
	early, err := NewPlan(in, 0, p.opts)
	if err != nil {
		t.Fatalf("plan for size 0: %v", err)
	}
	runs := early.EarlyRuns()
	for _, r := range runs {
		if r.Off+r.Size > early.Offset {
			t.Fatalf("early run %+v reaches the .sframe data at %#x", r, early.Offset)
		}
	}
	dir := t.TempDir()
	src, err := os.Create(filepath.Join(dir, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Write(in); err != nil {
		t.Fatal(err)
	}
	dst, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	old, oldWhole := minFileCopy, minWhole
	minFileCopy, minWhole = 1, 1
	defer func() { minFileCopy, minWhole = old, oldWhole }()
	copied := runs
	if wrong {
		copied = nil
		for _, r := range runs {
			if r.Size > 1 {
				copied = append(copied, Run{Off: r.Off + 1, Src: r.Src, Size: r.Size - 1})
			}
		}
	}
	if err := CopyRuns(dst, src, copied); err != nil {
		t.Fatalf("CopyRuns: %v", err)
	}
	if err := p.WriteFileAfter(dst, src, data, copied); err != nil {
		t.Fatalf("WriteFileAfter: %v", err)
	}
	out, err := os.ReadFile(dst.Name())
	if err != nil {
		t.Fatal(err)
	}
	return out
}
