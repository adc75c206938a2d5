package codeentry

import (
	"debug/elf"
	"encoding/binary"
	"reflect"
	"testing"
)

func TestIsNoReturn(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"abort", true}, {"exit@GLIBC_2.2.5", true}, {"__stack_chk_fail", true},
		{"_ZSt16__throw_bad_allocv", true}, {"_ZSt20__throw_length_errorPKc", true},
		{"_ZSt9terminatev", true}, {"printf", false}, {"exit_group", false},
		{"_ZSt4endlIcSt11char_traitsIcEERSt13basic_ostreamIT_T0_ES6_", false},
		{"__throw_bad_alloc", false}, {"aborted", false},
	} {
		if got := isNoReturn(c.name); got != c.want {
			t.Errorf("isNoReturn(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestColdName(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		{"main.cold", true}, {"foo.cold.3", true}, {"_Z3barv.cold", true},
		{"foo.part.0", false}, {"foo.isra.0", false}, {"foo.constprop.0", false},
		{"check.constprop.0.cold", true}, {"coldstart", false}, {"foo.colder", false},
	} {
		if got := coldName.MatchString(c.name); got != c.want {
			t.Errorf("cold(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDecodeRELR(t *testing.T) {
	words := func(w ...uint64) []byte {
		b := make([]byte, 8*len(w))
		for i, x := range w {
			binary.LittleEndian.PutUint64(b[8*i:], x)
		}
		return b
	}
	for _, c := range []struct {
		name string
		in   []byte
		want []uint64
	}{
		{"address", words(0x1000), []uint64{0x1000}},
		// Bit 1 is the word after the address, bit 3 the third.
		{"bitmap", words(0x1000, 0b1011), []uint64{0x1000, 0x1008, 0x1018}},
		// A second bitmap starts 63 words after the first.
		{"two bitmaps", words(0x2000, 0b11, 0b11), []uint64{0x2000, 0x2008, 0x2000 + 8 + 63*8}},
		{"truncated", []byte{1, 2, 3}, nil},
	} {
		if got := decodeRELR(c.in, binary.LittleEndian); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
}

func TestNoteDesc(t *testing.T) {
	note := func(name string, typ uint32, desc []byte) []byte {
		n := append([]byte(name), 0)
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(n)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
		b = binary.LittleEndian.AppendUint32(b, typ)
		for b = append(b, n...); len(b)%4 != 0; {
			b = append(b, 0)
		}
		for b = append(b, desc...); len(b)%4 != 0; {
			b = append(b, 0)
		}
		return b
	}
	id := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	for _, c := range []struct {
		name string
		in   []byte
		want []byte
	}{
		{"build-id", note("GNU", 3, id), id},
		{"after another note", append(note("GNU", 1, []byte{1, 2, 3, 4}), note("GNU", 3, id)...), id},
		{"other owner", note("Go", 3, id), nil},
		{"truncated", note("GNU", 3, id)[:18], nil},
		{"huge size", append(binary.LittleEndian.AppendUint32(nil, 4), 0xff, 0xff, 0xff, 0xff, 3, 0, 0, 0, 'G', 'N', 'U', 0), nil},
	} {
		if got := noteDesc(c.in, binary.LittleEndian, 3, "GNU"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, got, c.want)
		}
	}
}

func TestOverlaps(t *testing.T) {
	spans := []Span{{0x10, 0x20}, {0x30, 0x40}}
	for _, c := range []struct {
		lo, hi uint64
		want   bool
	}{
		{0, 0x10, false}, {0, 0x11, true}, {0x1f, 0x1f, true}, {0x20, 0x30, false},
		{0x20, 0x31, true}, {0x40, 0x50, false}, {0x3f, 0x50, true}, {0x25, 0x25, false},
	} {
		if got := overlaps(spans, c.lo, c.hi); got != c.want {
			t.Errorf("overlaps(%#x, %#x) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestPadLen(t *testing.T) {
	for _, c := range []struct {
		arm  bool
		in   []byte
		want int
	}{
		{false, []byte{0x90}, 1},
		{false, []byte{0x66, 0x90}, 2},
		{false, []byte{0x0f, 0x1f, 0x40, 0x00}, 4},
		{false, []byte{0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0}, 10},
		{false, []byte{0xcc}, 1},
		{false, []byte{0x0f, 0x0b}, 2},
		{false, []byte{0xf3, 0x0f, 0x1e, 0xfa}, 0}, // endbr64 starts a function
		{false, []byte{0x55}, 0},
		{true, []byte{0x1f, 0x20, 0x03, 0xd5}, 4},
		{true, []byte{0, 0, 0, 0}, 4},
		{true, []byte{0x5f, 0x24, 0x03, 0xd5}, 0}, // bti c
		{true, []byte{0xfd, 0x7b, 0xbf, 0xa9}, 0}, // stp x29, x30, [sp, #-16]!
	} {
		m := machineOf(c.arm)
		if got := padLen(m, c.in, 0x1000); got != c.want {
			t.Errorf("padLen(%v, % x) = %d, want %d", m, c.in, got, c.want)
		}
	}
}

func machineOf(arm bool) elf.Machine {
	if arm {
		return elf.EM_AARCH64
	}
	return elf.EM_X86_64
}
