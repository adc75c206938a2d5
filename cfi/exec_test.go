package cfi

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// exec1 parses a one-FDE .eh_frame around program and executes it.
func exec1(t *testing.T, c cieSpec, program []byte) (*Table, error) {
	t.Helper()
	data := ehFrame(binary.LittleEndian, 0x2000, c, fdeSpec{start: 0x1000, size: 0x100, program: program})
	fdes, errs := Parse(&Section{kind: kindEH, data: data, addr: 0x2000, order: binary.LittleEndian, ptrSize: 8})
	if len(errs) != 0 || len(fdes) != 1 {
		t.Fatalf("parse: %d FDEs, errors %v", len(fdes), errs)
	}
	return executeFDE(fdes[0])
}

type wantRow struct {
	Loc  uint64
	CFA  CFA
	Regs map[uint64]Rule
	Mang bool
	PC   bool
	Args uint64
}

func rowsOf(t *Table) []wantRow {
	var out []wantRow
	for _, r := range t.Rows {
		w := wantRow{Loc: r.Loc, CFA: r.CFA, Regs: map[uint64]Rule{}, Mang: r.MangledRA, PC: r.RAStateWithPC, Args: r.ArgsSize}
		for _, rr := range r.Regs {
			w.Regs[rr.Reg] = rr.Rule
		}
		out = append(out, w)
	}
	return out
}

var (
	ripAt8 = Rule{Kind: Offset, Offset: -8}
	rsp8   = CFA{Kind: CFARegOffset, Reg: 7, Offset: 8}
)

func cfa(reg uint64, off int64) CFA { return CFA{Kind: CFARegOffset, Reg: reg, Offset: off} }

