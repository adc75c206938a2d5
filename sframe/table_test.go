package sframe_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// sameAsFindFRE checks Table.Lookup against the fully decoded section's
// FindFRE at pc.
func sameAsFindFRE(t *testing.T, s *sframe.Section, tb *sframe.Table, pc uint64) {
	t.Helper()
	want, wok := s.FindFRE(pc)
	got, err := tb.Lookup(pc)
	if got.NoFREs {
		// FindFRE has no answer for an FDE without FREs; Lookup gives
		// the V3 outermost or signal marker.
		if wok || err != nil || !(got.Signal || got.RAUndefined) {
			t.Errorf("pc %#x: Lookup = %+v, %v; FindFRE ok=%v", pc, got, err, wok)
		}
		return
	}
	if wok != (err == nil) {
		t.Errorf("pc %#x: Lookup err %v, FindFRE ok %v", pc, err, wok)
		return
	}
	if err != nil && !errors.Is(err, sframe.ErrNoFDE) && !errors.Is(err, sframe.ErrNoFRE) {
		t.Errorf("pc %#x: Lookup err %v", pc, err)
	}
	if got != want {
		t.Errorf("pc %#x: Lookup = %+v, FindFRE = %+v", pc, got, want)
	}
	sameAsLookup(t, tb, pc, got, err)
}

// sameAsLookup checks Table.LookupStep against Lookup's answer at pc: it
// must take exactly the ordinary rows (a default, non-signal FDE's row
// with data words, AMD64 or AArch64) and say what the Rule says.
func sameAsLookup(t *testing.T, tb *sframe.Table, pc uint64, r sframe.Rule, err error) {
	t.Helper()
	var s sframe.StepRule
	ok := tb.LookupStep(pc, &s)
	h := &tb.Header
	want := err == nil && !r.NoFREs && !r.Flex && !r.Signal && !r.RAUndefined && h.ABI != sframe.ABIS390XBE &&
		!(h.ABI == sframe.ABIAMD64LE && h.CFAFixedRA == sframe.CFAFixedRAInvalid)
	if ok != want {
		t.Errorf("pc %#x: LookupStep = %v, want %v (Lookup %+v, %v)", pc, ok, want, r, err)
		return
	}
	if !ok {
		return
	}
	g := sframe.Rule{FuncStart: r.FuncStart, FuncSize: r.FuncSize, FREStart: r.FREStart, PCType: r.PCType, PauthKeyB: r.PauthKeyB}
	g.MangledRA = s.Flags&sframe.StepMangledRA != 0
	g.CFA = sframe.Loc{Kind: sframe.LocReg, Reg: sframe.SPReg(h.ABI), Offset: s.CFAOff}
	if s.Flags&sframe.StepCFAFromFP != 0 {
		g.CFA.Reg = sframe.FPReg(h.ABI)
	}
	g.RA = sframe.Loc{Kind: sframe.LocUnsaved}
	switch {
	case s.Flags&sframe.StepRASaved == 0:
	case h.CFAFixedRA != sframe.CFAFixedRAInvalid:
		g.RA = sframe.Loc{Kind: sframe.LocFixed, Offset: s.RAOff}
	default:
		g.RA = sframe.Loc{Kind: sframe.LocCFA, Offset: s.RAOff}
	}
	g.FP = sframe.Loc{Kind: sframe.LocUnsaved}
	if s.Flags&sframe.StepFPSaved != 0 {
		g.FP = sframe.Loc{Kind: sframe.LocCFA, Offset: s.FPOff}
	}
	if g != r {
		t.Errorf("pc %#x: LookupStep %+v means %+v, Lookup = %+v", pc, s, g, r)
	}
}

