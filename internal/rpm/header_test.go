package rpm

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// sampleHeader is a header with a value of every width, so that a new
// layout has alignment to keep.
func sampleHeader() []byte {
	return makeHeader(tagHeaderImmutable, []entry{
		{1000, typeString, 1, encodeStrings([]string{"name"})},
		{1001, typeInt8, 3, []byte{1, 2, 3}},
		{1002, typeInt64, 1, u64s(1 << 40)},
		{1003, typeStringArray, 3, encodeStrings([]string{"a", "", "ccc"})},
		{1004, typeInt16, 1, u16s(7)},
		{1005, typeInt32, 2, u32s(8, 9)},
		{1006, typeBin, 5, []byte("\x00\x01\x02\x03\x04")},
	})
}

// TestHeaderLayout: a header written again after a value changes size, or an
// entry goes, is one rpm reads (parseHeader checks what rpm checks: the
// alignment, order, region), with every other value as it was.
func TestHeaderLayout(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(h *Header) error
		gone   uint32
	}{
		{"nothing", func(*Header) error { return nil }, 0},
		{"same size", func(h *Header) error { return h.Set(1000, []byte("eman\x00")) }, 0},
		{"longer string", func(h *Header) error { return h.Set(1000, []byte("longer name\x00")) }, 0},
		{"shorter array", func(h *Header) error { return h.Set(1003, encodeStrings([]string{"a", "", "c"})) }, 0},
		{"deleted", func(h *Header) error { h.Delete(func(t uint32) bool { return t == 1001 }); return nil }, 1001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleHeader()
			h, err := parseHeader(in)
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := parseHeader(bytes.Clone(in))
			if err := tc.change(h); err != nil {
				t.Fatal(err)
			}
			out := h.Bytes()
			if tc.name == "nothing" && !bytes.Equal(out, in) {
				t.Fatal("not written back byte for byte")
			}
			if int64(len(out)) != h.Size() {
				t.Errorf("Size %d, %d bytes", h.Size(), len(out))
			}
			back, err := parseHeader(out)
			if err != nil {
				t.Fatalf("written, then read: %v", err)
			}
			for _, e := range orig.Entries[1:] {
				f := back.Find(e.Tag)
				switch {
				case e.Tag == tc.gone:
					if f != nil {
						t.Errorf("tag %d kept", e.Tag)
					}
				case f == nil:
					t.Errorf("tag %d lost", e.Tag)
				case f.Type != e.Type || f.Count != e.Count:
					t.Errorf("tag %d: type or count changed", e.Tag)
				case !bytes.Equal(f.Value, h.Find(e.Tag).Value):
					t.Errorf("tag %d: %q, set %q", e.Tag, f.Value, h.Find(e.Tag).Value)
				}
			}
		})
	}
}

func TestParseHeaderErrors(t *testing.T) {
	good := sampleHeader()
	h, _ := parseHeader(good)
	patch := func(off int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.BigEndian.PutUint32(b[off:], v)
		return b
	}
	entry := func(i, field int) int { return 16 + 16*i + 4*field }
	dataStart := 16 + 16*len(h.Entries)
	for _, tc := range []struct {
		name, want string
		in         []byte
	}{
		{"short", "bad magic", good[:10]},
		{"magic", "bad magic", patch(0, 0)},
		{"count too large", "entries and", patch(8, 1<<20)},
		{"data size wrong", "entries and", patch(12, uint32(len(good)))},
		{"unknown type", "unknown type", patch(entry(2, 1), 42)},
		{"zero count", "bad count", patch(entry(2, 3), 0)},
		{"string count 2", "count other than 1", patch(entry(1, 3), 2)},
		{"offset outside", "outside", patch(entry(3, 2), 1<<20)},
		{"misaligned", "misaligned", patch(entry(3, 2), 9)},
		{"overlap", "overlaps", patch(entry(4, 2), 0)},
		{"past the end", "past the data store", patch(entry(7, 3), 30)},
		{"not a region", "not a region tag", patch(entry(0, 0), 1000)},
		{"trailer count", "covers", patch(dataStart+len(good)-dataStart-16+8, 0xffffff00)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseHeader(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := valueLen(typeStringArray, 2, []byte("a\x00b")); err == nil || !strings.Contains(err.Error(), "unterminated") {
		t.Errorf("an unterminated string array: %v", err)
	}
}
