package judge

import (
	"slices"
	"testing"
)

// The s390x table has the programs the harness runs there, static and
// dynamic, and the machine picks it: without a frame-pointer fallback a
// dynamic program's chains end in libc.so.6 (a limit), a static one's do
// not; a handler's end at the vDSO.
func TestKernelTruthS390X(t *testing.T) {
	for _, p := range []string{"chain", "drap", "signal", "plt", "goprog"} {
		for _, dynamic := range []bool{false, true} {
			ts, err := ParseTruthFor(KernelTruthS390X, p, dynamic)
			if err != nil {
				t.Fatal(err)
			}
			if p == "goprog" {
				continue
			}
			main := ts[0]
			if dynamic != slices.Contains(main.Limits, "__libc_start_call_main|@libc.so.6") {
				t.Errorf("%s dynamic=%v: limits %v", p, dynamic, main.Limits)
			}
			if p == "signal" && (len(ts) != 2 || !slices.Equal(ts[1].Limits, []string{"@[vdso]"})) {
				t.Errorf("signal dynamic=%v: %+v", dynamic, ts)
			}
		}
	}
	if KernelTruthFor(22) != KernelTruthS390X { // EM_S390
		t.Error("KernelTruthFor(EM_S390)")
	}
}
