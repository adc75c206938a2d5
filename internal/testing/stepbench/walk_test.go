//go:build amd64

// The walk benchmark samples a program through ptrace, reading the
// x86-64 registers.

package stepbench

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/internal/trace"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// luaScript is the workload: Lua functions that call each other through
// pcall, table.sort's comparator and string.gsub's callback, so that the
// interpreter's C stack (luaV_execute, luaD_call, the library functions)
// is tens of frames deep, with the time spent in the innermost loop.
const luaScript = `
local function work(n) local s = 0 for i = 1, n do s = s + (i * i) % 7 end return s end
local function f(n)
  if n == 0 then return work(2000) end
  local ok, v = pcall(f, n - 1)
  return v
end
local t = {}
for i = 1, 40 do t[i] = tostring(i) end
while true do
  for d = 1, 30, 3 do f(d) end
  table.sort(t, function(a, b) f(2) return a < b end)
  string.gsub(("x"):rep(20), "x", function() return tostring(f(4)) end)
end
`

// snapMem is a copy of a thread's stack from SP to the top of [stack].
type snapMem struct {
	lo uint64
	b  []byte
}

func (m *snapMem) ReadWord(addr uint64) (uint64, bool) {
	if addr < m.lo || addr-m.lo > uint64(len(m.b))-8 || len(m.b) < 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(m.b[addr-m.lo:]), true
}

// stackSample is one sample: the topmost registers and the stack.
type stackSample struct {
	pc, sp, fp uint64
	mem        *snapMem
	steps      int // steps both sides take, agreeing frame by frame
}

// recordLua runs lua5.4 on luaScript, samples it n times with ptrace
// (seize, interrupt, registers, a copy of the stack, continue) and returns
// the samples and the process's mappings. The process is killed at the
// end.
func recordLua(b *testing.B, n int) ([]stackSample, []trace.MapEntry) {
	lua, err := exec.LookPath("lua5.4")
	if err != nil {
		if toolchain.Required() {
			b.Fatal("lua5.4 not installed (apt-get install lua5.4): ", err)
		}
		b.Skip("lua5.4 not installed (apt-get install lua5.4): ", err)
	}
	if runtime.GOARCH != "amd64" {
		b.Skip("the walk benchmark samples x86-64 registers")
	}
	// ptrace requests must come from the thread that seized the process.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(lua, "-e", luaScript)
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	time.Sleep(50 * time.Millisecond)
	if err := unix.PtraceSeize(pid); err != nil {
		b.Skip("ptrace: ", err)
	}
	mf, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer mf.Close()
	readMaps := func() []trace.MapEntry {
		mb, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			b.Fatal(err)
		}
		ms, err := trace.ParseMaps(bytes.NewReader(mb), "maps")
		if err != nil {
			b.Fatal(err)
		}
		return ms
	}
	var stackHi uint64
	for _, m := range readMaps() {
		if m.Path == "[stack]" {
			stackHi = m.Hi
		}
	}
	if stackHi == 0 {
		b.Fatal("no [stack] mapping")
	}
	var out []stackSample
	for len(out) < n {
		time.Sleep(time.Millisecond)
		if err := unix.PtraceInterrupt(pid); err != nil {
			b.Fatal(err)
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
			b.Fatal(err)
		}
		if !ws.Stopped() {
			b.Fatalf("lua5.4 did not stop: %v", ws)
		}
		var regs unix.PtraceRegs
		if err := unix.PtraceGetRegs(pid, &regs); err != nil {
			b.Fatal(err)
		}
		sp := regs.Rsp
		if sp < stackHi && stackHi-sp < 1<<20 {
			m := &snapMem{lo: sp, b: make([]byte, stackHi-sp)}
			if k, err := mf.ReadAt(m.b, int64(sp)); err == nil && k == len(m.b) {
				out = append(out, stackSample{pc: regs.Rip, sp: sp, fp: regs.Rbp, mem: m})
			}
		}
		sig := 0
		if ws.StopSignal() != unix.SIGTRAP {
			sig = int(ws.StopSignal())
		}
		if err := unix.PtraceCont(pid, sig); err != nil {
			b.Fatal(err)
		}
	}
	return out, readMaps()
}

