package gocfi_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/gocfi"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/pclntest"
)

// synthesize builds t's image and parses it back with cfi, through an ELF
// file holding it as its .debug_frame.
func synthesize(tb testing.TB, t *gopclntab.Table, m elf.Machine, extra gocfi.Extra) ([]byte, []*cfi.FDE, []error) {
	tb.Helper()
	img, errs, err := gocfi.DebugFrame(t, m, extra)
	if err != nil {
		tb.Fatal(err)
	}
	return img, parseImage(tb, img, m, t), errs
}

func parseImage(tb testing.TB, img []byte, m elf.Machine, t *gopclntab.Table) []*cfi.FDE {
	tb.Helper()
	f, err := cfi.OpenBytes(pclntest.ELF(t.ByteOrder(), t.PtrSize(), m, []pclntest.Section{{Name: ".debug_frame", Type: elf.SHT_PROGBITS, Data: img}}))
	if err != nil {
		tb.Fatal(err)
	}
	return debugFrame(tb, f)
}

// debugFrame parses every FDE of f's .debug_frame.
func debugFrame(tb testing.TB, f *cfi.File) []*cfi.FDE {
	tb.Helper()
	for _, s := range f.Sections() {
		if s.Name() == ".debug_frame" {
			fdes, errs := cfi.Parse(s)
			if len(errs) > 0 {
				tb.Fatalf("%d malformed records, the first: %v", len(errs), errs[0])
			}
			return fdes
		}
	}
	tb.Fatal("no .debug_frame")
	return nil
}

// raColumn is the return-address column of Go's CIE for m.
func raColumn(m elf.Machine) uint64 { return gocfi.Machines[m].RA }

// counts of a comparison of two .debug_frame sections.
type counts struct {
	fdes, onlyGo, onlyOurs, size int // FDEs: Go's, without a twin, sizes that differ
	pcs, cfa, ra, regs           int // PCs compared; those whose CFA, RA, other rules differ
	programs                     int // FDE programs that differ in their bytes
}

func (c counts) String() string {
	return fmt.Sprintf("%d FDEs (%d only in Go's, %d only in ours, %d sizes differ), %d PCs: CFA rule differs at %d, RA rule at %d, other registers at %d; %d programs differ in bytes",
		c.fdes, c.onlyGo, c.onlyOurs, c.size, c.pcs, c.cfa, c.ra, c.regs, c.programs)
}

// compare executes Go's FDEs and ours and compares the rules at every PC
// of every function.
func compare(tb testing.TB, goFDEs, ours []*cfi.FDE, ra uint64) counts {
	tb.Helper()
	c := counts{fdes: len(goFDEs)}
	byStart := map[uint64]*cfi.FDE{}
	for _, f := range ours {
		byStart[f.Start] = f
	}
	var ctx cfi.Context
	var gt, ot cfi.Table
	for _, g := range goFDEs {
		o := byStart[g.Start]
		if o == nil {
			if c.onlyGo++; c.onlyGo <= 3 {
				tb.Logf("Go's FDE [%#x, %#x) has no twin", g.Start, g.End())
			}
			continue
		}
		delete(byStart, g.Start)
		if o.Size != g.Size {
			if c.size++; c.size <= 3 {
				tb.Logf("FDE at %#x: size %#x, Go's %#x", g.Start, o.Size, g.Size)
			}
		}
		if !bytes.Equal(o.Program, g.Program) {
			if c.programs++; c.programs <= 3 {
				tb.Logf("FDE at %#x: program %x, Go's %x", g.Start, o.Program, g.Program)
			}
		}
		if err := ctx.Execute(g, &gt); err != nil {
			tb.Fatalf("Go's FDE at %#x: %v", g.Start, err)
		}
		if err := ctx.Execute(o, &ot); err != nil {
			tb.Fatalf("our FDE at %#x: %v", g.Start, err)
		}
		c.rules(tb, &gt, &ot, ra, min(g.End(), o.End()))
	}
	c.onlyOurs = len(byStart)
	return c
}

