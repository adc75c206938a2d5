package main

import (
	"bytes"
	"strings"
	"testing"
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
	root := newRootCmd()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"verify", "--for", "gdb", "../../testdata/sframe/v3-x86_64-exe"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "unknown reader") {
		t.Errorf("verify --for gdb: err %v, want unknown reader", err)
	}
}