// execBias returns the load bias of a file's executable mapping e.
func execBias(name string, e trace.MapEntry) (uint64, bool) {
	f, err := elf.Open(name)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Off <= e.Offset && e.Offset < p.Off+p.Filesz {
			return e.Lo - (p.Vaddr + (e.Offset - p.Off)), true
		}
	}
	return 0, false
}

// dwarfWalk takes up to n steps from the sample's topmost frame with the
// DWARF steppers of the objects of sp's mappings (Obj indexes ds), writing
// each frame's PC, SP and FP; it returns how many steps it took.
func dwarfWalk(sp *unwind.Space, ds []*dwarfStepper, s *stackSample, n int, pcs []uint64) int {
	pc, rsp, fp := s.pc, s.sp, s.fp
	top := true
	var m *unwind.Mapping
	for k := 0; k < n; k++ {
		look := pc
		if !top {
			look--
		}
		// The last frame's mapping first, as unwind.Walk does.
		if m == nil || look-m.Lo >= m.Hi-m.Lo {
			m = sp.Find(look)
		}
		if m == nil {
			return k
		}
		ra, cfa, nfp, ok := ds[m.Obj].step(look-m.Bias, rsp, fp, s.mem)
		if !ok || ra == 0 || cfa <= rsp {
			return k
		}
		pc, rsp, fp, top = ra, cfa, nfp, false
		pcs[k] = pc
	}
	return n
}

