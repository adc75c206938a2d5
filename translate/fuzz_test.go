package translate

import (
	stdcmp "cmp"
	"debug/elf"
	"encoding/binary"
	"io"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// FuzzTranslate runs arbitrary .eh_frame bytes (and the same bytes as a PLT
// section) through parse, execute, translate, encode and decode: nothing
// may panic, whatever the Translator emits must encode and decode again with
// every function present, and streaming (FDEs executed one at a time
// into one reused table) must give the same result.
func FuzzTranslate(f *testing.F) {
	files, _ := filepath.Glob("../testdata/sframe/v3-*")
	for _, name := range files {
		if filepath.Ext(name) == ".objdump" {
			continue
		}
		ef, err := elfread.Open(name)
		if err != nil {
			continue
		}
		s, err := ef.Section(".eh_frame")
		if err == nil {
			mode := byte(0)
			switch ef.ELF.Machine {
			case elf.EM_AARCH64:
				mode = 1
			case elf.EM_S390:
				mode = 2
			}
			f.Add(append([]byte{mode}, s.Data...))
		}
		ef.Close()
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		m := data[0]
		in := Input{Machine: elf.EM_X86_64, Order: binary.LittleEndian}
		if m&1 != 0 {
			in.Machine = elf.EM_AARCH64
		}
		if m&2 != 0 {
			// AArch64 big-endian, or s390x (always big-endian).
			in.Order = binary.BigEndian
			if in.Machine != elf.EM_AARCH64 {
				in.Machine = elf.EM_S390
			}
		}
		o := Options{Version: sframe.Version3, SignalOutermost: m&8 != 0}
		if m&4 != 0 {
			o.Version = sframe.Version2
		}
		cf, err := cfi.OpenBytes(ehFrameELF(in, data[1:], 0x10000))
		if err != nil {
			t.Fatal(err)
		}
		var fdes []*cfi.FDE
		for _, sec := range cf.Sections() {
			fdes, _ = cfi.Parse(sec)
		}
		var tables []*cfi.Table
		var run cfi.Context
		for _, fde := range fdes {
			if tb := new(cfi.Table); run.Execute(fde, tb) == nil {
				tables = append(tables, tb)
			}
		}
		if m&16 != 0 {
			names := []string{".plt", ".plt.sec", ".plt.got"}
			in.PLTs = []PLT{{Name: names[int(m>>5)%3], Addr: 0x1000, Data: data[1:], EntSize: uint64(m >> 5)}}
		}
		var all []sframe.Function
		res, err := translateFile(in, alltables.Sorted(tables), o, collect(&all))
		if err != nil {
			t.Fatal(err)
		}
		// Streamed (one FDE executed at a time into one reused table)
		// must give the same.
		var ctx cfi.Context
		var tab cfi.Table
		sorted := slices.Clone(fdes)
		slices.SortStableFunc(sorted, func(a, b *cfi.FDE) int { return stdcmp.Compare(a.Start, b.Start) })
		var got []sframe.Function
		sres, err := translateFile(in, &fdeSource{fdes: sorted, ctx: &ctx, tab: &tab}, o, collect(&got))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("streamed functions differ (-tables +streamed):\n%s", diff)
		}
		if diff := cmp.Diff(res, sres, cmpopts.EquateEmpty(), cmp.AllowUnexported(Result{})); diff != "" {
			t.Fatalf("streamed translation differs (-tables +streamed):\n%s", diff)
		}
		funcs := all
		if o.Version == sframe.Version2 {
			// V2 start fields are 32-bit offsets from the section, which
			// the caller places; keep the functions this test's address
			// can reach.
			funcs = nil
			for _, fn := range all {
				if d := int64(fn.Start) - 0x400000; d >= math.MinInt32/2 && d <= math.MaxInt32/2 {
					funcs = append(funcs, fn)
				}
			}
		}
		tl, err := New(in, o)
		if err != nil {
			t.Fatal(err)
		}
		abi, fixedFP, fixedRA := tl.ABI()
		b, err := sframe.Encode(funcs, sframe.Options{Version: o.Version, ABI: abi, Order: in.Order, Addr: 0x400000,
			PCRel: true, Sort: true, CFAFixedFP: fixedFP, CFAFixedRA: fixedRA})
		if err != nil {
			t.Fatalf("encoding what the Translator emitted: %v", err)
		}
		dec, err := sfsection.Decode(b, 0x400000)
		if err != nil {
			t.Fatalf("decoding our own section: %v", err)
		}
		if len(dec.FDEs) != len(funcs) {
			t.Fatalf("%d functions encoded, %d decoded", len(funcs), len(dec.FDEs))
		}
	})
}

// fdeSource executes parsed FDEs one at a time into one reused table.
type fdeSource struct {
	fdes []*cfi.FDE
	cur  *cfi.FDE
	ctx  *cfi.Context
	tab  *cfi.Table
}

func (s *fdeSource) Next() (*cfi.FDE, error) {
	if len(s.fdes) == 0 {
		return nil, io.EOF
	}
	s.cur, s.fdes = s.fdes[0], s.fdes[1:]
	return s.cur, nil
}

func (s *fdeSource) Table() *cfi.Table {
	if err := s.ctx.Execute(s.cur, s.tab); err != nil {
		return nil
	}
	return s.tab
}
