package cfi

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestErrorOffsetsHex: errors name the section and the record's offset
// in hex, as readelf prints offsets.
func TestErrorOffsetsHex(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Section: ".eh_frame", Off: 0, Msg: "record length"}, ".eh_frame: offset 0x0: record length"},
		{&Error{Section: ".debug_frame", Off: 0x1c, Msg: "no CIE at this offset"}, ".debug_frame: offset 0x1c: no CIE at this offset"},
		{&Error{Section: ".eh_frame", Off: -4, Msg: "x"}, ".eh_frame: offset -0x4: x"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
	// A program that fails: the FDE's offset in hex too.
	data := ehFrame(binary.LittleEndian, 0x2000, amd64CIE,
		fdeSpec{start: 0x1000, size: 0x10, program: ins(op(0x41))},
		fdeSpec{start: 0x1010, size: 0x10, program: ins(op(0x3e))})
	fdes, errs := Parse(&Section{kind: kindEH, data: data, addr: 0x2000, order: binary.LittleEndian, ptrSize: 8})
	if len(errs) != 0 || len(fdes) != 2 {
		t.Fatalf("parse: %d FDEs, %v", len(fdes), errs)
	}
	_, err := executeFDE(fdes[1])
	var e *Error
	if !errors.As(err, &e) || e.Section != ".eh_frame" || e.Error() != ".eh_frame: offset "+hex(e.Off)+": FDE at offset "+hex(fdes[1].Offset)+": unknown DW_CFA opcode 0x3e" {
		t.Errorf("execution error %v (%+v)", err, e)
	}
}