// rules compares the rows of two tables of one function at every PC up
// to end.
func (c *counts) rules(tb testing.TB, gt, ot *cfi.Table, ra uint64, end uint64) {
	gi, oi := 0, 0
	for pc := gt.FDE.Start; pc < end; pc++ {
		for gi+1 < len(gt.Rows) && gt.Rows[gi+1].Loc <= pc {
			gi++
		}
		for oi+1 < len(ot.Rows) && ot.Rows[oi+1].Loc <= pc {
			oi++
		}
		c.pcs++
		g, o := &gt.Rows[gi], &ot.Rows[oi]
		if !sameCFA(g.CFA, o.CFA) {
			if c.cfa++; c.cfa <= 3 {
				tb.Logf("%#x: CFA %+v, Go's %+v", pc, o.CFA, g.CFA)
			}
		}
		if !sameRule(g.Rule(ra), o.Rule(ra)) {
			if c.ra++; c.ra <= 3 {
				tb.Logf("%#x: RA %+v, Go's %+v", pc, o.Rule(ra), g.Rule(ra))
			}
		}
		if !sameRegs(g, o, ra) {
			if c.regs++; c.regs <= 3 {
				tb.Logf("%#x: registers %+v, Go's %+v", pc, o.Regs, g.Regs)
			}
		}
	}
}

func sameCFA(a, b cfi.CFA) bool {
	return a.Kind == b.Kind && a.Reg == b.Reg && a.Offset == b.Offset && bytes.Equal(a.Expr, b.Expr)
}

func sameRule(a, b cfi.Rule) bool {
	return a.Kind == b.Kind && a.Reg == b.Reg && a.Offset == b.Offset && bytes.Equal(a.Expr, b.Expr)
}

// sameRegs compares the rules of every register but ra that either row
// sets.
func sameRegs(a, b *cfi.Row, ra uint64) bool {
	for _, rs := range [][]cfi.RegRule{a.Regs, b.Regs} {
		for _, r := range rs {
			if r.Reg != ra && !sameRule(a.Rule(r.Reg), b.Rule(r.Reg)) {
				return false
			}
		}
	}
	return true
}

// TestAgreement builds the test program with DWARF (Go compresses
// .debug_frame; elfread inflates it) for x86-64 and AArch64, with and
// without cgo, with the running Go and the older ones installed, and
// 32-bit x86 and big-endian s390x with the running Go; it executes the
// linker's .debug_frame and ours and requires the same rules at every PC
// of every function, the same FDEs, and, as ours follows the linker's
// encoding, the same bytes: every FDE program and the whole section.
func TestAgreement(t *testing.T) {
	gos := gobuild.AllGos(t)
	dir := t.TempDir()
	for i, goCmd := range gos {
		version := gobuild.Version(goCmd)
		cs := []gobuild.Config{{GOARCH: "amd64"}, {GOARCH: "amd64", Cgo: true}, {GOARCH: "arm64"}, {GOARCH: "arm64", Cgo: true}}
		if i == 0 {
			cs = append(cs, gobuild.Config{GOARCH: "386"}, gobuild.Config{GOARCH: "s390x"})
		}
		for _, c := range cs {
			c.Go = goCmd
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel()
				agree(t, gobuild.Build(t, dir, c), version)
			})
		}
	}
}

func agree(t *testing.T, path, version string) {
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	tab, err := gopclntab.Open(ef)
	if err != nil {
		t.Fatal(err)
	}
	img, ours, errs := synthesize(t, tab, ef.Machine, nil)
	for _, err := range errs {
		t.Error(err)
	}
	cf, err := cfi.Open(ef)
	if err != nil {
		t.Fatal(err)
	}
	c := compare(t, debugFrame(t, cf), ours, raColumn(ef.Machine))
	t.Logf("%s, %s: %v", version, filepath.Base(path), c)
	if c.onlyGo+c.onlyOurs+c.size+c.cfa+c.ra+c.regs+c.programs != 0 || c.fdes < 1000 {
		t.Errorf("%v", c)
	}
	sec, err := elfread.FromELF(ef, "").Section(".debug_frame")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sec.Data, img) {
		n := 0
		for n < min(len(img), len(sec.Data)) && img[n] == sec.Data[n] {
			n++
		}
		t.Errorf("the image (%d bytes) differs from Go's .debug_frame (%d bytes) from offset %#x", len(img), len(sec.Data), n)
	}
}
