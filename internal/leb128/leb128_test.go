package leb128

import "testing"

func TestDecode(t *testing.T) {
	for _, c := range []struct {
		in []byte
		u  uint64
		s  int64
		n  int
	}{
		{[]byte{0}, 0, 0, 1},
		{[]byte{2}, 2, 2, 1},
		{[]byte{0x7f}, 127, -1, 1},
		{[]byte{0x80, 1}, 128, 128, 2},
		{[]byte{0x81, 0x7f}, 16257, -127, 2},
		{[]byte{0xe5, 0x8e, 0x26, 0xff}, 624485, 624485, 3},
		{[]byte{0xc0, 0xbb, 0x78}, 1973696, -123456, 3},
		// Ten bytes: the 64th bit set; bits past 64 dropped.
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 1 << 63, -1 << 63, 10},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 1<<64 - 1, -1, 11},
		// Runs past the end.
		{[]byte{0x80}, 0, 0, 0},
		{nil, 0, 0, 0},
	} {
		u, n := Uleb(c.in)
		if u != c.u || n != c.n {
			t.Errorf("Uleb(% x) = %d, %d; want %d, %d", c.in, u, n, c.u, c.n)
		}
		s, n := Sleb(c.in)
		if s != c.s || n != c.n {
			t.Errorf("Sleb(% x) = %d, %d; want %d, %d", c.in, s, n, c.s, c.n)
		}
	}
}
