package sframe_test

import (
	"encoding/binary"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// templatedFunctions returns n functions whose rows come from a handful of
// shapes (a prologue at the same offsets, an epilogue at the end), as a
// compiler's output repeats them, with sizes from a few bytes to past 256
// and 65536, and some PCMASK ones: many have the same FRE block, many
// differ only in where the epilogue falls.
func templatedFunctions(abi sframe.ABI, n int) []sframe.Function {
	a := arch.ForSFrameABI(abi)
	sp, fp := a.SP(), a.FP()
	ra := sframe.Loc{Kind: sframe.LocFixed}
	if abi != sframe.ABIAMD64LE {
		ra = sframe.Loc{Kind: sframe.LocCFA, Offset: -8}
	}
	cfa := func(reg uint32, off int32) sframe.Loc { return sframe.Loc{Kind: sframe.LocReg, Reg: reg, Offset: off} }
	saved := sframe.Loc{Kind: sframe.LocCFA, Offset: -16}
	var fs []sframe.Function
	pc := uint64(0x4000)
	sizes := []uint32{9, 40, 200, 300, 5000, 70000}
	for i := range n {
		size := sizes[i%len(sizes)]
		f := sframe.Function{Start: pc, Size: size}
		switch i % 5 {
		case 0: // leaf: one row
			f.Rows = []sframe.Row{{CFA: cfa(sp, 8), RA: ra}}
		case 1: // frame pointer set up, no epilogue row
			f.Rows = []sframe.Row{{CFA: cfa(sp, 8), RA: ra}, {Start: 1, CFA: cfa(sp, 16), RA: ra, FP: saved}, {Start: 4, CFA: cfa(fp, 16), RA: ra, FP: saved}}
		case 2: // a push, its pop before the return
			f.Rows = []sframe.Row{{CFA: cfa(sp, 8), RA: ra}, {Start: 1, CFA: cfa(sp, 16), RA: ra}, {Start: size - 2, CFA: cfa(sp, 8), RA: ra}}
		case 3: // a large frame: wider data words
			f.Rows = []sframe.Row{{CFA: cfa(sp, 8), RA: ra}, {Start: 7, CFA: cfa(sp, 4104), RA: ra}}
		default: // a PLT-like repeated block
			f.PCType, f.RepSize, f.Size = sframe.PCMask, 16, 64
			f.Rows = []sframe.Row{{CFA: cfa(sp, 8), RA: ra}, {Start: 11, CFA: cfa(sp, 16), RA: ra}}
		}
		fs = append(fs, f)
		pc += uint64(f.Size) + uint64(i%3)
	}
	return fs
}

// TestShare: a shared section (Options.Share) answers every lookup as the
// plain one, at every PC of every function and one past it, in V2 and V3,
// both byte orders; it is smaller; its header counts the FREs it holds;
// and Check accepts it.
func TestShare(t *testing.T) {
	tests := []struct {
		name    string
		version uint8
		abi     sframe.ABI
		order   binary.ByteOrder
		pcrel   bool
	}{
		{"v3-amd64", sframe.Version3, sframe.ABIAMD64LE, binary.LittleEndian, true},
		{"v3-arm64", sframe.Version3, sframe.ABIAArch64LE, binary.LittleEndian, true},
		{"v3-arm64be", sframe.Version3, sframe.ABIAArch64BE, binary.BigEndian, true},
		{"v3-s390x", sframe.Version3, sframe.ABIS390XBE, binary.BigEndian, true},
		{"v2-amd64", sframe.Version2, sframe.ABIAMD64LE, binary.LittleEndian, false},
		{"v2-arm64-pcrel", sframe.Version2, sframe.ABIAArch64LE, binary.LittleEndian, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			funcs := templatedFunctions(tc.abi, 300)
			o := sframe.Options{Version: tc.version, ABI: tc.abi, Order: tc.order, Addr: 0x1000, PCRel: tc.pcrel, Sort: true}
			if tc.abi == sframe.ABIAMD64LE {
				o.CFAFixedRA = -8
			}
			plain, err := sframe.Encode(funcs, o)
			if err != nil {
				t.Fatal(err)
			}
			o.Share = true
			shared, err := sframe.Encode(funcs, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(shared) >= len(plain)*3/4 {
				t.Errorf("shared section %d bytes, plain %d: want under three quarters", len(shared), len(plain))
			}
			ps, err := sfsection.Decode(plain, o.Addr)
			if err != nil {
				t.Fatal(err)
			}
			ss, err := sfsection.Decode(shared, o.Addr)
			if err != nil {
				t.Fatalf("shared section: %v", err)
			}
			held := map[uint32]int{}
			total := 0
			for _, d := range ss.FDEs {
				held[d.FREOff] = len(d.FREs)
				total += len(d.FREs)
			}
			physical := 0
			for _, n := range held {
				physical += n
			}
			if int(ss.Header.NumFREs) != physical || int(ps.Header.NumFREs) != total || physical >= total {
				t.Errorf("header FRE counts: shared %d (holds %d), plain %d (FDEs %d)", ss.Header.NumFREs, physical, ps.Header.NumFREs, total)
			}
			for _, f := range funcs {
				for pc := f.Start; pc <= f.Start+uint64(f.Size); pc++ {
					want, werr := ps.Lookup(pc)
					got, gerr := ss.Lookup(pc)
					if !sameErr(werr, gerr) || want != got {
						t.Fatalf("pc %#x: shared %+v, %v; plain %+v, %v", pc, got, gerr, want, werr)
					}
				}
			}
		})
	}
}

// TestShareOnlyIdentical: blocks that differ in anything a reader reads
// there (a row, the PC type, the repeat size, the signal bit; in V2 a
// row, the FRE count or the info byte, which the index holds) are not
// shared.
func TestShareOnlyIdentical(t *testing.T) {
	sp := arch.AMD64.SP()
	row := sframe.Row{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 8}, RA: sframe.Loc{Kind: sframe.LocFixed}}
	base := sframe.Function{Start: 0x1000, Size: 16, Rows: []sframe.Row{row}}
	variants := []func(f *sframe.Function){
		func(f *sframe.Function) { f.Rows = []sframe.Row{row, row}; f.Rows[1].Start = 4 },
		func(f *sframe.Function) { f.PCType, f.RepSize = sframe.PCMask, 16 },
		func(f *sframe.Function) { f.PCType, f.RepSize = sframe.PCMask, 8 },
		func(f *sframe.Function) { f.Signal = true },
		func(f *sframe.Function) { f.Rows = []sframe.Row{row}; f.Rows[0].CFA.Offset = 16 },
	}
	for _, v := range []uint8{sframe.Version2, sframe.Version3} {
		funcs := []sframe.Function{base}
		for i, change := range variants {
			if v == sframe.Version2 && i == 3 {
				continue // V2 cannot record a signal frame
			}
			f := base
			f.Start = 0x1000 + uint64(i+1)*0x100
			change(&f)
			funcs = append(funcs, f)
		}
		o := sframe.Options{Version: v, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, PCRel: true, Sort: true, CFAFixedRA: -8, Share: true}
		b, err := sframe.Encode(funcs, o)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sfsection.Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		offs := map[uint32]bool{}
		for _, d := range s.FDEs {
			offs[d.FREOff] = true
		}
		// V2 keeps the repeat size in the index: the two PCMASK functions
		// have the same FREs, and share them.
		want := len(funcs)
		if v == sframe.Version2 {
			want--
		}
		if len(offs) != want {
			t.Errorf("V%d: %d functions have %d blocks, want %d", v, len(funcs), len(offs), want)
		}
	}
}

