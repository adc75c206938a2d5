package sframe_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// ref is Table.Lookup computed from a decoded Section in the plainest
// way: the oracle the Table's lookups (its fast path and its general
// code) are compared with.
type ref struct {
	s   *sfsection.Section
	tb  *sframe.Table // for Interpret
	pos []int         // FDE indices by start address, stable
}

func newRef(s *sfsection.Section, tb *sframe.Table) *ref {
	r := &ref{s: s, tb: tb, pos: make([]int, len(s.FDEs))}
	for i := range r.pos {
		r.pos[i] = i
	}
	sort.SliceStable(r.pos, func(a, b int) bool { return s.FDEs[r.pos[a]].Start < s.FDEs[r.pos[b]].Start })
	return r
}

// lookup: of the functions that start last at or before pc, the last in
// index order that covers it; then its FREs in order up to the first that
// starts past pc.
func (r *ref) lookup(pc uint64) (sframe.Rule, error) {
	fdes := r.s.FDEs
	k := sort.Search(len(r.pos), func(k int) bool { return fdes[r.pos[k]].Start > pc }) - 1
	var d *sframe.FDE
	for j := k; j >= 0 && fdes[r.pos[j]].Start == fdes[r.pos[k]].Start; j-- {
		if c := &fdes[r.pos[j]]; pc-c.Start < uint64(c.Size) {
			d = c
			break
		}
	}
	if d == nil {
		return sframe.Rule{}, sframe.ErrNoFDE
	}
	if len(d.FREs) == 0 {
		rule := sframe.Rule{FuncStart: d.Start, FuncSize: d.Size, PCType: d.PCType, Flex: d.Flex,
			Signal: d.Signal, PauthKeyB: d.PauthKeyB, NoFREs: true}
		switch {
		case d.Signal:
			return rule, nil
		case r.s.Header.Version == sframe.Version3 && !d.Flex:
			rule.RAUndefined = true
			return rule, nil
		}
		return sframe.Rule{}, sframe.ErrNoFRE
	}
	off := pc - d.Start
	if d.PCType == sframe.PCMask && d.RepSize != 0 {
		off %= uint64(d.RepSize)
	}
	var f *sframe.FRE
	for j := range d.FREs {
		if uint64(d.FREs[j].Start) > off {
			break
		}
		f = &d.FREs[j]
	}
	if f == nil {
		return sframe.Rule{}, sframe.ErrNoFRE
	}
	return r.tb.Interpret(d, f), nil
}

// tables opens b with Open and with OpenGeneral: the same section with and
// without the little-endian V3 fast path.
func tables(t testing.TB, b []byte, addr uint64) []*sframe.Table {
	t.Helper()
	fast, err := sframe.Open(b, addr)
	if err != nil {
		t.Fatal(err)
	}
	general, err := sframe.OpenGeneral(b, addr)
	if err != nil {
		t.Fatal(err)
	}
	return []*sframe.Table{fast, general}
}

// sameAsRef checks each table's Lookup at pc against the oracle's, and its
// LookupStep against its Lookup.
func sameAsRef(t *testing.T, r *ref, pc uint64, tbs ...*sframe.Table) {
	t.Helper()
	want, werr := r.lookup(pc)
	for _, tb := range tbs {
		got, err := tb.Lookup(pc)
		if got != want || err != werr {
			t.Errorf("pc %#x: Lookup = %+v, %v; want %+v, %v", pc, got, err, want, werr)
		}
		sameAsLookup(t, tb, pc, got, err)
	}
}

// sameErr says whether two lookup errors are the same: the same sentinel,
// or *Errors that say the same.
func sameErr(a, b error) bool {
	return a == b || a != nil && b != nil && a.Error() == b.Error()
}

