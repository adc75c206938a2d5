package goprologue

import (
	"strings"
	"testing"
)

// TestInputErrors checks what Analyze refuses: input, not code.
func TestInputErrors(t *testing.T) {
	ret := []byte{0xc3}
	for _, c := range []struct {
		name string
		arch Arch
		code []byte
		sp   []SPRange
		want string
	}{
		{"unknown architecture", Arch(9), ret, []SPRange{{0x10, 0x11, 0}}, "unknown architecture Arch(9)"},
		{"no code", AMD64, nil, nil, "no code"},
		{"no SP delta at the entry", AMD64, ret, []SPRange{{0x11, 0x12, 0}}, "no SP delta at the entry 0x10"},
		// NOPL; RET with a row for the NOPL only: the RET is reached.
		{"reached past the rows", AMD64, []byte{0x90, 0xc3}, []SPRange{{0x10, 0x11, 0}}, "no SP delta for the instruction at 0x11"},
	} {
		_, err := Analyze(c.arch, c.code, 0x10, c.sp)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// TestPadding checks that bytes past the pcsp rows that no path reaches,
// the INT3 padding between amd64 functions, are left alone.
func TestPadding(t *testing.T) {
	// RET; INT3; INT3 with a row for the RET only.
	got, err := Analyze(AMD64, []byte{0xc3, 0xcc, 0xcc}, 0x10, []SPRange{{0x10, 0x11, 0}})
	if err != nil || got.Kind != Frameless {
		t.Errorf("got %v, %v; want frameless", got, err)
	}
}

func TestResultString(t *testing.T) {
	for _, c := range []struct {
		r    Result
		want string
	}{
		{Result{Kind: Frameless}, "frame pointer never saved"},
		{Result{Kind: Unrecognized, Reason: ReasonSPWrite, PC: 0x47c9ac, Inst: "MOVQ 0(BX), SP"},
			"no frame pointer described: fp-sp-write at 0x47c9ac (MOVQ 0(BX), SP)"},
		{Result{Kind: Described, Rules: []Rule{inReg(0x10), saved(0x11, -16), inReg(0x20)}},
			"frame pointer: in its register from 0x10; at CFA-16 from 0x11; in its register from 0x20"},
	} {
		if got := c.r.String(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}
