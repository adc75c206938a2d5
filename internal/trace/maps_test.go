package trace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMaps(t *testing.T) {
	in := `55d0c8a00000-55d0c8a02000 r--p 00000000 fd:01 1835013                    /usr/bin/prog
55d0c8a02000-55d0c8a07000 r-xp 00002000 fd:01 1835013                    /usr/bin/prog
7f0e1c000000-7f0e1c021000 rw-p 00000000 00:00 0 
7f0e1d628000-7f0e1d7b0000 r-xp 00028000 103:02 2621470                   /usr/lib/x86_64-linux-gnu/libc.so.6
7f0e1d900000-7f0e1d901000 r-xp 00000000 00:05 99                         /tmp/a b/lib with spaces.so (deleted)
7ffd4c5b1000-7ffd4c5d2000 rw-p 00000000 00:00 0                          [stack]
7ffd4c5f6000-7ffd4c5f8000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`
	got, err := ParseMaps(strings.NewReader(in), "maps")
	if err != nil {
		t.Fatal(err)
	}
	want := []MapEntry{
		{Lo: 0x55d0c8a00000, Hi: 0x55d0c8a02000, Perms: "r--p", Offset: 0, Dev: "fd:01", Inode: 1835013, Path: "/usr/bin/prog"},
		{Lo: 0x55d0c8a02000, Hi: 0x55d0c8a07000, Perms: "r-xp", Offset: 0x2000, Dev: "fd:01", Inode: 1835013, Path: "/usr/bin/prog"},
		{Lo: 0x7f0e1c000000, Hi: 0x7f0e1c021000, Perms: "rw-p", Dev: "00:00"},
		{Lo: 0x7f0e1d628000, Hi: 0x7f0e1d7b0000, Perms: "r-xp", Offset: 0x28000, Dev: "103:02", Inode: 2621470, Path: "/usr/lib/x86_64-linux-gnu/libc.so.6"},
		{Lo: 0x7f0e1d900000, Hi: 0x7f0e1d901000, Perms: "r-xp", Dev: "00:05", Inode: 99, Path: "/tmp/a b/lib with spaces.so (deleted)"},
		{Lo: 0x7ffd4c5b1000, Hi: 0x7ffd4c5d2000, Perms: "rw-p", Dev: "00:00", Path: "[stack]"},
		{Lo: 0x7ffd4c5f6000, Hi: 0x7ffd4c5f8000, Perms: "r-xp", Dev: "00:00", Path: "[vdso]"},
		{Lo: 0xffffffffff600000, Hi: 0xffffffffff601000, Perms: "--xp", Dev: "00:00", Path: "[vsyscall]"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("ParseMaps (-want +got):\n%s", d)
	}
	for i, w := range []struct{ exec, file bool }{
		{false, true}, {true, true}, {false, false}, {true, true}, {true, true}, {false, false}, {true, false}, {true, false},
	} {
		if got[i].Exec() != w.exec || got[i].File() != w.file {
			t.Errorf("line %d: Exec %v File %v, want %v %v", i+1, got[i].Exec(), got[i].File(), w.exec, w.file)
		}
	}
}

func TestParseMapsErrors(t *testing.T) {
	for _, tc := range []struct{ line, err string }{
		{"", "no address range"},
		{"zz-10 r-xp 0 fd:01 1 /x", `bad start address "zz"`},
		{"10 r-xp 0 fd:01 1 /x", "no address range"},
		{"10-zz r-xp 0 fd:01 1 /x", `bad end address "zz"`},
		{"20-10 r-xp 0 fd:01 1 /x", "ends before it starts"},
		{"10-20 r-x 0 fd:01 1 /x", "bad permissions"},
		{"10-20 r-xp", "no offset"},
		{"10-20 r-xp 0g fd:01 1 /x", `bad offset "0g"`},
		{"10-20 r-xp 0 fd01 1 /x", "bad device"},
		{"10-20 r-xp 0 fd:01", "no inode"},
		{"10-20 r-xp 0 fd:01 -1 /x", `bad inode "-1"`},
		{"10-20 r-xp 0 fd:01 1 " + strings.Repeat("a", maxMapLine), "token too long"},
	} {
		_, err := ParseMaps(strings.NewReader("0-1 r--p 0 00:00 0\n"+tc.line+"\n"), "maps")
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%.40q: error %v, want one containing %q", tc.line, err, tc.err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "maps") || strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("%.40q: error %q is not one line naming the file", tc.line, err)
		}
		if tc.err != "token too long" && !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%.40q: error %q does not name line 2", tc.line, err)
		}
	}
}

func FuzzParseMaps(f *testing.F) {
	f.Add("55d0c8a02000-55d0c8a07000 r-xp 00002000 fd:01 1835013   /usr/bin/prog\n7ffd4c5f6000-7ffd4c5f8000 r-xp 00000000 00:00 0  [vdso]\n")
	f.Add("0-1 ---p 0 0:0 0")
	f.Fuzz(func(t *testing.T, s string) {
		ents, err := ParseMaps(strings.NewReader(s), "maps")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		for _, e := range ents {
			if e.Hi < e.Lo || len(e.Perms) != 4 {
				t.Fatalf("accepted %+v", e)
			}
		}
	})
}
