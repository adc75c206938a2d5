package cfi

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// TestContext: SortEntries orders entries by start, keeping the order of
// equal starts; a Context executes them in that order, passes over one
// that cannot be executed (its error in the context's Errors) and ends
// with io.EOF.
func TestContext(t *testing.T) {
	const addr = 0x600000                   // where hostile.EHFrameOnly puts .eh_frame
	ok := ins(op(0x41), op(0x0e), uleb(16)) // advance 1; def_cfa_offset 16
	bad := ins(op(0x41), op(0x3e))          // advance 1; an opcode that does not exist
	data := ehFrame(binary.LittleEndian, addr, amd64CIE,
		fdeSpec{start: 0x3000, size: 0x10, program: ok},
		fdeSpec{start: 0x1000, size: 0x20, program: ok},
		fdeSpec{start: 0x2000, size: 0x10, program: bad},
		fdeSpec{start: 0x1000, size: 0x08, program: ok})
	f, err := elfread.NewFileBytes(hostile.EHFrameOnly(data), "t")
	if err != nil {
		t.Fatal(err)
	}
	st, err := open(f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Entries()) != 4 || len(st.Errors()) != 0 {
		t.Fatalf("%d entries, errors %v: want 4, none", len(st.Entries()), st.Errors())
	}
	SortEntries(st.Entries())
	type r struct{ Start, Size uint64 }
	var order []r
	for _, e := range st.Entries() {
		order = append(order, r{e.Start, e.Size})
	}
	if d := cmp.Diff([]r{{0x1000, 0x20}, {0x1000, 0x08}, {0x2000, 0x10}, {0x3000, 0x10}}, order); d != "" {
		t.Errorf("sorted (-want +got):\n%s", d)
	}
	c := st.Context(st.Entries())
	var got []r
	for {
		fde, err := c.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tab := c.Table()
		if tab == nil {
			continue
		}
		if tab.FDE != fde {
			t.Fatalf("%#x: the table is not of the FDE Next gave", fde.Start)
		}
		got = append(got, r{tab.FDE.Start, tab.FDE.Size})
		if len(tab.Rows) != 2 {
			t.Errorf("%#x: %d rows, want 2", tab.FDE.Start, len(tab.Rows))
		}
	}
	if d := cmp.Diff([]r{{0x1000, 0x20}, {0x1000, 0x08}, {0x3000, 0x10}}, got); d != "" {
		t.Errorf("executed (-want +got):\n%s", d)
	}
	if len(c.Errors()) != 1 || len(st.Errors()) != 0 {
		t.Errorf("errors %v (file %v): want the one of the FDE at 0x2000", c.Errors(), st.Errors())
	}
	if _, err := c.Next(); err != io.EOF {
		t.Errorf("Next after the end: %v, want io.EOF", err)
	}
}
