package stepbench

import (
	"os"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// fakeStack answers every read with a plausible return address; both
// steps do the same reads, so memory cost is the same on both sides.
type fakeStack struct{}

func (fakeStack) ReadWord(addr uint64) (uint64, bool) { return addr>>1 | 1, true }

const (
	spVal = 0x7ff000000000
	fpVal = 0x7ff000000100
)

// dwarfStepper is the DWARF side: FDEs sorted by start (an
// .eh_frame_hdr-style search), the FDE's program executed into a reused
// table, the row for the PC, then CFA, RA and RBP computed as a DWARF
// unwinder does for register+offset rules.
type dwarfStepper struct {
	fdes []*cfi.FDE
	in   cfi.Interpreter
	tab  cfi.Table
}

func (d *dwarfStepper) step(pc, sp, fp uint64, m fakeStack) (uint64, uint64, uint64, bool) {
	i := sort.Search(len(d.fdes), func(i int) bool { return d.fdes[i].Start > pc }) - 1
	if i < 0 || pc >= d.fdes[i].End() {
		return 0, 0, 0, false
	}
	if err := d.in.Execute(d.fdes[i], &d.tab); err != nil {
		return 0, 0, 0, false
	}
	rows := d.tab.Rows
	r := sort.Search(len(rows), func(k int) bool { return rows[k].Loc > pc }) - 1
	if r < 0 {
		return 0, 0, 0, false
	}
	row := &rows[r]
	if row.CFA.Kind != cfi.CFARegOffset {
		return 0, 0, 0, false
	}
	var base uint64
	switch row.CFA.Reg {
	case 7:
		base = sp
	case 6:
		base = fp
	default:
		return 0, 0, 0, false
	}
	cfa := base + uint64(row.CFA.Offset)
	ra, nfp := uint64(0), fp
	haveRA := false
	for _, rr := range row.Regs {
		if rr.Rule.Kind != cfi.Offset {
			continue
		}
		v, _ := m.ReadWord(cfa + uint64(rr.Rule.Offset))
		switch rr.Reg {
		case 16:
			ra, haveRA = v, true
		case 6:
			nfp = v
		}
	}
	return ra, cfa, nfp, haveRA
}

// BenchmarkStepSFrameVsDWARF: one unwind step (topmost frame) at 10,000
// PCs of a library (CFI2SFRAME_BENCH_FILE, else libc) with SFrame from its
// conversion and with its DWARF CFI; reports ns per step for each and the
// ratio (DWARF / SFrame; the goal is >= 10).
func BenchmarkStepSFrameVsDWARF(b *testing.B) {
	name := os.Getenv("CFI2SFRAME_BENCH_FILE")
	if name == "" {
		name = "/lib/x86_64-linux-gnu/libc.so.6"
	}
	data, err := os.ReadFile(name)
	if err != nil {
		b.Skip(err)
	}
	res, err := convert.Convert(name, data, convert.Options{Force: true})
	if err != nil {
		b.Skip(err)
	}
	tb, err := sframe.Open(res.SFrame, res.Addr)
	if err != nil {
		b.Fatal(err)
	}
	f, err := elfread.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	secs, err := cfi.Sections(f)
	if err != nil {
		b.Fatal(err)
	}
	var d dwarfStepper
	for _, s := range secs {
		if s.Kind != cfi.EHFrame {
			continue
		}
		fdes, _ := cfi.Parse(s)
		d.fdes = append(d.fdes, fdes...)
	}
	sort.Slice(d.fdes, func(i, j int) bool { return d.fdes[i].Start < d.fdes[j].Start })
	space := &unwind.Space{Maps: []unwind.Mapping{{Lo: 0, Hi: ^uint64(0), Table: tb}}}
	u := unwind.New(unwind.AMD64, space, fakeStack{})

	// PCs where both sides give the same caller.
	var pcs []uint64
	x := uint64(88172645463325252)
	for tries := 0; len(pcs) < 10000 && tries < 1000000; tries++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		fd := d.fdes[x%uint64(len(d.fdes))]
		pc := fd.Start + (x>>20)%max(fd.Size, 1)
		fr := unwind.Topmost(unwind.AMD64, pc, spVal, fpVal, 0)
		if why, _ := u.Step(&fr); why != unwind.ReasonOK {
			continue
		}
		ra, cfa, fp, ok := d.step(pc, spVal, fpVal, fakeStack{})
		if !ok || ra != fr.PC || cfa != fr.SP(unwind.AMD64) || fp != fr.FP(unwind.AMD64) {
			continue
		}
		pcs = append(pcs, pc)
	}
	if len(pcs) < 1000 {
		b.Fatalf("only %d PCs where both steps agree", len(pcs))
	}
	// Both sides in each iteration; a collection before the SFrame pass
	// keeps the DWARF side's garbage (its cost) out of the SFrame time.
	var tS, tD time.Duration
	var sink uint64
	for b.Loop() {
		runtime.GC()
		t0 := time.Now()
		for _, pc := range pcs {
			fr := unwind.Topmost(unwind.AMD64, pc, spVal, fpVal, 0)
			u.Step(&fr)
			sink += fr.PC
		}
		t1 := time.Now()
		for _, pc := range pcs {
			ra, _, _, _ := d.step(pc, spVal, fpVal, fakeStack{})
			sink += ra
		}
		t2 := time.Now()
		tS += t1.Sub(t0)
		tD += t2.Sub(t1)
	}
	_ = sink
	n := float64(b.N) * float64(len(pcs))
	b.ReportMetric(float64(tS.Nanoseconds())/n, "sframe-ns/step")
	b.ReportMetric(float64(tD.Nanoseconds())/n, "dwarf-ns/step")
	b.ReportMetric(float64(tD)/float64(tS), "dwarf/sframe")
	pc := pcs[0]
	b.ReportMetric(testing.AllocsPerRun(100, func() {
		fr := unwind.Topmost(unwind.AMD64, pc, spVal, fpVal, 0)
		u.Step(&fr)
	}), "sframe-allocs/step")
	b.ReportMetric(float64(len(pcs)), "pcs")
}