// BenchmarkWalkSFrameVsDWARF: whole stacks, as a profiler walks them.
// lua5.4 running a script is sampled 500 times with ptrace (registers and
// a copy of the stack); lua5.4 and the libraries it maps are converted in
// the test, and every stack is walked with unwind.Walk and with the DWARF
// stepper, each side taking the steps on which both agree frame by frame
// (same PC, SP and FP). The same functions come back in every stack, so
// the caches are warm for both sides: this is the profiler's case, where
// BenchmarkStepSFrameVsDWARF is the cold one.
func BenchmarkWalkSFrameVsDWARF(b *testing.B) {
	samples, maps := recordLua(b, 500)
	space := &unwind.Space{}
	var ds, dps []*dwarfStepper // parsing at each step, preparsed
	for _, e := range maps {
		if !e.Exec() || !e.File() {
			continue
		}
		data, err := os.ReadFile(e.Path)
		if err != nil {
			b.Fatal(err)
		}
		bias, ok := execBias(e.Path, e)
		if !ok {
			b.Fatalf("%s: no load segment for the executable mapping", e.Path)
		}
		res, err := convertBytes(e.Path, data)
		if err != nil {
			b.Fatalf("%s: %v", e.Path, err)
		}
		tb, err := sframe.Open(res.SFrame, res.Addr)
		if err != nil {
			b.Fatal(err)
		}
		d, err := newDwarfStepper(e.Path, false)
		if err != nil {
			b.Fatal(err)
		}
		dp, err := newDwarfStepper(e.Path, true)
		if err != nil {
			b.Fatal(err)
		}
		*space = append(*space, unwind.Mapping{Lo: e.Lo, Hi: e.Hi, Bias: bias, Table: tb, Obj: len(ds)})
		ds = append(ds, d)
		dps = append(dps, dp)
	}
	u := &unwind.Unwinder{Arch: arch.AMD64, Space: space}

	// The steps on which both sides agree, sample by sample.
	const maxDepth = 1024
	pcs := make([]uint64, maxDepth)
	var seen []uint64
	frames, full, stackBytes := 0, 0, 0
	for i := range samples {
		s := &samples[i]
		u.Mem = s.mem
		f := unwind.Topmost(arch.AMD64, s.pc, s.sp, s.fp, 0)
		pc, sp, fp, top := s.pc, s.sp, s.fp, true
		k := 0
		seen = seen[:0]
		for ; k < maxDepth; k++ {
			seen = append(seen, f.PC)
			why, _ := u.Step(&f)
			look := pc
			if !top {
				look--
			}
			m := space.Find(look)
			if m == nil {
				break
			}
			ra, cfa, nfp, ok := ds[m.Obj].step(look-m.Bias, sp, fp, s.mem)
			if ra2, cfa2, nfp2, ok2 := dps[m.Obj].step(look-m.Bias, sp, fp, s.mem); ok2 != ok || ok && (ra2 != ra || cfa2 != cfa || nfp2 != nfp) {
				b.Fatalf("pc %#x: the two DWARF steppers disagree", look)
			}
			okD := ok && ra != 0 && cfa > sp
			if why != unwind.ReasonOK || !okD {
				if why == unwind.ReasonOutermost && !okD {
					full++ // both stop at the outermost frame
				}
				break
			}
			fSP, _ := f.Reg(arch.AMD64.SP())
			fFP, _ := f.Reg(arch.AMD64.FP()) // 0 when unknown
			if ra != f.PC || cfa != fSP || nfp != fFP {
				break
			}
			pc, sp, fp, top = ra, cfa, nfp, false
		}
		s.steps = k
		frames += k
		// Walk, which is timed, gives the frames Step gave.
		if n, _ := u.Walk(unwind.Topmost(arch.AMD64, s.pc, s.sp, s.fp, 0), pcs[:k]); n != k || !slices.Equal(pcs[:k], seen[:k]) {
			b.Fatalf("sample %d: Walk = %#x, Step by Step %#x", i, pcs[:n], seen[:k])
		}
		// Keep the stack up to the last CFA: the reads of the agreed
		// steps are all below it, and a profiler reads no more.
		s.mem.b = bytes.Clone(s.mem.b[:min(uint64(len(s.mem.b)), regSP(&f)-s.sp)])
		stackBytes += len(s.mem.b)
	}
	if frames < 1000 {
		b.Fatalf("only %d steps where both sides agree", frames)
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bestS, bestD, bestP := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	var sink uint64
	for b.Loop() {
		t0 := threadCPU()
		for i := range samples {
			s := &samples[i]
			u.Mem = s.mem
			n, _ := u.Walk(unwind.Topmost(arch.AMD64, s.pc, s.sp, s.fp, 0), pcs[:s.steps])
			sink += pcs[max(n, 1)-1]
		}
		t1 := threadCPU()
		for i := range samples {
			s := &samples[i]
			n := dwarfWalk(space, ds, s, s.steps, pcs)
			sink += pcs[max(n, 1)-1]
		}
		t2 := threadCPU()
		for i := range samples {
			s := &samples[i]
			n := dwarfWalk(space, dps, s, s.steps, pcs)
			sink += pcs[max(n, 1)-1]
		}
		t3 := threadCPU()
		bestS, bestD, bestP = min(bestS, t1-t0), min(bestD, t2-t1), min(bestP, t3-t2)
	}
	_ = sink
	n := float64(frames)
	reportSides(b, bestS, bestD, bestP, n)
	b.ReportMetric(float64(len(samples)), "stacks")
	b.ReportMetric(n/float64(len(samples)), "steps/stack")
	b.ReportMetric(float64(stackBytes)/float64(len(samples)), "stack-bytes/stack")
	b.ReportMetric(float64(full)/float64(len(samples)), "outermost-share")
	s := &samples[0]
	u.Mem = s.mem
	b.ReportMetric(testing.AllocsPerRun(100, func() {
		u.Walk(unwind.Topmost(arch.AMD64, s.pc, s.sp, s.fp, 0), pcs[:s.steps])
	})/float64(max(s.steps, 1)), "sframe-allocs/step")
}

// regSP returns the SP of f (every frame knows it).
func regSP(f *unwind.Frame) uint64 {
	v, _ := f.Reg(arch.AMD64.SP())
	return v
}