// sharedSeeds returns hostile shared-block sections for the fuzzers: a
// shared section as Share writes it (V3 and V2), and damaged copies: two
// FDEs pointing into one block at different places, an FDE whose block
// runs past the section, and every FDE pointing back at the first block
// (a loop of offsets).
func sharedSeeds(t testing.TB) [][]byte {
	le := binary.LittleEndian
	var out [][]byte
	for _, v := range []uint8{sframe.Version3, sframe.Version2} {
		o := sframe.Options{Version: v, ABI: sframe.ABIAMD64LE, Order: le, PCRel: true, Sort: true, CFAFixedRA: -8, Share: true}
		b, err := sframe.Encode(templatedFunctions(sframe.ABIAMD64LE, 12), o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
		size, field := 16, 12 // an index entry and its FRE offset field
		if v == sframe.Version2 {
			size, field = 20, 8
		}
		at := func(i int) int { return sframe.HeaderSize + i*size + field }
		n := int(le.Uint32(b[8:]))
		freLen := le.Uint32(b[16:])
		damage := func(f func(c []byte)) {
			c := append([]byte(nil), b...)
			f(c)
			out = append(out, c)
		}
		damage(func(c []byte) { le.PutUint32(c[at(1):], le.Uint32(c[at(0):])+2) }) // into FDE 0's block
		damage(func(c []byte) { le.PutUint32(c[at(n-1):], freLen-3) })             // past the end
		damage(func(c []byte) {                                                    // all at the first block
			for i := range n {
				le.PutUint32(c[at(i):], le.Uint32(c[at(0):]))
			}
		})
	}
	return out
}
