package pltsim

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/google/go-cmp/cmp"
)

func code(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The stubs are objdump -d of GNU ld 2.47.50's PLT in an s390x program.
const (
	plt0 = "e3 10 f0 38 00 24 c0 10 00 01 3c 3d d2 07 f0 30 10 08 e3 10 10 10 00 04 07 f1 07 00 07 00 07 00"
	pltn = "c0 10 00 01 3c 50 e3 10 10 00 00 04 07 f1 0d 10 e3 10 10 0c 00 14 c0 f4 ff ff ff e5 00 00 00 18"
)

func TestSimulatePLTS390X(t *testing.T) {
	entry := []Step{{Off: 0, CFAOffset: 160}}
	tests := []struct {
		name string
		code string
		want []Step
		err  string
	}{
		{name: "plt0", code: plt0, want: entry},
		{name: "pltn", code: pltn, want: entry},
		// A relocation offset that reads as a nopr is still data.
		{name: "pltn offset 0x07000000", code: pltn[:len(pltn)-11] + "07 00 00 00", want: entry},
		{name: "aghi r15 is refused", code: "a7 fb ff 60 07 f1", err: "unexpected instruction"},
		{name: "lg into r14", code: "e3 e0 10 00 00 04 07 f1", err: "writes r14"},
		{name: "larl into r15", code: "c0 f0 00 00 00 10 07 f1", err: "writes r15"},
		{name: "basr r11", code: "0d b0 07 f1", err: "writes r11"},
		{name: "basr that calls", code: "0d 1e 07 f1", err: "unexpected instruction"},
		{name: "brasl is a call", code: "c0 e5 00 00 00 10 07 f1", err: "unexpected instruction"},
		{name: "conditional branch", code: "07 81", err: "unexpected instruction"},
		{name: "no branch", code: "c0 10 00 01 3c 50 07 00", err: "does not end in a branch"},
		{name: "code after the branch", code: "07 f1 c0 10 00 01 3c 50", err: "does not end in a branch"},
		{name: "data without jg", code: "07 f1 00 00 00 18", err: "unexpected instruction"},
		{name: "truncated", code: "07 f1 c0 10 00", err: "runs past"},
		{name: "empty", code: "", err: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Simulate(arch.S390X, code(t, tc.code), tc.name == "plt0")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}