// TestTableFixtures: on every fixture, Open accepts what Decode accepts and
// Lookup answers FindFRE's answer at every PC of every function (and just
// outside each).
func TestTableFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			es := loadFixture(t, path)
			s, err := sframe.Decode(es.Data, es.Addr)
			if err != nil {
				t.Fatal(err)
			}
			tb, err := sframe.Open(es.Data, es.Addr)
			if err != nil {
				t.Fatal(err)
			}
			if tb.NumFDEs() != len(s.FDEs) {
				t.Fatalf("NumFDEs %d, want %d", tb.NumFDEs(), len(s.FDEs))
			}
			pcs := 0
			// Relocatable objects' functions overlap (one address space
			// per text section): compare only the FDE fields.
			rel := strings.HasSuffix(path, ".o")
			for i := range s.FDEs {
				d := &s.FDEs[i]
				if got := tb.FDE(i); got.Start != d.Start || got.Size != d.Size || got.NumFREs != d.NumFREs || got.Info != d.Info || got.RepSize != d.RepSize {
					t.Errorf("FDE %d = %+v, want %+v", i, got, *d)
				}
				if rel {
					continue
				}
				end := d.Start + uint64(min(d.Size, 4096))
				for pc := d.Start - 1; pc <= end; pc++ {
					sameAsFindFRE(t, s, tb, pc)
					pcs++
				}
			}
			if pcs == 0 && !rel {
				t.Fatal("no PCs compared")
			}
		})
	}
}

// TestTableUnsorted: a section whose index is not flagged sorted is
// searched through an index Open builds.
func TestTableUnsorted(t *testing.T) {
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian,
		Addr: 0x500, PCRel: true, CFAFixedRA: -8})
	if err != nil {
		t.Fatal(err)
	}
	u, err := sframe.Decode(b, 0x500)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(b, 0x500)
	if err != nil {
		t.Fatal(err)
	}
	if tb.FDE(0).Start != 0x2000 {
		t.Fatalf("first FDE starts at %#x, want the unsorted order (0x2000 first)", tb.FDE(0).Start)
	}
	for pc := uint64(0xff0); pc < 0x2050; pc++ {
		sameAsFindFRE(t, u, tb, pc)
	}
	// Flagged sorted but not: refused.
	b[3] |= sframe.FlagFDESorted
	if _, err := sframe.Open(b, 0x500); err == nil || !strings.Contains(err.Error(), "sorted") {
		t.Errorf("Open of a falsely sorted index: %v", err)
	}
}

// TestTableZeroFREs: a V3 default FDE without FREs is the outermost
// marker; a signal FDE without FREs says so; V2 has neither.
func TestTableZeroFREs(t *testing.T) {
	sp := sframe.SPReg(sframe.ABIAMD64LE)
	funcs := []sframe.Function{
		{Start: 0x1000, Size: 0x10},
		{Start: 0x1010, Size: 0x10, Signal: true},
		{Start: 0x1020, Size: 0x10, Rows: []sframe.Row{{Start: 4, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed, Offset: -8}}}},
	}
	for _, v := range []uint8{2, 3} {
		fs := funcs
		if v == 2 {
			fs = []sframe.Function{funcs[0], funcs[2]}
		}
		b, err := sframe.Encode(fs, sframe.Options{Version: v, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, PCRel: true, Sort: true, CFAFixedRA: -8})
		if err != nil {
			t.Fatal(err)
		}
		tb, err := sframe.Open(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		r, err := tb.Lookup(0x1005)
		if v == 3 && (err != nil || !r.RAUndefined || !r.NoFREs) {
			t.Errorf("V3 empty default FDE: %+v, %v; want outermost", r, err)
		}
		if v == 2 && err != sframe.ErrNoFRE {
			t.Errorf("V2 empty FDE: %+v, %v; want ErrNoFRE", r, err)
		}
		if v == 3 {
			if r, err := tb.Lookup(0x1015); err != nil || !r.Signal || r.RAUndefined {
				t.Errorf("V3 empty signal FDE: %+v, %v", r, err)
			}
		}
		if _, err := tb.Lookup(0x1022); err != sframe.ErrNoFRE {
			t.Errorf("before the first FRE: %v, want ErrNoFRE", err)
		}
		if r, err := tb.Lookup(0x1024); err != nil || r.CFA.Offset != 8 {
			t.Errorf("first FRE: %+v, %v", r, err)
		}
		if _, err := tb.Lookup(0x1030); err != sframe.ErrNoFDE {
			t.Errorf("past the end: %v, want ErrNoFDE", err)
		}
	}
}

