package trace

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// A synthetic process: one object mapped at bias with f (recursive, an rbp
// frame), main and _start (RA undefined), and a stack of depth calls of f
// from main from _start.
const (
	wBias  = 0x5500_0000_0000
	wStack = 0x7ff0_0000_0000
)

func walkFixture(tb testing.TB, depth int) (*Collector, unwind.Frame) {
	tb.Helper()
	fp := sframe.Loc{Kind: sframe.LocCFA, Offset: -16}
	ra := sframe.Loc{Kind: sframe.LocFixed, Offset: -8}
	cfa := sframe.Loc{Kind: sframe.LocReg, Reg: arch.AMD64.SP(), Offset: 16}
	funcs := []sframe.Function{
		{Start: 0x1000, Size: 0x100, Rows: []sframe.Row{{Start: 0, CFA: cfa, RA: ra, FP: fp}}},
		{Start: 0x2000, Size: 0x100, Rows: []sframe.Row{{Start: 0, CFA: cfa, RA: ra, FP: fp}}},
		{Start: 0x3000, Size: 0x40, Rows: []sframe.Row{{Start: 0, RAUndefined: true}}},
	}
	o := sframe.Options{Version: 3, ABI: sframe.ABIAMD64LE, Order: binary.LittleEndian, PCRel: true, Sort: true}
	o.CFAFixedRA = int8(arch.AMD64.FixedRAOffset())
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		tb.Fatal(err)
	}
	t, err := sframe.Open(b, 0)
	if err != nil {
		tb.Fatal(err)
	}
	obj := &Object{Path: "/bin/synthetic", Table: t, syms: []symbol{
		{0x1000, 0x1100, "f"}, {0x2000, 0x2100, "main"}, {0x3000, 0x3040, "_start"},
	}}
	// Frame k (0 = topmost f) has SP wStack+16k: [saved rbp][return address].
	stack := make([]byte, 16*(depth+2))
	for k := 0; k <= depth; k++ {
		ret := uint64(wBias + 0x1050) // into f
		if k == depth-1 {
			ret = wBias + 0x2040 // into main
		} else if k == depth {
			ret = wBias + 0x3010 // into _start
		}
		binary.LittleEndian.PutUint64(stack[16*k:], wStack+16*uint64(k+1))
		binary.LittleEndian.PutUint64(stack[16*k+8:], ret)
	}
	c := NewCollector(0, false)
	c.mem.read = func(dst []byte, addr uint64) int {
		if addr < wStack || addr >= wStack+uint64(len(stack)) {
			return -1
		}
		return copy(dst, stack[addr-wStack:])
	}
	m := &execMap{MapEntry: MapEntry{Lo: wBias + 0x1000, Hi: wBias + 0x4000, Perms: "r-xp", Offset: 0x1000, Path: obj.Path, Inode: 1}, obj: obj, bias: wBias}
	c.maps = []*execMap{m}
	c.space = unwind.Space{{Lo: m.Lo, Hi: m.Hi, Bias: wBias, Table: t}}
	return c, unwind.Topmost(arch.AMD64, wBias+0x1020, wStack, wStack+16, 0)
}

func TestCollectorSample(t *testing.T) {
	const depth = 18
	c, top := walkFixture(t, depth)
	if n := c.Sample(top); n != depth+2 {
		t.Fatalf("%d frames, want %d", n, depth+2)
	}
	c.Sample(top)
	if c.Samples != 2 || c.Outermost != 2 || c.LastFunc["_start"] != 2 || len(c.Stacks) != 1 || c.Stacks[0].Count != 2 {
		t.Fatalf("samples %d outermost %d last %v stacks %d", c.Samples, c.Outermost, c.LastFunc, len(c.Stacks))
	}
	var names []string
	for _, i := range c.Stacks[0].Locs {
		names = append(names, c.Locs[i].Func)
	}
	want := strings.TrimSuffix(strings.Repeat("f ", depth), " ") + " main _start"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("stack %s, want %s", got, want)
	}
	// The caller frames are looked up at the return address minus one.
	if a := c.Locs[c.Stacks[0].Locs[1]].Addr; a != wBias+0x104f {
		t.Errorf("second frame at %#x, want the return address minus one", a)
	}
	if allocs := testing.AllocsPerRun(100, func() { c.Sample(top) }); allocs != 0 {
		t.Errorf("%v allocations per sample of a known stack", allocs)
	}

	// A stack cut short: the walk stops with a failed read where it ends.
	c2, top2 := walkFixture(t, depth)
	c2.mem.read = func(dst []byte, addr uint64) int { return -1 }
	c2.Sample(top2)
	if c2.Outermost != 0 || len(c2.Stops) != 1 {
		t.Fatalf("stops %v", c2.Stops)
	}
	for k := range c2.Stops {
		if k.Reason != "failed read" || !strings.Contains(k.Where, "f in /bin/synthetic") {
			t.Errorf("stop %+v", k)
		}
	}
	// A PC in no mapping.
	c3, _ := walkFixture(t, depth)
	c3.unknown[0] = struct{}{} // do not reread /proc/0/maps
	c3.Sample(unwind.Topmost(arch.AMD64, 0x10, wStack, 0, 0))
	for k := range c3.Stops {
		if k.Reason != "object without .sframe" || !strings.Contains(k.Where, "outside every executable mapping") {
			t.Errorf("stop %+v", k)
		}
	}
}

// BenchmarkCollectorSample: one sample's walk of a 20-frame stack of a
// known shape, memory served without system calls: the tracer's own cost
// per sample and per frame (the stack read, one process_vm_readv per
// sample, comes on top).
func BenchmarkCollectorSample(b *testing.B) {
	const depth = 18
	c, top := walkFixture(b, depth)
	c.Sample(top)
	for b.Loop() {
		c.Sample(top)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(depth+2), "ns/frame")
}
