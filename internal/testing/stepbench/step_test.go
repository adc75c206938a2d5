package stepbench

import (
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/benchfile"
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

// dwarfStepper is the DWARF side, a step as a DWARF unwinder such as
// libgcc's makes it with the project's cfi package: the FDE found by a
// binary search of a sorted table of start addresses (what .eh_frame_hdr
// holds), its record parsed (the CIE's, once per CIE, from a cache), the
// CIE's initial instructions and the FDE's program executed up to the PC
// (not to the end of the function) into reused scratch memory, then CFA,
// RA and RBP computed from the row for register+offset rules. Like the
// SFrame side, which may not decode more than the index when it opens a
// section, it keeps the records as bytes and parses the one it needs at
// each step, as libgcc does.
//
// With preparsed set it is kinder to DWARF than any real unwinder: every
// FDE record is parsed once beforehand (milliseconds and hundreds of
// bytes per function for a library, which the SFrame side is not
// allowed), and a step only searches and executes. The benchmarks report
// both.
type dwarfStepper struct {
	starts    []uint64 // sorted, with ents or fdes in the same order
	ents      []cfi.Entry
	fdes      []*cfi.FDE
	ctx       *cfi.Context // parses and executes ents
	preparsed bool
	in        cfi.Context
	tab       cfi.Table
	upTo      cfi.FDE // the FDE found, cut to end after the PC
}

func (d *dwarfStepper) step(pc, sp, fp uint64, m unwind.Memory) (uint64, uint64, uint64, bool) {
	lo, hi := 0, len(d.starts)
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if d.starts[h] <= pc {
			lo = h + 1
		} else {
			hi = h
		}
	}
	if lo == 0 {
		return 0, 0, 0, false
	}
	if d.preparsed {
		if pc >= d.fdes[lo-1].End() {
			return 0, 0, 0, false
		}
		d.upTo = *d.fdes[lo-1]
	} else {
		if pc >= d.ents[lo-1].Start+d.ents[lo-1].Size {
			return 0, 0, 0, false
		}
		if err := d.ctx.ParseEntry(d.ents[lo-1], &d.upTo); err != nil {
			return 0, 0, 0, false
		}
	}
	// The interpreter stops at the first location advance past the
	// FDE's end: ending the copy just after pc stops it at the row that
	// holds pc, as libgcc's execute_cfa_program stops.
	d.upTo.Size = pc - d.upTo.Start + 1
	if err := d.in.Execute(&d.upTo, &d.tab); err != nil {
		return 0, 0, 0, false
	}
	rows := d.tab.Rows
	if len(rows) == 0 || rows[len(rows)-1].Loc > pc {
		return 0, 0, 0, false
	}
	row := &rows[len(rows)-1]
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

// newDwarfStepper reads the .eh_frame of file name for dwarfStepper: its
// FDEs indexed (cfi.Open), or parsed when preparsed is set. The file
// stays open for the stepper's records.
func newDwarfStepper(name string, preparsed bool) (*dwarfStepper, error) {
	f, err := elfread.Open(name)
	if err != nil {
		return nil, err
	}
	d := &dwarfStepper{preparsed: preparsed}
	if preparsed {
		defer f.Close()
		cf, err := cfi.Open(f.ELF)
		if err != nil {
			return nil, err
		}
		for _, s := range cf.Sections() {
			if s.Name() != ".eh_frame" {
				continue
			}
			fdes, _ := cfi.Parse(s)
			d.fdes = append(d.fdes, fdes...)
		}
		sort.Slice(d.fdes, func(i, j int) bool { return d.fdes[i].Start < d.fdes[j].Start })
		for _, fd := range d.fdes {
			d.starts = append(d.starts, fd.Start)
		}
		return d, nil
	}
	cf, err := cfi.Open(f.ELF)
	if err != nil {
		f.Close()
		return nil, err
	}
	d.ctx, d.ents = cf.Context(nil), cf.Entries()
	sort.Slice(d.ents, func(i, j int) bool { return d.ents[i].Start < d.ents[j].Start })
	for _, e := range d.ents {
		d.starts = append(d.starts, e.Start)
	}
	return d, nil
}

// reportSides reports the best pass of each side over n steps: ns per
// step and the two ratios.
func reportSides(b *testing.B, sf, dw, pre time.Duration, n float64) {
	b.ReportMetric(float64(sf.Nanoseconds())/n, "sframe-ns/step")
	b.ReportMetric(float64(dw.Nanoseconds())/n, "dwarf-ns/step")
	b.ReportMetric(float64(pre.Nanoseconds())/n, "dwarf-preparsed-ns/step")
	b.ReportMetric(float64(dw)/float64(sf), "dwarf/sframe")
	b.ReportMetric(float64(pre)/float64(sf), "dwarf-preparsed/sframe")
}

// threadCPU returns the CPU time of the calling thread
// (CLOCK_THREAD_CPUTIME_ID): time the thread waits for a CPU on a loaded
// machine is left out.
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkStepSFrameVsDWARF: one unwind step (topmost frame) at 10,000
// random PCs of a library (CFI2SFRAME_BENCH_FILE, else libc) with SFrame
// from its conversion and with its DWARF CFI; reports ns per step for each
// and the ratio (DWARF / SFrame; the goal is >= 10), for the DWARF step
// that parses its FDE record (dwarf-ns/step, dwarf/sframe) and for the
// one that had them all parsed beforehand (dwarf-preparsed-ns/step,
// dwarf-preparsed/sframe). The same PCs are also stepped by
// floorStepper, the least any reader of the format can do (floor-ns/step,
// dwarf/floor), and by the same with a copy of the index in its granule
// table (floor2-ns/step, dwarf/floor2): what the format allows here, for
// the 10× goal. The PCs are those where every step gives the same
// caller. Random PCs over a whole library keep the caches cold: see
// BenchmarkWalkSFrameVsDWARF for whole stacks, as a profiler walks them.
func BenchmarkStepSFrameVsDWARF(b *testing.B) {
	name, tb, sec := benchTable(b)
	d, err := newDwarfStepper(name, false)
	if err != nil {
		b.Fatal(err)
	}
	dp, err := newDwarfStepper(name, true)
	if err != nil {
		b.Fatal(err)
	}
	space := &unwind.Space{{Lo: 0, Hi: ^uint64(0), Table: tb}}
	u := &unwind.Unwinder{Arch: arch.AMD64, Space: space, Mem: fakeStack{}}
	fl, err := newFloorStepper(sec, tb.Addr)
	if err != nil {
		b.Fatal(err)
	}
	idx2 := fl.copiedIndex()

	// PCs where both sides give the same caller.
	var pcs []uint64
	x := uint64(88172645463325252)
	for tries := 0; len(pcs) < 10000 && tries < 1000000; tries++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		fd := dp.fdes[x%uint64(len(dp.fdes))]
		pc := fd.Start + (x>>20)%max(fd.Size, 1)
		fr := unwind.Topmost(arch.AMD64, pc, spVal, fpVal, 0)
		if why, _ := u.Step(&fr); why != unwind.ReasonOK {
			continue
		}
		ra, cfa, fp, ok := d.step(pc, spVal, fpVal, fakeStack{})
		frSP, _ := fr.Reg(arch.AMD64.SP())
		frFP, _ := fr.Reg(arch.AMD64.FP()) // 0 when unknown, as the stepper says
		if !ok || ra != fr.PC || cfa != frSP || fp != frFP {
			continue
		}
		if ra2, cfa2, fp2, ok := dp.step(pc, spVal, fpVal, fakeStack{}); !ok || ra2 != ra || cfa2 != cfa || fp2 != fp {
			b.Fatalf("pc %#x: the two DWARF steppers disagree", pc)
		}
		if ra2, cfa2, fp2, ok := fl.step(pc, spVal, fpVal, fakeStack{}); !ok || ra2 != ra || cfa2 != cfa || fp2 != fp {
			continue // a function the floor does not read (a flexible FDE)
		}
		if ra2, cfa2, fp2, ok := fl.step2(idx2, pc, spVal, fpVal, fakeStack{}); !ok || ra2 != ra || cfa2 != cfa || fp2 != fp {
			b.Fatalf("pc %#x: the floor's two lookups disagree", pc)
		}
		pcs = append(pcs, pc)
	}
	if len(pcs) < 1000 {
		b.Fatalf("only %d PCs where both steps agree", len(pcs))
	}
	// Every side in each iteration, one pass over the PCs each, timed in
	// CPU time of this thread; each side's best pass is its figure. The
	// collector's background work for the DWARF side's garbage runs on
	// other threads and is not counted (in DWARF's favour).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m unwind.Memory = fakeStack{}
	bestS, bestD, bestP, bestF := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	bestF2 := time.Duration(math.MaxInt64)
	var sink uint64
	// One Frame for every step, reset in place as a sampler would; the
	// DWARF side takes PC, SP and FP as arguments.
	var fr unwind.Frame
	sframePass := func() {
		for _, pc := range pcs {
			fr.Reset(arch.AMD64, pc, spVal, fpVal, 0)
			u.Step(&fr)
			sink += fr.PC
		}
	}
	pass := func(step func(pc, sp, fp uint64, m unwind.Memory) (uint64, uint64, uint64, bool)) func() {
		return func() {
			for _, pc := range pcs {
				ra, _, _, _ := step(pc, spVal, fpVal, m)
				sink += ra
			}
		}
	}
	floor2 := func(pc, sp, fp uint64, m unwind.Memory) (uint64, uint64, uint64, bool) {
		return fl.step2(idx2, pc, sp, fp, m)
	}
	// Every pass that reads the SFrame section follows one that reads
	// the DWARF CFI, which takes its lines out of the nearer caches: the
	// DWARF step runs twice an iteration, the second pass not counted
	// (with its figure the best of twice as many passes, DWARF would
	// look faster than before the floor was added).
	var flush time.Duration
	passes := []struct {
		best *time.Duration
		run  func()
	}{
		{&bestD, pass(d.step)}, {&bestS, sframePass},
		{&bestP, pass(dp.step)}, {&bestF, pass(fl.step)},
		{&flush, pass(d.step)}, {&bestF2, pass(floor2)},
	}
	for b.Loop() {
		for _, p := range passes {
			t0 := threadCPU()
			p.run()
			*p.best = min(*p.best, threadCPU()-t0)
		}
	}
	_ = sink
	reportSides(b, bestS, bestD, bestP, float64(len(pcs)))
	b.ReportMetric(float64(bestF.Nanoseconds())/float64(len(pcs)), "floor-ns/step")
	b.ReportMetric(float64(bestD)/float64(bestF), "dwarf/floor")
	b.ReportMetric(float64(bestF2.Nanoseconds())/float64(len(pcs)), "floor2-ns/step")
	b.ReportMetric(float64(bestD)/float64(bestF2), "dwarf/floor2")
	pc := pcs[0]
	b.ReportMetric(testing.AllocsPerRun(100, func() {
		fr := unwind.Topmost(arch.AMD64, pc, spVal, fpVal, 0)
		u.Step(&fr)
	}), "sframe-allocs/step")
	b.ReportMetric(float64(len(pcs)), "pcs")
}