func TestOpcodes(t *testing.T) {
	tests := []struct {
		name    string
		program []byte
		want    []wantRow
	}{
		{"empty program: one row from the CIE", nil,
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0}}},
		{"push rbp; mov rsp,rbp (advance_loc, def_cfa_offset, offset, def_cfa_register)",
			ins(op(0x41), op(0x0e), uleb(16), op(0x86), uleb(2), op(0x43), op(0x0d), uleb(6)),
			[]wantRow{
				{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1001, cfa(7, 16), map[uint64]Rule{6: {Kind: Offset, Offset: -16}, 16: ripAt8}, false, false, 0},
				{0x1004, cfa(6, 16), map[uint64]Rule{6: {Kind: Offset, Offset: -16}, 16: ripAt8}, false, false, 0},
			}},
		{"advance_loc1/2/4 and MIPS advance_loc8",
			ins(op(0x02, 1), op(0x0e), uleb(16), op(0x03, 2, 0), op(0x0e), uleb(24), op(0x04, 3, 0, 0, 0), op(0x0e), uleb(32), op(0x1d, 4, 0, 0, 0, 0, 0, 0, 0), op(0x0e), uleb(40)),
			[]wantRow{
				{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1001, cfa(7, 16), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1003, cfa(7, 24), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1006, cfa(7, 32), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x100a, cfa(7, 40), map[uint64]Rule{16: ripAt8}, false, false, 0},
			}},
		{"def_cfa, def_cfa_sf, def_cfa_offset_sf",
			ins(op(0x0c), uleb(3), uleb(24), op(0x41), op(0x12), uleb(6), sleb(-2), op(0x41), op(0x13), sleb(-4)),
			[]wantRow{
				{0x1000, cfa(3, 24), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1001, cfa(6, 16), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1002, cfa(6, 32), map[uint64]Rule{16: ripAt8}, false, false, 0},
			}},
		{"offset_extended(_sf), val_offset(_sf), GNU_negative_offset_extended",
			ins(op(0x05), uleb(3), uleb(2), op(0x11), uleb(12), sleb(-3), op(0x14), uleb(13), uleb(1), op(0x15), uleb(14), sleb(2), op(0x2f), uleb(15), uleb(4)),
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{3: {Kind: Offset, Offset: -16}, 12: {Kind: Offset, Offset: 24}, 13: {Kind: ValOffset, Offset: -8},
				14: {Kind: ValOffset, Offset: -16}, 15: {Kind: Offset, Offset: 32}, 16: ripAt8}, false, false, 0}}},
		{"register, undefined, same_value",
			ins(op(0x09), uleb(16), uleb(11), op(0x07), uleb(3), op(0x08), uleb(6)),
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{16: {Kind: Register, Reg: 11}, 3: {Kind: Undefined}, 6: {Kind: SameValue}}, false, false, 0}}},
		{"expression, val_expression, def_cfa_expression",
			ins(op(0x10), uleb(6), uleb(2), op(0x76, 0x00), op(0x16), uleb(3), uleb(2), op(0x73, 0x08), op(0x0f), uleb(3), op(0x76, 0x78, 0x06)),
			[]wantRow{{0x1000, CFA{Kind: CFAExpression, Expr: []byte{0x76, 0x78, 0x06}}, map[uint64]Rule{6: {Kind: Expression, Expr: []byte{0x76, 0}},
				3: {Kind: ValExpression, Expr: []byte{0x73, 8}}, 16: ripAt8}, false, false, 0}}},
		{"restore and restore_extended go back to the CIE's rule (or none)",
			ins(op(0x90), uleb(3), op(0x83), uleb(2), op(0x41), op(0xd0), op(0x41), op(0x06), uleb(3)),
			[]wantRow{
				{0x1000, rsp8, map[uint64]Rule{3: {Kind: Offset, Offset: -16}, 16: {Kind: Offset, Offset: -24}}, false, false, 0},
				{0x1001, rsp8, map[uint64]Rule{3: {Kind: Offset, Offset: -16}, 16: ripAt8}, false, false, 0},
				{0x1002, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0},
			}},
		{"remember_state/restore_state keep the CFA too",
			ins(op(0x0e), uleb(16), op(0x86), uleb(2), op(0x0a), op(0x41), op(0x0e), uleb(8), op(0xc6), op(0x41), op(0x0b)),
			[]wantRow{
				{0x1000, cfa(7, 16), map[uint64]Rule{6: {Kind: Offset, Offset: -16}, 16: ripAt8}, false, false, 0},
				{0x1001, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1002, cfa(7, 16), map[uint64]Rule{6: {Kind: Offset, Offset: -16}, 16: ripAt8}, false, false, 0},
			}},
		{"def_cfa_register after an expression returns to register + the last offset (libgcc, readelf)",
			ins(op(0x0e), uleb(16), op(0x41), op(0x0f), uleb(2), op(0x77, 8), op(0x0e), uleb(24), op(0x41), op(0x0d), uleb(6)),
			[]wantRow{
				{0x1000, cfa(7, 16), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1001, CFA{Kind: CFAExpression, Expr: []byte{0x77, 8}}, map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1002, cfa(6, 24), map[uint64]Rule{16: ripAt8}, false, false, 0},
			}},
		{"GNU_args_size and nop",
			ins(op(0x00), op(0x2e), uleb(16), op(0x41), op(0x2e), uleb(0)),
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 16}, {0x1001, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0}}},
		{"negate_ra_state toggles, negate_ra_state_with_pc marks",
			ins(op(0x2d), op(0x41), op(0x2d), op(0x41), op(0x2c)),
			[]wantRow{
				{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, true, false, 0},
				{0x1001, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1002, rsp8, map[uint64]Rule{16: ripAt8}, true, true, 0},
			}},
		{"two advances to one PC: the later rules win; an advance with no rule set makes no row; setting a rule to its value does",
			ins(op(0x41), op(0x0e), uleb(16), op(0x40), op(0x0e), uleb(24), op(0x41), op(0x41), op(0x0e), uleb(24)),
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0}, {0x1001, cfa(7, 24), map[uint64]Rule{16: ripAt8}, false, false, 0},
				{0x1003, cfa(7, 24), map[uint64]Rule{16: ripAt8}, false, false, 0}}},
		{"set_loc (pcrel sdata4, like the FDE start)",
			ins(op(0x01), func() []byte {
				// The operand sits at FDE program offset 1; its address is
				// section 0x2000 + program start (CIE 24 bytes + FDE header 17) + 1.
				field := int64(0x2000 + 24 + 4 + 4 + 4 + 4 + 1 + 1)
				x := &bld{order: binary.LittleEndian}
				return x.u32(uint32(int32(0x1010 - field))).b
			}(), op(0x0e), uleb(16)),
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0}, {0x1010, cfa(7, 16), map[uint64]Rule{16: ripAt8}, false, false, 0}}},
		{"advance past the FDE end stops the table",
			ins(op(0x02, 0xff), op(0x0e), uleb(16), op(0x02, 0x10), op(0x0e), uleb(24)),
			[]wantRow{{0x1000, rsp8, map[uint64]Rule{16: ripAt8}, false, false, 0}, {0x10ff, cfa(7, 16), map[uint64]Rule{16: ripAt8}, false, false, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab, err := exec1(t, amd64CIE, tc.program)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rowsOf(tab), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("rows (-want +got):\n%s", d)
			}
		})
	}
}

