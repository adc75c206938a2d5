package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/judge"
	"github.com/cfi2sframe/cfi2sframe/internal/toolchain"
)

// kernelChecks are the checks internal/judge makes of the kernel
// harness's runs that must say ok: a run that skipped or lost one fails
// rather than passing with fewer. The "info" checks (GNU as --gsframe's
// figures) are logged, not judged.
var kernelChecks = []string{
	"ours chain.ours",
	"ours drap.ours",
	"ours signal.ours",
	"ours plt.ours",
	"ours chain.for-kernel",
	"ours drap.for-kernel",
	"ours signal.for-kernel",
	"ours plt.for-kernel",
	"ours goprog.for-kernel",
	"ours dyn.ours+pre",
	"ours dyn.for-kernel+pre",
	"ours noreturn.ours",
	"ours noreturn.for-kernel",
	"noreturn noreturn.ours",
	"noreturn noreturn.for-kernel",
	"unregistered dyn.ours",
	"unregistered dyn.for-kernel",
	"control chain.plain",
	"control drap.plain",
	"control signal.plain",
	"control plt.plain",
	"control goprog.plain",
	"control dyn.plain+pre",
	"control dyn.plain",
	"control noreturn.plain",
	"control chain.damaged-lookup",
	"control chain.damaged-validate",
}

// TestKernelAcceptance boots a kernel that has the SFrame user-space
// unwinder (CFI2SFRAME_KERNEL: a built tree or its bzImage; see
// scripts/kernel-acceptance.sh for the one docs/acceptance.md's figures come
// from) with qemu, samples test programs with deferred perf call chains,
// and requires every chain of cfi2sframe's output to equal the true one or
// to stop where the kernel is known to stop (signal frame, a caller frame
// whose rule names a register), a dynamically linked program's too when a
// preloaded library registers its libraries with sframe_register (without
// it their frames must not come out right: limit 5); the controls (no
// .sframe, two damaged sections) must fail as predicted. The script records; internal/judge
// judges the records, and CFI2SFRAME_KERNEL_RUN names the records of an
// earlier run to judge instead. No kernel is built here: without either
// variable the test skips, also in CI.
func TestKernelAcceptance(t *testing.T) {
	kernel, run := os.Getenv("CFI2SFRAME_KERNEL"), os.Getenv("CFI2SFRAME_KERNEL_RUN")
	if kernel == "" && run == "" {
		t.Skip("CFI2SFRAME_KERNEL names no kernel (a built tree or bzImage with the SFrame user unwinder; see scripts/kernel-acceptance.sh) and CFI2SFRAME_KERNEL_RUN no recorded run; CI builds none")
	}
	if run == "" {
		if testing.Short() {
			t.Skip("-short: the kernel checks boot a virtual machine")
		}
		toolchain.Tool(t, "sid", "x86_64-as")
		dir := t.TempDir()
		c2s := buildCommand(t, dir)
		run = filepath.Join(dir, "run")
		cmd := exec.Command("bash", "../scripts/kernel-acceptance.sh", kernel, run)
		cmd.Env = append(cmd.Environ(), "CFI2SFRAME="+c2s)
		out, err := cmd.CombinedOutput()
		t.Logf("scripts/kernel-acceptance.sh %s:\n%s", kernel, out)
		if err != nil {
			t.Fatalf("scripts/kernel-acceptance.sh: %v", err)
		}
	}
	report, checks, err := judge.Kernel(run)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the runs in %s:\n%s", run, report)
	got := requireChecks(t, checks, kernelChecks)
	// Enough samples to mean something: each of our runs has at least 50
	// chains in the spinning functions, all right.
	re := regexp.MustCompile(`^(\d+) of (\d+) deferred chains`)
	for _, c := range kernelChecks {
		if !strings.HasPrefix(c, "ours ") {
			continue
		}
		m := re.FindStringSubmatch(got[c].Text)
		if m == nil || got[c].Status != "ok" {
			continue // reported above
		}
		if n, _ := strconv.Atoi(m[2]); n < 50 {
			t.Errorf("check %q: %s chains, want at least 50", c, m[2])
		}
	}
}
