package sframe_test

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func TestEncodeV2RejectsFlex(t *testing.T) {
	fn := sframe.Function{Start: 0x1234, Size: 8, Flex: true, Rows: []sframe.Row{{CFA: sframe.Loc{Kind: sframe.LocReg, Reg: 10}}}}
	_, err := sframe.Encode([]sframe.Function{fn}, sframe.Options{Version: 2, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8})
	if start, ok := sframe.FuncErrorStart(err); !ok || start != 0x1234 || !strings.Contains(err.Error(), "0x1234") {
		t.Fatalf("err = %v, want a function's error naming 0x1234", err)
	}
	// A default FDE whose CFA is not SP/FP based is refused in any version.
	fn.Flex = false
	if _, err := sframe.Encode([]sframe.Function{fn}, sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, CFAFixedRA: -8}); err == nil {
		t.Fatal("no error")
	} else if _, ok := sframe.FuncErrorStart(err); !ok {
		t.Fatalf("err = %v, want a function's error", err)
	}
}

// TestEncodeWidths checks the narrowest FRE type and data-word size.
func TestEncodeWidths(t *testing.T) {
	sp := arch.ARM64.SP()
	tests := []struct {
		size     uint32
		start    uint32
		cfa      int32
		addrSize uint8
		wordSize uint8
	}{
		{size: 0xff, start: 0x10, cfa: 127, addrSize: 1, wordSize: 1},
		{size: 0x100, start: 0x10, cfa: 128, addrSize: 2, wordSize: 2},
		{size: 0xffff, start: 0xfff0, cfa: -32768, addrSize: 2, wordSize: 2},
		{size: 0x10000, start: 0x10, cfa: 32768, addrSize: 4, wordSize: 4},
		{size: 0x10, start: 0, cfa: -128, addrSize: 1, wordSize: 1},
	}
	for _, tt := range tests {
		fn := sframe.Function{Start: 0x400000, Size: tt.size, Rows: []sframe.Row{
			{Start: tt.start, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: tt.cfa}, RA: sframe.Loc{Kind: sframe.LocCFA, Offset: -8}, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -16}},
		}}
		b, err := sframe.Encode([]sframe.Function{fn}, sframe.Options{Version: 3, ABI: sframe.ABIAArch64LE, Order: binary.LittleEndian, Addr: 0x1000, PCRel: true})
		if err != nil {
			t.Fatal(err)
		}
		s, err := sfsection.Decode(b, 0x1000)
		if err != nil {
			t.Fatal(err)
		}
		d := s.FDEs[0]
		if d.Start != 0x400000 || d.AddrSize != tt.addrSize || d.FREs[0].WordSize != tt.wordSize || d.FREs[0].NumWords != 3 {
			t.Errorf("size %#x cfa %d: start %#x FRE start fields of %d bytes, word size %d words %d, want %d and %d",
				tt.size, tt.cfa, d.Start, d.AddrSize, d.FREs[0].WordSize, d.FREs[0].NumWords, tt.addrSize, tt.wordSize)
		}
		if diff := cmp.Diff([]sframe.Function{fn}, s.Functions()); diff != "" {
			t.Errorf("model changed (-want +got):\n%s", diff)
		}
	}
}

