package codeentry

import (
	"bytes"
	"debug/elf"
	"math/rand"
	"os"
	"reflect"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/race"
)

// TestSweepParts holds the sweep in parts, stitched, to the one decode
// from each range's start (a single part per range), on real code and
// on bytes made to put the parts out of step: random bytes, long
// padding runs across the parts' boundaries, data spans.
func TestSweepParts(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	random := make([]byte, 1<<16)
	rng.Read(random)
	// int3 runs and multi-byte nops that the parts' boundaries cut, with
	// calls and returns between them.
	var padded []byte
	for i := 0; len(padded) < 1<<15; i++ {
		padded = append(padded, bytes.Repeat([]byte{0xcc}, 1+i%700)...)
		padded = append(padded, 0xe8, byte(i), 0, 0, 0, 0xc3)
		padded = append(padded, bytes.Repeat([]byte{0x0f, 0x1f, 0x44, 0, 0}, i%90)...)
		padded = append(padded, 0x48, 0x8d, 0x05, byte(i), 1, 0, 0) // lea rip-relative
	}
	type tc struct {
		name  string
		m     elf.Machine
		text  []region
		data  []Span
		moved bool // the parts must be put out of step (late or whole)
	}
	cases := []tc{
		{"amd64 random", elf.EM_X86_64, []region{{addr: 0x1000, data: random}, {addr: 0x40000, data: random[:5000]}}, nil, true},
		{"amd64 padding", elf.EM_X86_64, []region{{addr: 0x3000, data: padded}}, nil, true},
		{"amd64 data spans", elf.EM_X86_64, []region{{addr: 0x1000, data: random}}, []Span{{0x1100, 0x1180}, {0x5000, 0x5003}, {0x8000, 0x9001}}, true},
		{"arm64 random", elf.EM_AARCH64, []region{{addr: 0x10000, data: random}}, []Span{{0x10400, 0x10480}}, false},
	}
	if b, err := os.ReadFile("/usr/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		if f, err := elf.NewFile(bytes.NewReader(b)); err == nil {
			if s := f.Section(".text"); s != nil {
				d, _ := s.Data()
				cases = append(cases, tc{"libc .text", elf.EM_X86_64, []region{{addr: s.Addr, data: d}}, nil, false})
			}
		}
	}
	for _, c := range cases {
		if c.m == elf.EM_AARCH64 && race.Enabled {
			// arm64asm marks the rules it decodes with in a package table
			// (internal/isa.ARM64): a harmless race the detector reports.
			continue
		}
		one := newSweep(&image{text: c.text}, c.m)
		one.sweepParts(c.data, 1<<30)
		for _, size := range []int{64, 192, 4096} {
			sw := newSweep(&image{text: c.text}, c.m)
			late, whole := sw.sweepParts(c.data, size)
			if c.moved && late == 0 {
				t.Errorf("%s, parts of %d: the stitching never fell into step after a part's start", c.name, size)
			}
			if c.name == "amd64 padding" && size == 64 && whole == 0 {
				t.Errorf("%s, parts of %d: no part swept whole", c.name, size)
			}
			for _, x := range []struct {
				what      string
				got, want any
			}{
				{"starts", sw.starts, one.starts}, {"stopped", sw.stopped, one.stopped},
				{"calls", sw.calls, one.calls}, {"jumps", sw.jumps, one.jumps},
				{"refs", sw.refs, one.refs}, {"tables", sw.tables, one.tables},
				{"pads", sw.pads, one.pads}, {"callNext", sw.callNext, one.callNext},
			} {
				if !reflect.DeepEqual(x.got, x.want) {
					t.Errorf("%s, parts of %d: %s differ from the one decode's", c.name, size, x.what)
				}
			}
		}
	}
}