// sameAsLookup checks Table.LookupStep against Lookup's answer at pc: it
// must take exactly the ordinary rows (a default, non-signal FDE's row
// with data words, AMD64 with a fixed RA offset or AArch64) and say what
// the Rule says, give Lookup's errors, and ErrNeedsRule for the other
// rows and for functions of other kinds (where Lookup may find malformed
// bytes).
func sameAsLookup(t *testing.T, tb *sframe.Table, pc uint64, r sframe.Rule, err error) {
	t.Helper()
	var s sframe.StepRule
	serr := sframe.LookupStepErr(tb, pc, &s)
	if filled := tb.LookupStep(pc, &sframe.StepRule{}); filled != (serr == nil) {
		t.Errorf("pc %#x: LookupStep says %v, its error %v", pc, filled, serr)
	}
	h := &tb.Header
	ordinary := err == nil && !r.NoFREs && !r.Flex && !r.Signal && !r.RAUndefined &&
		h.ABI != sframe.ABIS390XBE && !(h.ABI == sframe.ABIAMD64LE && h.CFAFixedRA == 0)
	switch {
	case serr == sframe.ErrNeedsRule && !ordinary:
		return
	case serr == nil && ordinary:
	case !sameErr(serr, err) || ordinary || serr == nil:
		t.Errorf("pc %#x: LookupStep = %v, want %v or ErrNeedsRule (Lookup %+v, ordinary %v)", pc, serr, err, r, ordinary)
		return
	default:
		return // the same error
	}
	g := sframe.Rule{Row: sframe.Row{Start: r.Start}, FuncStart: r.FuncStart, FuncSize: r.FuncSize, PCType: r.PCType, PauthKeyB: r.PauthKeyB}
	g.MangledRA = s.Flags&sframe.StepMangledRA != 0
	g.CFA = sframe.Loc{Kind: sframe.LocReg, Reg: arch.ForSFrameABI(h.ABI).SP(), Offset: s.CFAOff}
	if s.Flags&sframe.StepCFAFromFP != 0 {
		g.CFA.Reg = arch.ForSFrameABI(h.ABI).FP()
	}
	g.RA = sframe.Loc{Kind: sframe.LocUnsaved}
	switch {
	case s.Flags&sframe.StepRASaved == 0:
	case h.CFAFixedRA != 0:
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

// TestTableFixtures: on every fixture, Open accepts what Decode accepts,
// FDE reads what Decode holds, and Lookup answers the oracle's answer at
// every PC of every function (and just outside each), with and without
// the fast path.
func TestTableFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			es := loadFixture(t, path)
			s, err := sfsection.Decode(es.Data, es.Addr)
			if err != nil {
				t.Fatal(err)
			}
			tbs := tables(t, es.Data, es.Addr)
			if int(tbs[0].Header.NumFDEs) != len(s.FDEs) {
				t.Fatalf("NumFDEs %d, want %d", int(tbs[0].Header.NumFDEs), len(s.FDEs))
			}
			r := newRef(s, tbs[0])
			pcs := 0
			var d sframe.FDE
			for i := range s.FDEs {
				want := &s.FDEs[i]
				if err := tbs[0].FDE(i, &d); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(*want, d, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("FDE %d (-Decode +Table.FDE):\n%s", i, diff)
				}
				// Relocatable objects' functions overlap (each text
				// section starts at 0), which the oracle knows.
				lo, end := max(want.Start, 1)-1, want.Start+uint64(min(want.Size, 4096))
				for pc := lo; pc <= end; pc++ {
					sameAsRef(t, r, pc, tbs...)
					pcs++
				}
			}
			if pcs == 0 && len(s.FDEs) > 0 {
				t.Fatal("no PCs compared")
			}
		})
	}
}

// TestTableUnsorted: an index not flagged sorted, and one flagged sorted
// that is not, are searched through an index Open builds.
func TestTableUnsorted(t *testing.T) {
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian,
		Addr: 0x500, PCRel: true, CFAFixedRA: -8})
	if err != nil {
		t.Fatal(err)
	}
	lying := append([]byte(nil), b...)
	lying[3] |= sframe.FlagFDESorted
	for name, b := range map[string][]byte{"unsorted": b, "flagged sorted": lying} {
		u, err := sfsection.Decode(b, 0x500)
		if err != nil {
			t.Fatal(err)
		}
		if u.FDEs[0].Start != 0x2000 {
			t.Fatalf("%s: first FDE starts at %#x, want the unsorted order (0x2000 first)", name, u.FDEs[0].Start)
		}
		tbs := tables(t, b, 0x500)
		r := newRef(u, tbs[0])
		for pc := uint64(0xff0); pc < 0x2050; pc++ {
			sameAsRef(t, r, pc, tbs...)
		}
		if _, err := tbs[0].Lookup(0x1004); err != nil {
			t.Errorf("%s: Lookup in the second FDE: %v", name, err)
		}
	}
}

