package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/toolchain"
)

// kernelChecks are the check lines scripts/kernel-acceptance.sh prints
// with status ok: a run that skipped or lost one fails rather than passing
// with fewer. The "info" lines (GNU as --gsframe's figures, our default
// output of the signal program) are logged, not judged.
var kernelChecks = []string{
	"ours chain.ours",
	"ours drap.ours",
	"ours plt.ours",
	"ours chain.for-kernel",
	"ours drap.for-kernel",
	"ours signal.for-kernel",
	"ours plt.for-kernel",
	"control chain.plain",
	"control drap.plain",
	"control signal.plain",
	"control plt.plain",
	"control chain.damaged-lookup",
	"control chain.damaged-validate",
}

// TestKernelAcceptance boots a kernel that has the SFrame user-space
// unwinder (CFI2SFRAME_KERNEL: a built tree or its bzImage; see
// scripts/kernel-acceptance.sh for the one docs/acceptance.md's figures come
// from) with qemu, samples test programs with deferred perf call chains,
// and requires every chain of cfi2sframe's output to equal the true one or
// to stop where the kernel is known to stop (signal frame, a caller frame
// whose rule names a register); the controls (no .sframe, two damaged
// sections) must fail as predicted. No kernel is built here: without
// CFI2SFRAME_KERNEL the test skips, also in CI.
func TestKernelAcceptance(t *testing.T) {
	kernel := os.Getenv("CFI2SFRAME_KERNEL")
	if kernel == "" {
		t.Skip("CFI2SFRAME_KERNEL names no kernel (a built tree or bzImage with the SFrame user unwinder; see scripts/kernel-acceptance.sh); CI builds none")
	}
	if testing.Short() {
		t.Skip("-short: the kernel checks boot a virtual machine")
	}
	toolchain.Tool(t, "sid", "x86_64-as")
	dir := t.TempDir()
	c2s := buildCommand(t, dir)
	cmd := exec.Command("bash", "../scripts/kernel-acceptance.sh", kernel)
	cmd.Env = append(cmd.Environ(), "CFI2SFRAME="+c2s)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("scripts/kernel-acceptance.sh %s:\n%s", kernel, out)
	if err != nil {
		t.Errorf("scripts/kernel-acceptance.sh: %v", err)
	}
	lines := requireChecks(t, out, kernelChecks)
	// Enough samples to mean something: each of our runs has at least 50
	// chains in the spinning functions, all right.
	re := regexp.MustCompile(`^ok (\d+) of (\d+) deferred chains`)
	for _, c := range kernelChecks {
		if !strings.HasPrefix(c, "ours ") {
			continue
		}
		m := re.FindStringSubmatch(lines[c])
		if m == nil {
			continue // reported above
		}
		if n, _ := strconv.Atoi(m[2]); n < 50 {
			t.Errorf("check %q: %s chains, want at least 50", c, m[2])
		}
	}
}
