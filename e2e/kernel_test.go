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
	"control chain.plain",
	"control drap.plain",
	"control signal.plain",
	"control plt.plain",
	"control goprog.plain",
	"control chain.damaged-lookup",
	"control chain.damaged-validate",
}

// kernelChecksARM64 are the checks of an arm64 kernel's run: every
// program in every build (scripts/kernel-acceptance.sh: GNU ld or lld,
// static or dynamic, with PAC or without) in our two outputs and plain,
// the Go program, and the two damaged copies of chain.ld-static.ours.
func kernelChecksARM64() []string {
	var cs []string
	for _, p := range []string{"chain", "drap", "signal", "plt"} {
		for _, b := range []string{"ld-static", "ld-dyn", "lld-static", "lld-dyn", "ld-static-pac", "ld-dyn-pac", "lld-static-pac", "lld-dyn-pac"} {
			cs = append(cs, "ours "+p+"."+b+".ours", "ours "+p+"."+b+".for-kernel", "control "+p+"."+b+".plain")
		}
	}
	return append(cs, "ours goprog.for-kernel", "control goprog.plain",
		"control chain.ld-static.damaged-lookup", "control chain.ld-static.damaged-validate")
}

// kernelChecksS390X are the checks of an s390x kernel's run: every
// program static and dynamic in our two outputs and plain, the Go
// program, and the two damaged copies of chain.static.ours.
func kernelChecksS390X() []string {
	var cs []string
	for _, p := range []string{"chain", "drap", "signal", "plt"} {
		for _, b := range []string{"static", "dyn"} {
			cs = append(cs, "ours "+p+"."+b+".ours", "ours "+p+"."+b+".for-kernel", "control "+p+"."+b+".plain")
		}
	}
	return append(cs, "ours goprog.for-kernel", "control goprog.plain",
		"control chain.static.damaged-lookup", "control chain.static.damaged-validate")
}

// kernelArch is the architecture of the kernel CFI2SFRAME_KERNEL names, as
// scripts/kernel-acceptance.sh decides it: KERNEL_ACCEPTANCE_ARCH, else
// for a tree the one of arch/arm64/boot/Image or arch/s390/boot/bzImage
// it has (and no x86 bzImage), for a file arm64 for an arm64 Image (its
// magic "ARM\x64" at 56) and s390x for an s390 bzImage ("S390EP" at
// 0x10008), else x86_64.
func kernelArch(kernel string) string {
	if a := os.Getenv("KERNEL_ACCEPTANCE_ARCH"); a != "" {
		return a
	}
	if fi, err := os.Stat(kernel); err == nil && fi.IsDir() {
		_, errX := os.Stat(filepath.Join(kernel, "arch/x86/boot/bzImage"))
		_, errA := os.Stat(filepath.Join(kernel, "arch/arm64/boot/Image"))
		_, errS := os.Stat(filepath.Join(kernel, "arch/s390/boot/bzImage"))
		switch {
		case errX == nil:
		case errA == nil:
			return "arm64"
		case errS == nil:
			return "s390x"
		}
		return "x86_64"
	}
	if f, err := os.Open(kernel); err == nil {
		defer f.Close()
		b := make([]byte, 6)
		if n, _ := f.ReadAt(b[:4], 56); n == 4 && string(b[:4]) == "ARMd" {
			return "arm64"
		}
		if n, _ := f.ReadAt(b, 0x10008); n == 6 && string(b) == "S390EP" {
			return "s390x"
		}
	}
	return "x86_64"
}

// TestKernelAcceptance boots a kernel that has the SFrame user-space
// unwinder (CFI2SFRAME_KERNEL: a built tree or its bzImage; see
// scripts/kernel-acceptance.sh for the one docs/acceptance.md's figures come
// from) with qemu, samples test programs with deferred perf call chains,
// and requires every chain of cfi2sframe's output to equal the true one or
// to stop where the kernel is known to stop (signal frame, a caller frame
// whose rule names a register); the controls (no .sframe, two damaged
// sections) must fail as predicted. The script records; internal/judge
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
		tool := "x86_64-as"
		switch kernelArch(kernel) {
		case "arm64":
			tool = "aarch64-as"
		case "s390x":
			tool = "s390x-as"
		}
		toolchain.Tool(t, "sid", tool)
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
	want := kernelChecks
	if a, err := os.ReadFile(filepath.Join(run, "arch")); err == nil {
		switch strings.TrimSpace(string(a)) {
		case "arm64":
			want = kernelChecksARM64()
		case "s390x":
			want = kernelChecksS390X()
		}
	}
	got := requireChecks(t, checks, want)
	// Enough samples to mean something: each of our runs has at least 50
	// chains in the spinning functions, all right.
	re := regexp.MustCompile(`^(\d+) of (\d+) deferred chains`)
	for _, c := range want {
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
