package delvecheck

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-delve/delve/pkg/dwarf/frame"

	"github.com/cfi2sframe/cfi2sframe/cfi"
)

// Package delvecheck is a module of its own so that the main module does
// not depend on delve (v1.27.2 needs Go 1.25; v1.26 loops forever on
// DW_CFA_GNU_args_size). CI runs it with `go test` in this directory.
//
// TestDelveAgrees uses delve's interpreter (pkg/dwarf/frame) as an
// independent second opinion on little-endian x86-64 files: at each FDE's
// start, at each of our row boundaries and just before them, delve's
// EstablishFrame must give our CFA and our rules for the return address
// and the callee-saved registers. Delve does not tell "undefined" from
// "no rule" (its DW_CFA_restore turns a register without an initial rule
// into undefined), so both count as "not saved" here; what DESIGN.md says
// delve cannot handle is skipped and counted.
func TestDelveAgrees(t *testing.T) {
	files, _ := filepath.Glob("../../../testdata/sframe/v*-x86_64-*")
	for _, f := range []string{"/usr/bin/ls", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6"} {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	regs := []uint64{3, 6, 12, 13, 14, 15, 16} // rbx rbp r12-r15, rip
	var fdes, pcs, skipped int
	for _, name := range files {
		if filepath.Ext(name) == ".objdump" {
			continue
		}
		ef, err := elf.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sec := ef.Section(".eh_frame")
		if sec == nil || ef.Type == elf.ET_REL {
			ef.Close()
			continue // delve reads linked files
		}
		data, err := sec.Data()
		if err != nil {
			ef.Close()
			t.Fatal(err)
		}
		cf, err := cfi.Open(ef)
		ef.Close()
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := frame.Parse(data, binary.LittleEndian, 0, 8, sec.Addr)
		if err != nil {
			t.Logf("%s: delve cannot parse .eh_frame (%v); skipped", name, err)
			continue
		}
		var ours []*cfi.FDE
		for _, s := range cf.Sections() {
			if s.Name() != ".eh_frame" {
				continue
			}
			fdes, errs := cfi.Parse(s)
			if len(errs) > 0 {
				t.Errorf("%s: %v", name, errs)
			}
			ours = fdes
		}
		byStart := map[uint64]*cfi.Table{}
		var ctx cfi.Context
		for _, f := range ours {
			tab := &cfi.Table{}
			err := ctx.Execute(f, tab)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			byStart[f.Start] = tab
		}
		for _, d := range theirs {
			tab := byStart[d.Begin()]
			if tab == nil || d.End() != tab.FDE.End() {
				t.Errorf("%s: delve FDE [%#x,%#x) has no match", name, d.Begin(), d.End())
				continue
			}
			fdes++
			check := map[uint64]bool{d.Begin(): true}
			for _, r := range tab.Rows {
				check[r.Loc] = true
				if r.Loc > d.Begin() {
					check[r.Loc-1] = true
				}
			}
			for pc := range check {
				if pc >= d.End() {
					continue
				}
				fc, err := establish(d, pc)
				if err != nil {
					skipped++
					continue
				}
				pcs++
				row := rowAt(tab, pc)
				if msg := delveDiff(fc, row, regs); msg != "" {
					t.Errorf("%s: FDE [%#x,%#x) pc %#x: %s", name, d.Begin(), d.End(), pc, msg)
				}
			}
		}
	}
	t.Logf("delve agrees on %d FDEs, %d PCs; %d PCs skipped (delve failed)", fdes, pcs, skipped)
	if fdes == 0 {
		t.Fatal("nothing compared")
	}
}

// establish calls delve, turning its panics on malformed input into errors.
func establish(d *frame.FrameDescriptionEntry, pc uint64) (fc *frame.FrameContext, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("delve panicked: %v", r)
		}
	}()
	return d.EstablishFrame(pc)
}

func rowAt(t *cfi.Table, pc uint64) *cfi.Row {
	var r *cfi.Row
	for i := range t.Rows {
		if t.Rows[i].Loc <= pc {
			r = &t.Rows[i]
		}
	}
	return r
}

func delveDiff(fc *frame.FrameContext, row *cfi.Row, regs []uint64) string {
	if row == nil {
		return "no row of ours"
	}
	switch {
	case row.CFA.Kind == cfi.CFAExpression:
		if fc.CFA.Rule != frame.RuleExpression {
			return fmt.Sprintf("CFA: delve rule %d, ours expression", fc.CFA.Rule)
		}
	case fc.CFA.Rule != frame.RuleCFA || fc.CFA.Reg != row.CFA.Reg || fc.CFA.Offset != row.CFA.Offset:
		return fmt.Sprintf("CFA: delve %+v, ours r%d%+d", fc.CFA, row.CFA.Reg, row.CFA.Offset)
	}
	for _, reg := range regs {
		d, ok := fc.Regs[reg]
		o := row.Rule(reg)
		dSaved := ok && d.Rule != frame.RuleUndefined && d.Rule != frame.RuleSameVal
		oSaved := o.Kind != cfi.SameValue && o.Kind != cfi.Undefined
		if dSaved != oSaved {
			return fmt.Sprintf("r%d: delve %+v (present %v), ours %+v", reg, d, ok, o)
		}
		if !oSaved {
			continue
		}
		want := map[cfi.RuleKind]frame.Rule{cfi.Offset: frame.RuleOffset, cfi.ValOffset: frame.RuleValOffset, cfi.Register: frame.RuleRegister, cfi.Expression: frame.RuleExpression, cfi.ValExpression: frame.RuleValExpression}[o.Kind]
		if d.Rule != want || (o.Kind == cfi.Offset || o.Kind == cfi.ValOffset) && d.Offset != o.Offset || o.Kind == cfi.Register && d.Reg != o.Reg {
			return fmt.Sprintf("r%d: delve %+v, ours %+v", reg, d, o)
		}
	}
	return ""
}
