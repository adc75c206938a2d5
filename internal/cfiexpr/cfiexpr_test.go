package cfiexpr

import "testing"

func TestParseSimpleExpr(t *testing.T) {
	for _, tc := range []struct {
		name string
		expr []byte
		want SimpleExpr
		ok   bool
	}{
		{"breg7 -8", []byte{0x77, 0x78}, SimpleExpr{Reg: 7, Offset: -8}, true},
		{"breg6 16 deref", []byte{0x76, 0x10, 0x06}, SimpleExpr{Reg: 6, Offset: 16, Deref: true}, true},
		{"bregx 33 0", []byte{0x92, 0x21, 0x00}, SimpleExpr{Reg: 33}, true},
		{"truncated offset", []byte{0x77, 0x80}, SimpleExpr{}, false},
		{"deref then more", []byte{0x77, 0x00, 0x06, 0x06}, SimpleExpr{}, false},
		{"not a breg", []byte{0x30}, SimpleExpr{}, false},
		{"empty", nil, SimpleExpr{}, false},
	} {
		got, ok := ParseSimpleExpr(tc.expr)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParsePLTExpr(t *testing.T) {
	// GNU ld's: breg7 8; breg16 0; lit15; and; lit11; ge; lit3; shl; plus.
	gnu := []byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22}
	got, ok := ParsePLTExpr(gnu)
	want := PLTExpr{SPReg: 7, SPOffset: 8, PCReg: 16, Mask: 15, Threshold: 11, Extra: 8}
	if !ok || got != want {
		t.Errorf("GNU ld's PLT expression: %+v, %v; want %+v", got, ok, want)
	}
	for i := range gnu {
		if _, ok := ParsePLTExpr(gnu[:i]); ok {
			t.Errorf("the first %d bytes are taken", i)
		}
	}
	if _, ok := ParsePLTExpr(append(gnu[:len(gnu):len(gnu)], 0x06)); ok {
		t.Error("a trailing deref is taken")
	}
}
