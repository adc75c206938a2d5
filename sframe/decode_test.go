package sframe_test

import (
	"encoding/binary"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/race"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// header builds a 28-byte header.
func header(o binary.ByteOrder, ver, flags uint8, abi sframe.ABI, fixedRA int8, nFDE, nFRE, freLen, fdeOff, freOff uint32) []byte {
	b := make([]byte, sframe.HeaderSize)
	o.PutUint16(b, sframe.Magic)
	b[2], b[3], b[4], b[6] = ver, flags, uint8(abi), uint8(fixedRA)
	o.PutUint32(b[8:], nFDE)
	o.PutUint32(b[12:], nFRE)
	o.PutUint32(b[16:], freLen)
	o.PutUint32(b[20:], fdeOff)
	o.PutUint32(b[24:], freOff)
	return b
}

type byteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

func TestDecodeErrors(t *testing.T) {
	le := binary.LittleEndian
	withTail := func(b []byte, n int) []byte { return append(b, make([]byte, n)...) }
	tests := []struct {
		name string
		in   []byte
		off  int64
		msg  string
	}{
		{"empty", nil, 0, "too short"},
		{"short", []byte{0xe2, 0xde, 2}, 3, "too short"},
		{"bad magic", make([]byte, 28), 0, "bad magic"},
		{"bad version", header(le, 9, 0, 3, -8, 0, 0, 0, 0, 0), 2, "unsupported version"},
		{"bad abi", header(le, 3, 0, 7, -8, 0, 0, 0, 0, 0), 4, "unknown ABI"},
		{"4 billion FDEs in 30 bytes", withTail(header(le, 3, 0, 3, -8, 0xffffffff, 0, 0, 0, 0), 2), 8, "FDEs"},
		{"FRE sub-section past end", header(le, 3, 0, 3, -8, 0, 0, 100, 0, 0), 16, "FRE sub-section"},
		{"too many FREs", withTail(header(le, 3, 0, 3, -8, 0, 0xffffffff, 2, 0, 0), 2), 12, "FREs cannot fit"},
		{"V3 attribute past end", func() []byte {
			b := header(le, 3, 0, 3, -8, 1, 0, 2, 0, 16)
			fde := make([]byte, 16)
			le.PutUint32(fde[12:], 0)
			return append(append(b, fde...), 0, 0)
		}(), 28 + 12, "attribute"},
		{"FRE count mismatch", func() []byte {
			b := header(le, 2, 0, 3, -8, 1, 2, 4, 0, 20)
			fde := make([]byte, 20)
			le.PutUint32(fde[12:], 1) // one FRE, header says two
			return append(append(b, fde...), 0, 2, 8, 0)
		}(), 12, "FREs"},
		{"truncated FRE words", func() []byte {
			b := header(le, 2, 0, 3, -8, 1, 1, 3, 0, 20)
			fde := make([]byte, 20)
			le.PutUint32(fde[12:], 1)
			fde[16] = 0                                       // FRE type ADDR1
			return append(append(b, fde...), 0, 0x04|0x20, 8) // two 2-byte words, one byte present
		}(), 28 + 20 + 2, "run past"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := sfsection.Decode(tt.in, 0)
			var se *sframe.Error
			if !errors.As(err, &se) {
				t.Fatalf("Decode = %v, %v; want *sframe.Error", s, err)
			}
			if se.Off != tt.off || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("error %q at %d, want %q at %d", se.Msg, se.Off, tt.msg, tt.off)
			}
		})
	}
}

// TestDecodeHugeCountDoesNotAllocate: a section that claims 4 billion
// FDEs and FREs is refused before anything is sized from the counts: at
// most 3 allocations, together at most 1 KiB (125-140 bytes here, up to
// about 510 under -race). Under -race the count is not held: the error's
// formatting takes a printer that fmt keeps in a sync.Pool, which the
// race detector empties at random; the bytes still are.
func TestDecodeHugeCountDoesNotAllocate(t *testing.T) {
	b := append(header(binary.LittleEndian, 3, 0, 3, -8, 0xffffffff, 0xffffffff, 0, 0, 0), 0, 0)
	const runs = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := testing.AllocsPerRun(runs, func() {
		if _, err := sframe.Open(b, 0); err == nil {
			t.Fatal("no error")
		}
	})
	runtime.ReadMemStats(&after)
	if n > 3 && !race.Enabled {
		t.Errorf("rejecting a 30-byte section took %v allocations", n)
	}
	// AllocsPerRun runs the function once more before counting.
	if bytes := (after.TotalAlloc - before.TotalAlloc) / (runs + 1); bytes > 1024 {
		t.Errorf("rejecting a 30-byte section allocated %d bytes", bytes)
	}
}