// BenchmarkLookupByRow: where a cold SFrame lookup's time goes. The
// random PCs of BenchmarkStepSFrameVsDWARF's library are put in groups by
// the row that holds them in their function (the first FRE, the second,
// the third or fourth, ...), and each group is looked up (LookupStep, what
// a step does) in random order;
// ns/lookup for each. A lookup finds the function (the index, narrowed by
// a granule table), reads its attributes next to its FREs and decodes the
// FREs one after another up to the PC's: FREs have variable sizes (each
// one's comes from its info byte), so the k-th row of a function is found
// only by decoding the k-1 before it. The first group is the cost of
// finding a function at all; the others add the scan; row1-in-order is
// the first group's PCs in address order.
func BenchmarkLookupByRow(b *testing.B) {
	_, tb, _ := benchTable(b)
	type group struct {
		name   string
		lo, hi int // FRE index in the function, [lo, hi)
		pcs    []uint64
	}
	groups := []group{{"row1", 0, 1, nil}, {"row2", 1, 2, nil}, {"row3-4", 2, 4, nil}, {"row5-8", 4, 8, nil}, {"row9+", 8, math.MaxInt, nil}}
	var d sframe.FDE
	x := uint64(88172645463325252)
	for tries := 0; tries < 400000; tries++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if tb.FDE(int(x%uint64(tb.Header.NumFDEs)), &d) != nil || d.Size == 0 || d.PCType != sframe.PCInc {
			continue
		}
		pc := d.Start + (x>>20)%uint64(d.Size)
		j := d.FREAt(pc)
		for g := range groups {
			if j >= groups[g].lo && j < groups[g].hi && len(groups[g].pcs) < 10000 {
				groups[g].pcs = append(groups[g].pcs, pc)
			}
		}
	}
	// The first group again in address order: the same work with the
	// caches warm (neighbouring PCs share lines), which tells memory from
	// decoding.
	sorted := slices.Clone(groups[0].pcs)
	slices.Sort(sorted)
	groups = append(groups, group{"row1-in-order", 0, 1, sorted})
	var r sframe.StepRule
	for _, g := range groups {
		if len(g.pcs) < 100 {
			continue
		}
		b.Run(g.name, func(b *testing.B) {
			for b.Loop() {
				for _, pc := range g.pcs {
					tb.LookupStep(pc, &r)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(g.pcs)), "ns/lookup")
			b.ReportMetric(float64(len(g.pcs)), "pcs")
		})
	}
}

// benchTable returns the library the step benchmarks use
// (CFI2SFRAME_BENCH_FILE, else libc) and the SFrame section its conversion
// gives, opened; it skips the benchmark where there is none.
func benchTable(b *testing.B) (string, *sframe.Table, []byte) {
	b.Helper()
	name := benchfile.Name()
	data, err := os.ReadFile(name)
	if err != nil {
		b.Skip(err)
	}
	res, err := convertBytes(name, data)
	if err != nil {
		b.Skip(err)
	}
	tb, err := sframe.Open(res.SFrame, res.Addr)
	if err != nil {
		b.Fatal(err)
	}
	return name, tb, res.SFrame
}