// TestReencodeAcrossVersions converts every V2/V3 fixture to V2 and V3,
// with and without PCREL, at another address and in the other byte order,
// and checks that the neutral model survives (V2 drops flex functions and
// the signal bit).
func TestReencodeAcrossVersions(t *testing.T) {
	for _, path := range fixtures(t) {
		es := loadFixture(t, path)
		sec, err := sfsection.Decode(es.Data, es.Addr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if sec.Header.Version == sframe.Version1 {
			continue
		}
		orig := sec.Functions()
		for _, ver := range []uint8{2, 3} {
			for _, pcrel := range []bool{false, true} {
				o := sec.Options()
				o.Version, o.PCRel, o.Addr = ver, pcrel, o.Addr+0x1000
				if o.Order == binary.LittleEndian {
					o.Order = binary.BigEndian
				} else {
					o.Order = binary.LittleEndian
				}
				want := orig
				if ver == 2 {
					want = nil
					for _, f := range orig {
						if !f.Flex {
							f.Signal = false
							want = append(want, f)
						}
					}
				}
				b, err := sframe.Encode(want, o)
				if err != nil {
					t.Fatalf("%s V%d pcrel=%v: %v", filepath.Base(path), ver, pcrel, err)
				}
				s2, err := sfsection.Decode(b, o.Addr)
				if err != nil {
					t.Fatalf("%s V%d pcrel=%v: decode: %v", filepath.Base(path), ver, pcrel, err)
				}
				if diff := cmp.Diff(want, s2.Functions(), cmp.Comparer(func(a, b []sframe.Function) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
					t.Errorf("%s V%d pcrel=%v (-want +got):\n%s", filepath.Base(path), ver, pcrel, diff)
				}
			}
		}
	}
}

// TestEncodeRoundTripOddities: s390x V2 registers in the LSB form (and RA
// padding), an auxiliary header, SFRAME_F_FRAME_POINTER, an unsorted
// section, a zero-FRE (outermost) function.
func TestEncodeRoundTripOddities(t *testing.T) {
	sp := arch.S390X.SP()
	funcs := []sframe.Function{
		{Start: 0x3000, Size: 0x20, Rows: []sframe.Row{
			{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 160}},
			{Start: 4, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 160}, RA: sframe.Loc{Kind: sframe.LocReg, Reg: 16}},
			{Start: 8, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 320}, FP: sframe.Loc{Kind: sframe.LocCFA, Offset: -72}},
			{Start: 12, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: sp, Offset: 320}, RA: sframe.Loc{Kind: sframe.LocCFA, Offset: -48}, FP: sframe.Loc{Kind: sframe.LocReg, Reg: 17}},
		}},
		{Start: 0x1000, Size: 0x10, Rows: []sframe.Row{}},
	}
	o := sframe.Options{Version: 2, ABI: sframe.ABIS390XBE, Order: binary.BigEndian, Addr: 0x8000,
		FramePointer: true, AuxHdr: []byte{1, 2, 3}}
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sfsection.Decode(b, 0x8000)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(funcs, s.Functions()); diff != "" {
		t.Errorf("model (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(o, s.Options(), cmp.Comparer(func(a, b binary.ByteOrder) bool { return a == b })); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	words := s.FDEs[0].FREs[1].Words[:s.FDEs[0].FREs[1].NumWords]
	if !cmp.Equal(words, []int32{0, 16<<1 | 1}) {
		t.Errorf("s390x RA-in-register words %v, want [0 33]", words)
	}
	words = s.FDEs[0].FREs[2].Words[:s.FDEs[0].FREs[2].NumWords]
	if !cmp.Equal(words, []int32{20, 0, -72}) {
		t.Errorf("s390x FP-only words %v, want [20 0 -72] (RA padding)", words)
	}
	tb, err := sframe.Open(b, 0x8000)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := tb.Lookup(0x1004); err != sframe.ErrNoFRE {
		t.Errorf("Lookup in a V2 zero-FRE function = %+v, %v; want ErrNoFRE", r, err)
	}
	var sb strings.Builder
	if err := tb.Dump(&sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SFRAME_F_FRAME_POINTER", "sp+320    c-72      u", "sp+320    r17+0     c-48", "func idx [1]: pc = 0x1000, size = 16 bytes\n    STARTPC"} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("dump lacks %q:\n%s", want, sb.String())
		}
	}
}