// TestTableTruncatedFRE: a lookup that reaches FRE bytes past the end of
// the section reports where, it does not panic.
func TestTableTruncatedFRE(t *testing.T) {
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), s.Options())
	if err != nil {
		t.Fatal(err)
	}
	// The last FRE in the section is the 0x1000 function's outermost row
	// at +0x1f (no data words): make it claim 15 four-byte words.
	b[len(b)-1] = 15<<1 | sframe.DataWord4<<5
	tb, err := sframe.Open(b, 0x500)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Lookup(0x101e); err != nil {
		t.Errorf("Lookup before the bad FRE: %v", err)
	}
	var se *sframe.Error
	if _, err := tb.Lookup(0x101f); !errors.As(err, &se) {
		t.Errorf("Lookup over truncated FREs: %v, want *sframe.Error", err)
	}
}

func TestTableLookupAllocs(t *testing.T) {
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), s.Options())
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(b, 0x500)
	if err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		tb.Lookup(0x1004)
		tb.Lookup(0x2031)
		tb.Lookup(0x3000)
		tb.Lookup(0x1021)
	})
	if n != 0 {
		t.Errorf("Lookup allocates %v times per run", n)
	}
}

// sortedFREs says whether every function's rows are in increasing start
// order, as the format requires; on other sections Lookup (linear, stops at
// the first row past the PC, as libsframe does) and FindFRE (binary
// search) may pick different rows.
// Overlapping functions are left out too: FindFRE scans an unsorted index
// in index order, Lookup takes the last-starting function.
func sortedFREs(s *sframe.Section) bool {
	starts := make([][2]uint64, 0, len(s.FDEs))
	for _, d := range s.FDEs {
		if d.Start+uint64(d.Size) < d.Start {
			return false // wraps around the address space
		}
		starts = append(starts, [2]uint64{d.Start, d.Start + uint64(d.Size)})
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i][0] < starts[j][0] })
	for i := 1; i < len(starts); i++ {
		if starts[i][0] < starts[i-1][1] {
			return false
		}
	}
	for _, d := range s.FDEs {
		for j := 1; j < len(d.FREs); j++ {
			if d.FREs[j].StartOff < d.FREs[j-1].StartOff {
				return false
			}
		}
	}
	return true
}

// FuzzOpen: whatever Decode accepts, Open accepts (unless the index is
// falsely flagged sorted) and looks up the same; whatever Open accepts
// answers lookups without panicking.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{0xe2, 0xde, 3, 4, 3, 0, 0xf8, 0})
	s := lookupSection(f)
	for _, v := range []uint8{2, 3} {
		o := s.Options()
		o.Version = v
		if b, err := sframe.Encode(s.Functions(), o); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, err := sframe.Open(b, 0x1000)
		s, derr := sframe.Decode(b, 0x1000)
		if derr == nil && err != nil && !strings.Contains(err.Error(), "sorted") {
			t.Fatalf("Decode accepts, Open says %v", err)
		}
		if err != nil {
			return
		}
		for i := 0; i < tb.NumFDEs() && i < 64; i++ {
			d := tb.FDE(i)
			for _, pc := range []uint64{d.Start - 1, d.Start, d.Start + uint64(d.Size)/2, d.Start + uint64(d.Size) - 1, d.Start + uint64(d.Size)} {
				if derr == nil && sortedFREs(s) {
					sameAsFindFRE(t, s, tb, pc)
				} else {
					r, err := tb.Lookup(pc)
					sameAsLookup(t, tb, pc, r, err)
				}
			}
		}
	})
}

// BenchmarkTableLookupSmall: Table.Lookup on a small section that stays in
// cache (CPU cost alone; BenchmarkLookup measures a large section).
func BenchmarkTableLookupSmall(b *testing.B) {
	s := lookupSection(b)
	data, err := sframe.Encode(s.Functions(), s.Options())
	if err != nil {
		b.Fatal(err)
	}
	tb, err := sframe.Open(data, 0x500)
	if err != nil {
		b.Fatal(err)
	}
	pcs := []uint64{0x1000, 0x1004, 0x101f, 0x2031, 0x3000}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		tb.Lookup(pcs[i%len(pcs)])
	}
}

