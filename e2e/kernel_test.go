package e2e

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/judge"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// kernelChecks are the checks internal/testing/judge makes of the kernel
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

// programChecks are the checks of the programs added to the harness
// later, by program (and the architectures it runs on: dyn on both,
// noreturn, whose layout the script checks in x86-64 code, on x86-64):
// records of a run from before one (judged again with
// CFI2SFRAME_KERNEL_RUN) have none of its runs, and are not required to;
// a new run must have them all.
var programChecks = map[string][]string{
	"noreturn x86_64": {
		"ours noreturn.ours",
		"ours noreturn.for-kernel",
		"noreturn noreturn.ours",
		"noreturn noreturn.for-kernel",
		"control noreturn.plain",
	},
	"dyn x86_64 arm64": {
		"ours dyn.ours+pre",
		"ours dyn.for-kernel+pre",
		"unregistered dyn.ours",
		"unregistered dyn.for-kernel",
		"control dyn.plain+pre",
		"control dyn.plain",
	},
}

// wantChecks is the checks required of the records in dir, of a kernel of
// arch x86_64, arm64 or s390x: kernelChecks, kernelChecksARM64 or
// kernelChecksS390X, and those of
// programChecks, each program's only where the records have a run of it
// unless fresh (the records of a run just made).
func wantChecks(t *testing.T, dir, arch string, fresh bool) []string {
	want := slices.Clone(kernelChecks)
	switch arch {
	case "arm64":
		want = kernelChecksARM64()
	case "s390x":
		want = kernelChecksS390X()
	}
	runs, err := os.ReadFile(filepath.Join(dir, "runs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range slices.Sorted(maps.Keys(programChecks)) {
		f := strings.Fields(k)
		prog := f[0]
		if !slices.Contains(f[1:], arch) {
			continue
		}
		if !fresh && !regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(prog)+`\.`).Match(runs) {
			t.Logf("the records in %s have no run of %s (made before it was added): its checks are not required", dir, prog)
			continue
		}
		want = append(want, programChecks[k]...)
	}
	return want
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
// whose rule names a register), a dynamically linked program's too when a
// preloaded library registers its libraries with sframe_register (without
// it their frames must not come out right: limit 5); the controls (no
// .sframe, two damaged sections) must fail as predicted. The script records; internal/testing/judge
// judges the records, and CFI2SFRAME_KERNEL_RUN names the records of an
// earlier run to judge instead. No kernel is built here: without either
// variable the test skips, also in CI.
func TestKernelAcceptance(t *testing.T) {
	kernel, run := os.Getenv("CFI2SFRAME_KERNEL"), os.Getenv("CFI2SFRAME_KERNEL_RUN")
	fresh := run == ""
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
	arch := "x86_64"
	if a, err := os.ReadFile(filepath.Join(run, "arch")); err == nil {
		switch a := strings.TrimSpace(string(a)); a {
		case "arm64", "s390x":
			arch = a
		}
	}
	want := wantChecks(t, run, arch, fresh)
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