// TestEncoderSectionAgain: the incremental Encoder gives Encode's bytes,
// and a second Section at another address (elfwrite re-planned) rewrites
// only the index, to what Encode gives at that address.
func TestEncoderSectionAgain(t *testing.T) {
	for _, path := range fixtures(t) {
		es := loadFixture(t, path)
		sec, err := sfsection.Decode(es.Data, es.Addr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if sec.Header.Version == sframe.Version1 {
			continue
		}
		funcs := sec.Functions()
		o := sec.Options()
		e, err := sframe.NewEncoder(o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range funcs {
			if err := e.Add(&funcs[i]); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		if sframe.EncoderLen(e) != len(funcs) {
			t.Errorf("%s: Len %d, added %d", path, sframe.EncoderLen(e), len(funcs))
		}
		for _, addr := range []uint64{o.Addr, o.Addr + 0x123458, o.Addr} {
			got, err := e.Section(addr)
			if err != nil {
				t.Fatalf("%s at %#x: %v", path, addr, err)
			}
			o.Addr = addr
			want, err := sframe.Encode(funcs, o)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s at %#x: Encoder and Encode differ", filepath.Base(path), addr)
			}
		}
		if err := e.Add(&sframe.Function{Start: 1}); err == nil {
			t.Errorf("%s: Add after Section succeeded", path)
		}
	}
}

// TestEncoderAppend: functions added to two encoders, the second appended
// to the first, give the section of one encoder that got them all in the
// same order, wherever the cut is (FRE chunks small, so that both
// encoders hold several); encoders with other options do not append.
func TestEncoderAppend(t *testing.T) {
	defer sframe.SetFREChunk(64)()
	n := 0
	for _, path := range fixtures(t) {
		es := loadFixture(t, path)
		sec, err := sfsection.Decode(es.Data, es.Addr)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if sec.Header.Version == sframe.Version1 {
			continue
		}
		funcs := sec.Functions()
		o := sec.Options()
		want, err := sframe.Encode(funcs, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, cut := range []int{0, 1, len(funcs) / 2, len(funcs) - 1, len(funcs)} {
			if cut < 0 || cut > len(funcs) {
				continue
			}
			a := appendedAt(t, path, o, funcs, cut)
			if sframe.EncoderLen(a) != len(funcs) {
				t.Errorf("%s cut %d: Len %d, want %d", path, cut, sframe.EncoderLen(a), len(funcs))
			}
			got, err := a.Section(o.Addr)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s cut %d: appended encoders and Encode differ", filepath.Base(path), cut)
			}
			n++
		}
		other := o
		other.PCRel = !o.PCRel
		a, _ := sframe.NewEncoder(o)
		b, _ := sframe.NewEncoder(other)
		if err := a.Append(b); err == nil {
			t.Errorf("%s: appended an encoder with other options", path)
		}
	}
	if n == 0 {
		t.Fatal("no fixture compared")
	}
}

// appendedAt adds funcs[:cut] to one encoder and the rest to a second,
// appends the second to the first, as a conversion on two goroutines
// does, and returns the first. The second takes the rest in two halves,
// appended one after the other: an encoder appended is empty and takes
// functions again, as the conversion reuses them. what names the
// functions in a failure.
func appendedAt(t *testing.T, what string, o sframe.Options, funcs []sframe.Function, cut int) *sframe.Encoder {
	t.Helper()
	a, err := sframe.NewEncoder(o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range funcs[:cut] {
		if err := a.Add(&funcs[i]); err != nil {
			t.Fatalf("%s: function %d: %v", what, i, err)
		}
	}
	b, _ := sframe.NewEncoder(o)
	mid := cut + (len(funcs)-cut)/2
	for _, half := range [][2]int{{cut, mid}, {mid, len(funcs)}} {
		for i := half[0]; i < half[1]; i++ {
			if err := b.Add(&funcs[i]); err != nil {
				t.Fatalf("%s: function %d: %v", what, i, err)
			}
		}
		if err := a.Append(b); err != nil {
			t.Fatalf("%s cut %d: %v", what, cut, err)
		}
		if sframe.EncoderLen(b) != 0 {
			t.Fatalf("%s cut %d: %d functions left in an appended encoder", what, cut, sframe.EncoderLen(b))
		}
	}
	return a
}
