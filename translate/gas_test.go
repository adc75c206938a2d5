package translate

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// TestGasEdgeCases assembles hand-written edge cases (testdata/gas-*.s:
// GNU_args_size, same_value rip, val_offset, remember/restore state, FP in
// a register, undefined FP, CFA/RA in other registers on AArch64, PAC B
// key, FP without RA, outermost frame; on s390x gcc's frames, FP/RA/SP in
// floating-point registers, CFA on r1, SP = CFA-160) with sid's as --gsframe and
// requires the translation of their .eh_frame to agree with gas at every PC
// and to skip exactly the functions gas skips.
func TestGasEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		arch      string
		described int // functions gas describes
		skipped   int // functions both skip
		// differences with gas, by class: each a documented decision
		diffs map[diffClass]int
	}{
		{"x86_64", 5, 3, nil},
		{"aarch64", 2, 4, nil},
		// ra_acr keeps the return address in access register a1 (DWARF
		// 49): sid's gas writes a flexible FDE naming r49, but a control
		// word's register field is 5 bits wide for the kernel's unwinder
		// (it would read r17, f2); we skip the function (ra-register).
		// sp_val0 says SP = CFA+0, which gas skips as contradicting the
		// ABI's CFA; we write it with the CFA moved 160 up, which
		// recovers the same SP and RA (as for Go's frames).
		{"s390x", 7, 0, map[diffClass]int{diffWeSkip: 1, diffMissing: 6, diffOursOnly: 1}},
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
				if c := diffClass(k[1]); c != diffNotInGNUs && tc.diffs[c] != n {
					t.Errorf("%s in %s: %d differences, %d documented", k[1], k[0], n, tc.diffs[c])
				}
			}
			for c, n := range tc.diffs {
				if st.diffs[[2]string{".text", string(c)}] == 0 {
					t.Errorf("documented difference %s (%d) did not occur", c, n)
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