// TestTableZeroFREs: a V3 default FDE without FREs is the outermost
// marker; a signal FDE without FREs says so; V2 has neither.
func TestTableZeroFREs(t *testing.T) {
	sp := arch.AMD64.SP()
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
// the section reports where, it does not panic, and the FREs before it
// are still found.
func TestTableTruncatedFRE(t *testing.T) {
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), s.Options())
	if err != nil {
		t.Fatal(err)
	}
	// The last FRE in the section is the 0x1000 function's outermost row
	// at +0x1f (no data words): make it claim 15 four-byte words.
	b[len(b)-1] = 15<<1 | 2<<5
	for _, tb := range tables(t, b, 0x500) {
		if _, err := tb.Lookup(0x101e); err != nil {
			t.Errorf("Lookup before the bad FRE: %v", err)
		}
		var se *sframe.Error
		if _, err := tb.Lookup(0x101f); !errors.As(err, &se) || se.Off != int64(len(b)) || !strings.Contains(se.Msg, "run past") {
			t.Errorf("Lookup over truncated FREs: %v, want *sframe.Error at %#x", err, len(b))
		}
		if err := tb.Check(); !errors.As(err, &se) || se.Off != int64(len(b)) {
			t.Errorf("Check: %v, want *sframe.Error at %#x", err, len(b))
		}
	}
}

// TestTableLookupAllocs: no lookup allocates, whatever it answers.
func TestTableLookupAllocs(t *testing.T) {
	s := lookupSection(t)
	b, err := sframe.Encode(s.Functions(), s.Options())
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables(t, b, 0x500) {
		var st sframe.StepRule
		n := testing.AllocsPerRun(100, func() {
			for _, pc := range []uint64{0x1004, 0x2031, 0x3000, 0x1021, 0x101f} {
				tb.Lookup(pc)
				tb.LookupStep(pc, &st)
			}
		})
		if n != 0 {
			t.Errorf("lookups allocate %v times per run", n)
		}
	}
}

