package sframe_test

import (
	"encoding/binary"
	"io"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// FuzzDecode decodes arbitrary bytes whole (Open, Check, every FDE);
// whatever decodes must also dump,
// answer lookups, convert to the neutral model and re-encode without
// panicking, and a successful re-encoding must decode to the same model.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0xe2, 0xde, 3, 4, 3, 0, 0xf8, 0})
	for _, b := range sharedSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := sfsection.Decode(b, 0x1000)
		if err != nil {
			return
		}
		tb := s.Table
		if err := tb.Dump(io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := tb.DumpJSON(io.Discard); err != nil {
			t.Fatal(err)
		}
		var st sframe.StepRule
		for _, d := range s.FDEs {
			for _, pc := range []uint64{d.Start, d.Start + uint64(d.Size)/2, d.Start + uint64(d.Size)} {
				tb.Lookup(pc)
				tb.LookupStep(pc, &st)
			}
		}
		for _, pc := range []uint64{0, 0x1000, binary.LittleEndian.Uint64(append(append([]byte{}, b...), make([]byte, 8)...))} {
			tb.Lookup(pc)
		}
		if s.Header.Version == sframe.Version1 {
			return
		}
		funcs := s.Functions()
		out, err := sframe.Encode(funcs, s.Options())
		if err != nil {
			return
		}
		s2, err := sfsection.Decode(out, 0x1000)
		if err != nil {
			t.Fatalf("re-encoded section does not decode: %v", err)
		}
		// A shared section's header counts its blocks' FREs once; the
		// re-encoding, one block per function, all of them.
		total := 0
		for _, d := range s.FDEs {
			total += len(d.FREs)
		}
		if len(s2.FDEs) != len(s.FDEs) || int(s2.Header.NumFREs) != total {
			t.Fatalf("re-encoded section has %d FDEs/%d FREs, want %d/%d", len(s2.FDEs), s2.Header.NumFREs, len(s.FDEs), total)
		}
		o := s.Options()
		o.Share = true
		if b3, err := sframe.Encode(funcs, o); err != nil {
			t.Fatalf("sharing: %v", err)
		} else if s3, err := sfsection.Decode(b3, 0x1000); err != nil || len(s3.FDEs) != len(s.FDEs) {
			t.Fatalf("shared re-encoding does not decode: %v", err)
		}
	})
}