// TestTouched checks what each interval records as set, for translate's
// imitation of GNU as's row boundaries.
func TestTouched(t *testing.T) {
	tab, err := exec1(t, amd64CIE, ins(
		op(0x41), op(0x0e), uleb(8), // def_cfa_offset to its value: CFA touched
		op(0x41), op(0x83), uleb(2), // offset rbx
		op(0x41), op(0xc3), // restore rbx
		op(0x41), op(0x0a), op(0x41), op(0x0b), // remember (nothing), restore_state
		op(0x41), op(0x2d), // negate_ra_state
		op(0x41), op(0x00)))
	if err != nil {
		t.Fatal(err)
	}
	want := []touch{{}, {cfa: true}, {set: 1 << 3}, {restored: 1 << 3}, {restoreState: true}, {raState: true}}
	var got []touch
	for _, r := range tab.Rows {
		got = append(got, r.touched)
	}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(touch{})); d != "" {
		t.Errorf("touches (-want +got):\n%s", d)
	}
	if tab.LastAdvance != 0x1007 {
		t.Errorf("LastAdvance %#x, want 0x1007", tab.LastAdvance)
	}
}

func TestExecuteErrors(t *testing.T) {
	tests := []struct {
		name    string
		program []byte
		want    string
	}{
		{"unknown opcode", op(0x41, 0x3f), "unknown DW_CFA opcode 0x3f"},
		{"restore_state without remember", op(0x0b), "without a remembered state"},
		{"truncated operand", op(0x0c, 0x07), "truncated operand"},
		{"expression longer than the program", ins(op(0x10), uleb(6), uleb(9), op(0x76)), "runs past the program"},
		{"set_loc backwards", ins(op(0x41), op(0x01), op(0xd5, 0xef, 0xff, 0xff)), "backwards"}, // 0x1000 from the operand at 0x202b
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exec1(t, amd64CIE, tc.program)
			var ce *Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want a *cfi.Error containing %q", err, tc.want)
			}
			// The offset points into the FDE's program (after CIE 24 + FDE header 17 bytes).
			if ce.Off < 24+17 || ce.Off > 24+17+int64(len(tc.program)) {
				t.Errorf("error offset %d is not inside the program", ce.Off)
			}
		})
	}
}

func TestRememberDepthBounded(t *testing.T) {
	prog := make([]byte, maxStateDepth+10)
	for i := range prog {
		prog[i] = 0x0a
	}
	if _, err := exec1(t, amd64CIE, prog); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("error %v: want remember_state depth error", err)
	}
}

// TestRowsBounded: an FDE whose rows change only the CFA (no register
// rule, so the rule-cell cap does not see them) stops at maxRows with an
// error naming the FDE, instead of growing with the program.
func TestRowsBounded(t *testing.T) {
	var prog []byte
	for i := 0; i <= maxRows; i++ {
		prog = append(prog, opDefCFAOffset, byte(8+8*(i%2)), opAdvanceLoc|1)
	}
	data := ehFrame(binary.LittleEndian, 0x2000, amd64CIE, fdeSpec{start: 0x1000, size: 1 << 30, program: prog})
	fdes, errs := Parse(&Section{kind: kindEH, data: data, addr: 0x2000, order: binary.LittleEndian, ptrSize: 8})
	if len(errs) != 0 || len(fdes) != 1 {
		t.Fatalf("parse: %d FDEs, errors %v", len(fdes), errs)
	}
	_, err := executeFDE(fdes[0])
	if err == nil || !strings.Contains(err.Error(), "rows in one FDE") || !strings.Contains(err.Error(), "FDE at offset") {
		t.Fatalf("error %v: want the row limit, naming the FDE", err)
	}
	// One row fewer than the limit is fine.
	prog = prog[:3*(maxRows-1)]
	data = ehFrame(binary.LittleEndian, 0x2000, amd64CIE, fdeSpec{start: 0x1000, size: 1 << 30, program: prog})
	fdes, _ = Parse(&Section{kind: kindEH, data: data, addr: 0x2000, order: binary.LittleEndian, ptrSize: 8})
	if tab, err := executeFDE(fdes[0]); err != nil || len(tab.Rows) != maxRows-1 {
		t.Fatalf("maxRows-1 rows: %v", err)
	}
}

// TestTableRowAt: the row in effect at a PC is the last one starting at
// or before it; none before the first.
func TestTableRowAt(t *testing.T) {
	tab := &Table{Rows: []Row{{Loc: 0x1000}, {Loc: 0x1004}, {Loc: 0x1010}}}
	for _, tt := range []struct {
		pc   uint64
		want int
	}{{0xfff, -1}, {0x1000, 0}, {0x1003, 0}, {0x1004, 1}, {0x100f, 1}, {0x1010, 2}, {0x2000, 2}} {
		if got := tab.RowAt(tt.pc); got != tt.want {
			t.Errorf("RowAt(%#x) = %d, want %d", tt.pc, got, tt.want)
		}
	}
	if got := (&Table{}).RowAt(0x1000); got != -1 {
		t.Errorf("RowAt in a table without rows = %d, want -1", got)
	}
}

// executeFDE runs f's CIE initial instructions and its program into a
// table of its own, as a zero Context does.
func executeFDE(f *FDE) (*Table, error) {
	var c Context
	t := &Table{}
	if err := c.Execute(f, t); err != nil {
		return nil, err
	}
	return t, nil
}
