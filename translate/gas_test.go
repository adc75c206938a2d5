package translate

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/toolchain"
)

// TestGasEdgeCases assembles hand-written edge cases (testdata/gas-*.s:
// GNU_args_size, same_value rip, val_offset, remember/restore state, FP in
// a register, undefined FP, CFA/RA in other registers on AArch64, PAC B
// key, FP without RA, outermost frame) with sid's as --gsframe and
// requires the translation of their .eh_frame to agree with gas at every PC
// and to skip exactly the functions gas skips.
func TestGasEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		arch      string
		described int // functions gas describes
		skipped   int // functions both skip
	}{
		{"x86_64", 5, 3},
		{"aarch64", 2, 4},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			as := toolchain.Tool(t, "sid", tc.arch+"-as")
			obj := filepath.Join(t.TempDir(), "v3-gas-"+tc.arch+".o")
			out, err := exec.Command(as, "--gsframe", "-o", obj, filepath.Join("testdata", "gas-"+tc.arch+".s")).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", as, err, out)
			}
			st := agree(t, obj)
			for k, n := range st.diffs {
				if diffClass(k[1]) != diffNotInGNUs {
					t.Errorf("%s in %s: %d differences", k[1], k[0], n)
				}
			}
			if st.funcs != tc.described || st.diffs[[2]string{".text", string(diffNotInGNUs)}] != tc.skipped {
				t.Errorf("gas describes %d functions, both skip %d; want %d and %d (%s)", st.funcs, st.diffs[[2]string{".text", string(diffNotInGNUs)}], tc.described, tc.skipped, st.summary)
			}
			if t.Failed() {
				for _, e := range st.examples {
					t.Log(e)
				}
			}
			t.Logf("%d functions, %d PCs agree; %s", st.funcs, st.pcs, st.summary)
		})
	}
}
