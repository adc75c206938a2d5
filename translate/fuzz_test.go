package translate

import (
	"debug/elf"
	"encoding/binary"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// FuzzTranslate runs arbitrary .eh_frame bytes (and the same bytes as a PLT
// section) through parse, execute, translate, encode and decode: nothing
// may panic, whatever Translate returns must encode and decode again
// with every function present, and streaming (FDEs executed one at a
// time, functions handed to Emit) must give the same result.
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
		sec := &cfi.Section{Kind: cfi.EHFrame, Data: data[1:], Addr: 0x10000, Order: in.Order, PtrSize: 8}
		fdes, _ := cfi.Parse(sec)
		for _, fde := range fdes {
			if tb, err := cfi.Execute(fde); err == nil {
				in.Tables = append(in.Tables, tb)
			}
		}
		if m&16 != 0 {
			names := []string{".plt", ".plt.sec", ".plt.got"}
			in.PLTs = []PLT{{Name: names[int(m>>5)%3], Addr: 0x1000, Data: data[1:], EntSize: uint64(m >> 5)}}
		}
		res, err := Translate(in, o)
		if err != nil {
			t.Fatal(err)
		}
		// Streamed (one FDE executed at a time, functions handed to Emit)
		// must give the same.
		st := in
		st.Tables = nil
		st.FDEs = fdes
		var ip cfi.Interpreter
		var tab cfi.Table
		st.Exec = func(f *cfi.FDE) (*cfi.Table, error) { return &tab, ip.Execute(f, &tab) }
		var got []sframe.Function
		st.Emit = func(fn *sframe.Function) error {
			c := *fn
			c.Rows = append([]sframe.Row(nil), fn.Rows...)
			got = append(got, c)
			return nil
		}
		sres, err := Translate(st, o)
		if err != nil {
			t.Fatal(err)
		}
		sort.SliceStable(got, func(i, j int) bool { return got[i].Start < got[j].Start })
		sres.Funcs = got
		if diff := cmp.Diff(res, sres, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("streamed translation differs (-tables +streamed):\n%s", diff)
		}
		funcs := res.Funcs
		if o.Version == sframe.Version2 {
			// V2 start fields are 32-bit offsets from the section, which
			// the caller places; keep the functions this test's address
			// can reach.
			funcs = nil
			for _, fn := range res.Funcs {
				if d := int64(fn.Start) - 0x400000; d >= math.MinInt32/2 && d <= math.MaxInt32/2 {
					funcs = append(funcs, fn)
				}
			}
		}
		b, err := sframe.Encode(funcs, sframe.Options{Version: o.Version, ABI: res.ABI, Order: in.Order, Addr: 0x400000,
			PCRel: true, Sort: true, CFAFixedFP: res.CFAFixedFP, CFAFixedRA: res.CFAFixedRA})
		if err != nil {
			t.Fatalf("encoding what Translate returned: %v", err)
		}
		dec, err := sframe.Decode(b, 0x400000)
		if err != nil {
			t.Fatalf("decoding our own section: %v", err)
		}
		if len(dec.FDEs) != len(funcs) {
			t.Fatalf("%d functions encoded, %d decoded", len(funcs), len(dec.FDEs))
		}
	})
}