// TestDecodeSpec decodes hand-built sections laid out from the spec, in
// both byte orders and all three versions.
func TestDecodeSpec(t *testing.T) {
	type fre struct {
		Start     uint32
		Words     []int32
		MangledRA bool
		BaseReg   uint8
	}
	type fde struct {
		Start             uint64
		Size, NumFREs     uint32
		PCType            sframe.PCType
		AddrSize, RepSize uint8
		Flex              bool
		Signal, PauthKeyB bool
		FREs              []fre
	}
	build := func(o byteOrder, ver uint8) []byte {
		// One function of 0x40 bytes at section offset +0x100 (non-PCREL),
		// FRE type ADDR2, two FREs: sp+8; fp+16 with FP at c-16 (2-byte words).
		fres := []byte{}
		if ver == 3 {
			fres = o.AppendUint16(fres, 2)
			fres = append(fres, 1|1<<5|0x80, 0, 0) // FRE type ADDR2, signal, pauth B
		}
		fres = o.AppendUint16(fres, 0)
		fres = append(fres, 1|1<<1) // SP, one 1-byte word
		fres = append(fres, 8)
		fres = o.AppendUint16(fres, 0x21)
		fres = append(fres, 0|2<<1|1<<5|0x80) // FP, two 2-byte words, mangled
		fres = o.AppendUint16(fres, 16)
		fres = o.AppendUint16(fres, 0xfff0)
		var fdes []byte
		switch ver {
		case 1, 2:
			fdes = o.AppendUint32(fdes, 0x100)
			fdes = o.AppendUint32(fdes, 0x40)
			fdes = o.AppendUint32(fdes, 0)
			fdes = o.AppendUint32(fdes, 2)
			fdes = append(fdes, 1|1<<5) // FRE type ADDR2, pauth B
			if ver == 2 {
				fdes = append(fdes, 0, 0, 0)
			}
		case 3:
			fdes = o.AppendUint64(fdes, 0x100)
			fdes = o.AppendUint32(fdes, 0x40)
			fdes = o.AppendUint32(fdes, 0)
		}
		h := header(o, ver, 0, sframe.ABIAArch64BE, 0, 1, 2, uint32(len(fres)), 0, uint32(len(fdes)))
		return append(append(h, fdes...), fres...)
	}
	for _, o := range []byteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, ver := range []uint8{1, 2, 3} {
			s, err := sfsection.Decode(build(o, ver), 0x1000)
			if err != nil {
				t.Fatalf("%v V%d: %v", o, ver, err)
			}
			if s.Order != binary.ByteOrder(o) {
				t.Errorf("byte order %v, want %v", s.Order, o)
			}
			d := s.FDEs[0]
			got := fde{Start: d.Start, Size: d.Size, NumFREs: uint32(len(d.FREs)), PCType: d.PCType, AddrSize: d.AddrSize,
				Flex: d.Flex, RepSize: d.RepSize, Signal: d.Signal, PauthKeyB: d.PauthKeyB}
			for _, f := range d.FREs {
				got.FREs = append(got.FREs, fre{Start: f.Start, Words: append([]int32{}, f.Words[:f.NumWords]...), MangledRA: f.MangledRA, BaseReg: f.BaseReg})
			}
			want := fde{Start: 0x1100, Size: 0x40, NumFREs: 2, AddrSize: 2, PauthKeyB: true, Signal: ver == 3,
				FREs: []fre{{Start: 0, Words: []int32{8}, BaseReg: 1}, {Start: 0x21, Words: []int32{16, -16}, MangledRA: true, BaseReg: 0}}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%v V%d (-want +got):\n%s", o, ver, diff)
			}
		}
	}
}
