package trace

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/pprof/profile"
)

// testCollector holds three stacks over two objects and an anonymous
// mapping: main -> work -> leaf (5 samples, twice recorded), main -> work
// (2) and main -> [anon] (1).
func testCollector() *Collector {
	prog := &Object{Path: "/bin/prog", BuildID: "abcd"}
	lib := &Object{Path: "/lib/libx.so"}
	mp := &execMap{MapEntry: MapEntry{Lo: 0x1000, Hi: 0x2000, Offset: 0x1000, Path: "/bin/prog", Inode: 1}, obj: prog}
	ml := &execMap{MapEntry: MapEntry{Lo: 0x7000, Hi: 0x8000, Path: "/lib/libx.so", Inode: 2}, obj: lib}
	ma := &execMap{MapEntry: MapEntry{Lo: 0x9000, Hi: 0xa000}}
	c := &Collector{
		Locs: []Loc{
			{Addr: 0x1010, Map: mp, Func: "main"},
			{Addr: 0x1020, Map: mp, Func: "work"},
			{Addr: 0x7010, Map: ml, Func: "leaf;odd name"},
			{Addr: 0x9010, Map: ma, Func: "[anon]"},
		},
	}
	// The same mapping again, as after rereading the maps.
	mp2 := *mp
	c.Locs = append(c.Locs, Loc{Addr: 0x1030, Map: &mp2, Func: "main"})
	c.Stacks = []*Stack{
		{Locs: []int{4}, Count: 1},
		{Locs: []int{2, 1, 0}, Count: 3},
		{Locs: []int{1, 0}, Count: 2},
		{Locs: []int{3, 0}, Count: 1},
		{Locs: []int{2, 1, 0}, Count: 2}, // the same names again
	}
	return c
}

func TestWriteFolded(t *testing.T) {
	var b bytes.Buffer
	if err := testCollector().WriteFolded(&b); err != nil {
		t.Fatal(err)
	}
	want := "main 1\nmain;[anon] 1\nmain;work 2\nmain;work;leaf:odd_name 5\n"
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("folded (-want +got):\n%s", d)
	}
}

func TestProfile(t *testing.T) {
	c := testCollector()
	start := time.Unix(1700000000, 0)
	p := c.Profile(100, start, 2*time.Second)
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	q, err := profile.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if q.Period != 10_000_000 || q.DurationNanos != 2e9 || q.TimeNanos != start.UnixNano() {
		t.Errorf("period %d duration %d time %d", q.Period, q.DurationNanos, q.TimeNanos)
	}
	// Per stack: function names leaf first, and the values.
	var got []string
	total := int64(0)
	for _, s := range q.Sample {
		var names []string
		for _, l := range s.Location {
			names = append(names, l.Line[0].Function.Name)
		}
		got = append(got, strings.Join(names, "<")+" "+strconv.FormatInt(s.Value[0], 10)+" "+strconv.FormatInt(s.Value[1], 10))
		total += s.Value[0]
	}
	want := []string{
		"main 1 10000000",
		"leaf;odd name<work<main 3 30000000",
		"work<main 2 20000000",
		"[anon]<main 1 10000000",
		"leaf;odd name<work<main 2 20000000",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("samples (-want +got):\n%s", d)
	}
	if total != 9 {
		t.Errorf("%d samples, want 9", total)
	}
	type m struct {
		File, BuildID     string
		Start, Limit, Off uint64
		HasFunctions      bool
	}
	var maps []m
	for _, x := range q.Mapping {
		maps = append(maps, m{x.File, x.BuildID, x.Start, x.Limit, x.Offset, x.HasFunctions})
	}
	wantMaps := []m{
		{"/bin/prog", "abcd", 0x1000, 0x2000, 0x1000, true},
		{"/lib/libx.so", "", 0x7000, 0x8000, 0, true},
		{"", "", 0x9000, 0xa000, 0, false},
	}
	if d := cmp.Diff(wantMaps, maps); d != "" {
		t.Errorf("mappings (-want +got):\n%s", d)
	}
	for _, l := range q.Location {
		if l.Mapping == nil || l.Address < l.Mapping.Start || l.Address >= l.Mapping.Limit {
			t.Errorf("location %#x outside its mapping", l.Address)
		}
	}
}
