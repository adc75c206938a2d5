package elfwrite

import "testing"

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
	src, dst, restore := copyFiles(t, in)
	defer restore()
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
	return readBack(t, dst)
}
