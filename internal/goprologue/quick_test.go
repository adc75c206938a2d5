package goprologue

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkQuick runs QuickAMD64 over every function of s that is not
// assembly: where it describes one, its rules must be Analyze's. With
// wantMost (a binary of Go 1.21 or later, whose shape it knows) it must
// take most of them, or it saves nothing.
func checkQuick(t *testing.T, s *survey, wantMost bool) {
	t.Helper()
	if s.arch != AMD64 {
		return
	}
	taken, goFuncs := 0, 0
	for i, g := range s.funcs {
		if g.asm {
			continue
		}
		goFuncs++
		q, ok := QuickAMD64(g.code, g.entry, g.sp)
		if !ok {
			continue
		}
		taken++
		if s.errs[i] != nil {
			t.Errorf("%s: QuickAMD64 describes it, Analyze fails: %v", g.name, s.errs[i])
			continue
		}
		if diff := cmp.Diff(s.results[i], q); diff != "" {
			t.Errorf("%s: QuickAMD64 differs from Analyze (-Analyze +Quick):\n%s", g.name, diff)
		}
	}
	t.Logf("QuickAMD64 took %d of %d Go functions", taken, goFuncs)
	if wantMost && taken < goFuncs/2 {
		t.Errorf("QuickAMD64 took %d of %d Go functions; want most", taken, goFuncs)
	}
}

func TestQuickGoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a large binary")
	}
	root := goRoot(t)
	for _, p := range []string{filepath.Join(root, "bin", "go"), filepath.Join(root, "pkg", "tool", "linux_amd64", "compile")} {
		t.Run(filepath.Base(p), func(t *testing.T) { checkQuick(t, analyzeBinary(t, p), true) })
	}
}