// manyFunctions returns n functions in address order with gaps between
// some (a few of 70,000 bytes), zero-sized ones sharing the next one's start, functions long enough
// for 2-byte FRE addresses, PCMASK ones, and rows at growing offsets; with
// far set, the last one starts 5 GiB after the others (so that Open's
// granules are 4 MiB wide and every lookup searches many positions).
func manyFunctions(abi uint8, n int, far bool) []sframe.Function {
	sp, fp := sframe.SPReg(abi), sframe.FPReg(abi)
	ra := sframe.Loc{Kind: sframe.LocFixed}
	if abi != sframe.ABIAMD64LE {
		ra = sframe.Loc{Kind: sframe.LocCFA, Offset: -8}
	}
	x := uint64(0x9e3779b97f4a7c15)
	rnd := func(m uint64) uint64 { // xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x % m
	}
	var fs []sframe.Function
	pc := uint64(0x10000)
	for i := 0; i < n; i++ {
		if rnd(4) == 0 {
			pc += 1 + rnd(24)
		}
		if rnd(300) == 0 {
			pc += 70000 // granules without a function start
		}
		if rnd(50) == 0 {
			fs = append(fs, sframe.Function{Start: pc})
		}
		f := sframe.Function{Start: pc, Size: uint32(1 + rnd(120))}
		if rnd(10) == 0 {
			f.Size = uint32(256 + rnd(600))
		}
		if rnd(40) == 0 {
			f.Size, f.PCType, f.RepSize = 64, sframe.PCMask, 16
		}
		for off, k := uint32(0), 0; off < f.Size && k < 8; k++ {
			row := sframe.Row{Start: off, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: int32(8 * (k + 1))}, RA: ra}
			if k > 0 {
				row.FP = sframe.Loc{Kind: sframe.LocCFA, Offset: -16}
			}
			if k == 2 && rnd(2) == 0 {
				row.CFA.Reg = fp
			}
			f.Rows = append(f.Rows, row)
			off += uint32(1 + rnd(uint64(f.Size)/2+1))
			if f.PCType == sframe.PCMask && off >= 16 {
				break
			}
		}
		fs = append(fs, f)
		pc += uint64(f.Size)
	}
	if far {
		fs[len(fs)-1].Start = pc + 5<<30
	}
	return fs
}

// TestTableManyFunctions: on sections with gaps, zero-sized functions and
// runs of small ones (and on ones whose functions span more than 4 GiB,
// where a granule holds them all), in both byte orders, V2 and V3, PC-relative or
// not, sorted or not, Lookup answers what the fully decoded section's
// FindFRE answers at every PC of every function and two either side.
func TestTableManyFunctions(t *testing.T) {
	type config struct {
		version, abi     uint8
		pcrel, sort, far bool
	}
	var cs []config
	for _, v := range []uint8{2, 3} {
		for _, abi := range []uint8{sframe.ABIAMD64LE, sframe.ABIAArch64BE} {
			for _, pcrel := range []bool{false, true} {
				for _, srt := range []bool{false, true} {
					cs = append(cs, config{v, abi, pcrel, srt, false})
				}
			}
		}
	}
	cs = append(cs, config{3, sframe.ABIAMD64LE, true, true, true}, config{3, sframe.ABIAArch64BE, false, false, true})
	for _, c := range cs {
		t.Run(fmt.Sprintf("v%d-abi%d-pcrel=%v-sort=%v-far=%v", c.version, c.abi, c.pcrel, c.sort, c.far), func(t *testing.T) {
			fs := manyFunctions(c.abi, 1700, c.far)
			if !c.sort {
				// Reverse pairs of neighbours: unsorted, and a
				// zero-sized function may follow the one it shares
				// a start with.
				for i := 0; i+1 < len(fs); i += 2 {
					fs[i], fs[i+1] = fs[i+1], fs[i]
				}
			}
			o := sframe.Options{Version: c.version, ABI: c.abi, Order: binary.LittleEndian, Addr: 0x4000, PCRel: c.pcrel, Sort: c.sort}
			if c.abi == sframe.ABIAArch64BE {
				o.Order = binary.BigEndian
			} else {
				o.CFAFixedRA = -8
			}
			b, err := sframe.Encode(fs, o)
			if err != nil {
				t.Fatal(err)
			}
			s, err := sframe.Decode(b, o.Addr)
			if err != nil {
				t.Fatal(err)
			}
			tb, err := sframe.Open(b, o.Addr)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				for pc := f.Start - 2; pc < f.Start+uint64(f.Size)+2 && !t.Failed(); pc++ {
					sameAsFindFRE(t, s, tb, pc)
				}
			}
		})
	}
}
