package sframe_test

import (
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// benchSection reads the raw section named by CFI2SFRAME_BENCH_SFRAME (its
// address in CFI2SFRAME_BENCH_ADDR) and 1,000,000 PCs spread over its
// functions (a fixed pseudo-random sequence: function, then offset in it).
// With CFI2SFRAME_BENCH_PCS set it writes the PCs there as little-endian
// uint64s, relative to the section, for bench/libsframe-bench.c.
func benchSection(b *testing.B) ([]byte, uint64, []uint64) {
	name := os.Getenv("CFI2SFRAME_BENCH_SFRAME")
	if name == "" {
		b.Skip("CFI2SFRAME_BENCH_SFRAME not set (bench/sframe-vs-libsframe.sh sets it)")
	}
	data, err := os.ReadFile(name)
	if err != nil {
		b.Fatal(err)
	}
	addr, err := strconv.ParseUint(os.Getenv("CFI2SFRAME_BENCH_ADDR"), 0, 64)
	if err != nil {
		b.Fatal("CFI2SFRAME_BENCH_ADDR: ", err)
	}
	t, err := sframe.Open(data, addr)
	if err != nil {
		b.Fatal(err)
	}
	pcs := make([]uint64, 1_000_000)
	x := uint64(88172645463325252)
	next := func() uint64 { // xorshift64
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		return x
	}
	for i := range pcs {
		var d sframe.FDE
		if err := t.FDE(int(next()%uint64(int(t.Header.NumFDEs))), &d); err != nil {
			b.Fatal(err)
		}
		pcs[i] = d.Start + next()%uint64(max(d.Size, 1))
	}
	if out := os.Getenv("CFI2SFRAME_BENCH_PCS"); out != "" {
		buf := make([]byte, 8*len(pcs))
		for i, pc := range pcs {
			binary.LittleEndian.PutUint64(buf[8*i:], pc-addr)
		}
		if err := os.WriteFile(out, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return data, addr, pcs
}

// The figures bench/sframe-vs-libsframe.sh compares are measured the same
// way on both sides (bench/libsframe-bench.c does the same in C), so that
// load from other processes on a shared machine counts as little as
// possible: in CPU time of the measuring thread (time the thread waits
// for a CPU is left out), opening as the mean of 50 opens, best of 5
// rounds; lookups as the sum, over blocks of 10,000 PCs, of each block's
// best time in 5 passes over all the PCs.
const (
	openRounds, opensPerRound = 5, 50
	lookupPasses, lookupBlock = 5, 10000
)

// BenchmarkOpen: opening a section (header and FDE checks, no FREs).
// best-ns/open is the figure compared with libsframe.
func BenchmarkOpen(b *testing.B) {
	data, addr, _ := benchSection(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sframe.Open(data, addr); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := time.Duration(math.MaxInt64)
	for range openRounds {
		t0 := threadCPU()
		for range opensPerRound {
			sframe.Open(data, addr)
		}
		best = min(best, (threadCPU()-t0)/opensPerRound)
	}
	b.ReportMetric(float64(best.Nanoseconds()), "best-ns/open")
}

// BenchmarkDecode: decoding every function (Decode), for comparison.
func BenchmarkDecode(b *testing.B) {
	data, addr, _ := benchSection(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sfsection.Decode(data, addr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup: one op is one Table.Lookup of the next PC.
// best-ns/lookup is the figure compared with libsframe.
func BenchmarkLookup(b *testing.B) {
	data, addr, pcs := benchSection(b)
	t, err := sframe.Open(data, addr)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	miss := 0
	i := 0
	for b.Loop() {
		if _, err := t.Lookup(pcs[i]); err != nil {
			miss++
		}
		if i++; i == len(pcs) {
			i = 0
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(miss)/float64(b.N), "misses/op")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	best := make([]time.Duration, (len(pcs)+lookupBlock-1)/lookupBlock)
	for k := range best {
		best[k] = math.MaxInt64
	}
	for range lookupPasses {
		for k := range best {
			blk := pcs[k*lookupBlock : min((k+1)*lookupBlock, len(pcs))]
			t0 := threadCPU()
			for _, pc := range blk {
				t.Lookup(pc)
			}
			best[k] = min(best[k], threadCPU()-t0)
		}
	}
	var sum time.Duration
	for _, d := range best {
		sum += d
	}
	b.ReportMetric(float64(sum.Nanoseconds())/float64(len(pcs)), "best-ns/lookup")
}

// threadCPU returns the CPU time of the calling thread
// (CLOCK_THREAD_CPUTIME_ID, as bench/libsframe-bench.c reads it).
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}
