package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
)

// TestVerifyFor runs verify --for on GNU's fixtures: sid's V3 library passes
// the kernel's rules and not glibc's; trixie's V2 the reverse. sid's V3
// program has GNU as 2.47's signal FDE without FREs, at which the kernel
// removes the section.
func TestVerifyFor(t *testing.T) {
	tests := []struct {
		file, reader string
		ok           bool
		want         string
	}{
		{"v3-x86_64-lib-now.so", "kernel", true, "kernel: ok (7 functions, 19 FREs)"},
		// A library's section is read once sframe_register registers it.
		{"v3-x86_64-lib-now.so", "kernel", true, "v3-x86_64-lib-now.so: note: a shared object: the kernel reads its .sframe once the dynamic loader (or a preloaded library) registers it with sframe_register()"},
		{"v3-x86_64-exe", "kernel", false, "kernel: FDE 4 (pc 0x4003ab): no-fre: signal FDE without FREs"},
		{"v3-x86_64-exe", "glibc", false, "glibc: header: version: version 3"},
		{"v2-x86_64-exe", "kernel", false, "kernel: header: version: version 2 (the kernel reads version 3 only) (reject) (and 1 more)"},
		{"v2-x86_64-exe", "glibc", true, "glibc: ok (11 functions, 40 FREs)"},
		{"v2-x86_64-exe", "libsframe", false, "FDE 0 (pc 0x400350): v2-start-not-pcrel"},
	}
	for _, tt := range tests {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs([]string{"verify", "--for", tt.reader, "../../testdata/sframe/" + tt.file})
		err := root.Execute()
		if (err == nil) != tt.ok || !strings.Contains(out.String(), tt.want) {
			t.Errorf("verify --for %s %s: err %v, output %q; want ok=%v and %q", tt.reader, tt.file, err, out.String(), tt.ok, tt.want)
		}
	}
	// A program's is registered at exec: no such note.
	root := newRootCmd()
	var exeOut bytes.Buffer
	root.SetOut(&exeOut)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"verify", "--for", "kernel", "../../testdata/sframe/v3-x86_64-exe"})
	_ = root.Execute()
	if strings.Contains(exeOut.String(), "sframe_register") {
		t.Errorf("verify --for kernel of a program: %q", exeOut.String())
	}
	root = newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"verify", "--for", "gdb", "../../testdata/sframe/v3-x86_64-exe"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "unknown reader") {
		t.Errorf("verify --for gdb: err %v, want unknown reader", err)
	}
}

// TestSignalFramesByDefault: V3 output gives signal trampolines whose CFI
// cannot be described a signal FDE by default, --for kernel and --for
// libsframe too, since the kernel's unwinder stops at its RA-undefined FRE
// but falls back to its frame-pointer walk, and records a wrong frame,
// where there is no FDE (scripts/kernel-acceptance.sh saw that after
// glibc's __restore_rt). --signal-frames=false turns them off; V2 has no
// signal FDE. libc's __restore_rt is the trampoline; the test skips where
// libc is not there.
func TestSignalFramesByDefault(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no %s", libc)
	}
	signalFDEs := func(args ...string) int {
		t.Helper()
		out := filepath.Join(t.TempDir(), "libc.so.6")
		if _, stderr, err := runCmd(append(append([]string{"-q"}, args...), libc, "-o", out)...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		f, err := elfread.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		es, err := f.SFrame()
		if err != nil {
			t.Fatal(err)
		}
		sec, err := sfsection.Decode(es.Data, es.Addr)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, d := range sec.FDEs {
			if d.Signal {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		args   []string
		signal bool
	}{
		{nil, true},
		{[]string{"--for", "kernel"}, true},
		{[]string{"--for", "libsframe"}, true},
		{[]string{"--signal-frames=false"}, false},
		{[]string{"--for", "kernel", "--signal-frames=false"}, false},
		{[]string{"--sframe-version", "2"}, false},
		{[]string{"--for", "glibc"}, false},
	} {
		if n := signalFDEs(c.args...); (n > 0) != c.signal {
			t.Errorf("%v: %d signal FDEs, want some: %v", c.args, n, c.signal)
		}
	}
}

// TestVerifyForNotesLimits: rules the kernel uses only in the interrupted
// frame do not fail verify --for kernel; one note names the first. libc
// has one (a function whose return address is in a register).
func TestVerifyForNotesLimits(t *testing.T) {
	const libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	if _, err := os.Stat(libc); err != nil {
		t.Skipf("no %s", libc)
	}
	out := filepath.Join(t.TempDir(), "libc.so.6")
	if _, stderr, err := runCmd("-q", "--for", "kernel", libc, "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	stdout, _, err := runCmd("verify", "--for", "kernel", out)
	if err != nil || !strings.Contains(stdout, "kernel: ok (") || !strings.Contains(stdout, "are used only in the interrupted frame") ||
		!strings.Contains(stdout, "innermost-register") {
		t.Errorf("verify --for kernel: %v\n%s", err, stdout)
	}
}