// FuzzOpen: on any bytes, Open accepts what Decode (internal/sfsection:
// Open, Check, then every FDE into fresh memory) accepts, and Check and
// Decode agree (the same error, or FDE into reused memory gives the FDEs
// Decode holds); what Decode
// accepts, Lookup answers as the oracle does; whatever Open accepts
// answers lookups without panicking, the same with and without the fast
// path, and its dumps fail only on what Decode rejects.
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
	le := binary.LittleEndian
	b := header(le, 2, sframe.FlagFDESorted, 3, -8, 1, 1, 3, 0, 20)
	fde := make([]byte, 20)
	le.PutUint32(fde[4:], 16)
	le.PutUint32(fde[12:], 1)
	f.Add(append(append(b, fde...), 0, 0x02, 8))
	for _, b := range sharedSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const addr = 0x1000
		s, derr := sfsection.Decode(b, addr)
		tb, err := sframe.Open(b, addr)
		general, gerr := sframe.OpenGeneral(b, addr)
		if !sameErr(err, gerr) {
			t.Fatalf("Open: %v; without the fast path: %v", err, gerr)
		}
		if err != nil {
			if derr == nil {
				t.Fatalf("Decode accepts, Open says %v", err)
			}
			return
		}
		if cerr := tb.Check(); !sameErr(cerr, derr) {
			t.Fatalf("Check: %v; Decode: %v", cerr, derr)
		}
		if err := tb.Dump(io.Discard); err != nil && derr == nil {
			t.Fatalf("Dump: %v; Decode accepts", err)
		}
		if err := tb.DumpJSON(io.Discard); err != nil && derr == nil {
			t.Fatalf("DumpJSON: %v; Decode accepts", err)
		}
		var r *ref
		if derr == nil {
			r = newRef(s, tb)
		}
		var d sframe.FDE
		for i := 0; i < int(tb.Header.NumFDEs) && i < 64; i++ {
			err := tb.FDE(i, &d)
			if derr == nil {
				if err != nil || !cmp.Equal(d, s.FDEs[i], cmpopts.EquateEmpty()) {
					t.Fatalf("FDE %d: %+v, %v; Decode: %+v", i, d, err, s.FDEs[i])
				}
			}
			for _, pc := range []uint64{d.Start - 1, d.Start, d.Start + uint64(d.Size)/2, d.Start + uint64(d.Size) - 1, d.Start + uint64(d.Size)} {
				if r != nil {
					sameAsRef(t, r, pc, tb, general)
					continue
				}
				rule, err := tb.Lookup(pc)
				grule, gerr := general.Lookup(pc)
				if rule != grule || !sameErr(err, gerr) {
					t.Fatalf("pc %#x: Lookup = %+v, %v; without the fast path %+v, %v", pc, rule, err, grule, gerr)
				}
				sameAsLookup(t, tb, pc, rule, err)
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
func manyFunctions(abi sframe.ABI, n int, far bool) []sframe.Function {
	sp, fp := arch.ForSFrameABI(abi).SP(), arch.ForSFrameABI(abi).FP()
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
// where a granule holds them all), in both byte orders, V2 and V3,
// PC-relative or not, sorted or not, Lookup answers what the oracle answers
// at every PC of every function and two either side, with and without the
// fast path.
func TestTableManyFunctions(t *testing.T) {
	type config struct {
		version          uint8
		abi              sframe.ABI
		pcrel, sort, far bool
	}
	var cs []config
	for _, v := range []uint8{2, 3} {
		for _, abi := range []sframe.ABI{sframe.ABIAMD64LE, sframe.ABIAArch64BE} {
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
			s, err := sfsection.Decode(b, o.Addr)
			if err != nil {
				t.Fatal(err)
			}
			tbs := tables(t, b, o.Addr)
			r := newRef(s, tbs[0])
			for _, f := range fs {
				for pc := f.Start - 2; pc < f.Start+uint64(f.Size)+2 && !t.Failed(); pc++ {
					sameAsRef(t, r, pc, tbs...)
				}
			}
		})
	}
}

func TestHeaderFDESize(t *testing.T) {
	for _, c := range []struct {
		version uint8
		want    int
	}{{sframe.Version1, 17}, {sframe.Version2, 20}, {sframe.Version3, 16}, {0, 0}, {4, 0}} {
		h := sframe.Header{Version: c.version}
		if got := h.FDESize(); got != c.want {
			t.Errorf("version %d: FDESize %d, want %d", c.version, got, c.want)
		}
	}
}

func TestFDEFREAt(t *testing.T) {
	inc := sframe.FDE{Start: 0x1000, Size: 0x40, FREs: []sframe.FRE{{Start: 0}, {Start: 4}, {Start: 0x20}}}
	late := sframe.FDE{Start: 0x1000, Size: 0x40, FREs: []sframe.FRE{{Start: 8}}}
	mask := sframe.FDE{Start: 0x2000, Size: 0x40, PCType: sframe.PCMask, RepSize: 16, FREs: []sframe.FRE{{Start: 0}, {Start: 6}}}
	for _, c := range []struct {
		name string
		d    *sframe.FDE
		pc   uint64
		want int
	}{
		{"first byte", &inc, 0x1000, 0},
		{"inside the first row", &inc, 0x1003, 0},
		{"start of the second", &inc, 0x1004, 1},
		{"last row to the end", &inc, 0x103f, 2},
		{"past the end", &inc, 0x1040, -1},
		{"below the start", &inc, 0xfff, -1},
		{"before the first FRE", &late, 0x1004, -1},
		{"at the first FRE", &late, 0x1008, 0},
		{"PCMASK first block", &mask, 0x2007, 1},
		{"PCMASK third block, row 0", &mask, 0x2021, 0},
		{"PCMASK third block, row 1", &mask, 0x202f, 1},
	} {
		if got := c.d.FREAt(c.pc); got != c.want {
			t.Errorf("%s: FREAt(%#x) = %d, want %d", c.name, c.pc, got, c.want)
		}
	}
}
