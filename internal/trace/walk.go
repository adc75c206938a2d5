package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// MaxDepth bounds the frames of one walk.
const MaxDepth = 256

// execMap is one executable mapping of the traced process and the object
// it maps (nil for anonymous memory, [vdso] and files that cannot be read).
type execMap struct {
	MapEntry
	obj    *Object
	bias   uint64
	errMsg string // why obj is nil, for file mappings
}

// Loc is one symbolized code address of the profile.
type Loc struct {
	Addr uint64 // looked-up address: the PC of a topmost frame, a return address minus one otherwise
	Map  *execMap
	Func string
}

// Stack is one distinct walked stack and how many samples had it.
type Stack struct {
	Locs  []int // indices into Collector.Locs, leaf first
	Count int
}

// stopKey says where and why walks stopped short of the outermost frame.
type stopKey struct {
	Reason string
	Where  string
}

// disagreement is one frame where SFrame and DWARF CFI differ.
type disagreement struct {
	Obj    string
	PC     uint64 // file address looked up
	Func   string
	SFrame string
	DWARF  string
}

// Collector turns register sets into walked, symbolized stacks and
// counts how the walks went.
type Collector struct {
	pid    int
	dwarf  bool
	mem    *pageMem
	space  unwind.Space
	maps   []*execMap // sorted by Lo
	objs   map[string]*Object
	objErr map[string]string
	lastRe time.Time
	u      *unwind.Unwinder
	chk    *checker

	Locs   []Loc
	locIdx map[uint64]int
	Stacks []*Stack
	stkIdx map[string]*Stack
	key    []byte
	frames []int

	Samples    int
	Frames     int
	Outermost  int
	LastFunc   map[string]int // function of the outermost frame of complete walks
	Stops      map[stopKey]int
	WalkTime   time.Duration // reading registers to resuming, summed (wall clock)
	WalkCPU    time.Duration // the same in the tracer thread's CPU time
	UnwindTime time.Duration // in the walks themselves (steps, memory reads, symbolizing new PCs), wall clock
	CheckTime  time.Duration // in DWARF steps (part of UnwindTime)
	WalkHist   durHist       // SFrame walk time per sample (without the DWARF check)
	MemReads   int
	MapsReads  int
	CheckStats CheckStats
	Disagree   map[disagreement]int
	// RefreshTime is the CPU time spent rereading the maps and opening
	// objects during samples (included in WalkCPU).
	RefreshTime time.Duration

	// Convert, when set, builds an SFrame section in memory for the
	// vDSO when it has none (no file holds it) and, with ConvertFiles,
	// for every ELF file mapped without .sframe, once per object, when
	// the maps show it first (at attach, or when a walk reaches code the
	// maps read before did not hold).
	Convert      Converter
	ConvertFiles bool
	// Conversions lists the objects Convert was run for, in that order.
	Conversions []*Conversion

	stopAddr uint64              // address where the last walk stopped
	unknown  map[uint64]struct{} // pages of code in no object after a fresh read of the maps
}

// maxUnknownPages bounds the pages of code remembered as in no object
// (JIT code, the vDSO).
const maxUnknownPages = 1 << 14

// CheckStats counts the frame-by-frame comparison with DWARF CFI.
type CheckStats struct {
	Agree, Disagree int
	SFrameOnly      int            // SFrame stepped, the DWARF rule is one the checker cannot evaluate
	NeitherStepped  int            // both stopped (not compared)
	NoSFrame        int            // in an object without .sframe (not compared)
	DWARFFail       map[string]int // why the DWARF side could not step
	// Of Agree, in Go functions whose FDE Go's linker wrote: frames
	// ended where the runtime's unwinder ends them (Go's .debug_frame
	// walks on), and frames whose frame pointer was not compared (it has
	// no rule for it).
	GoOutermost, GoNoFP int
}

// NewCollector prepares walks of process pid's stacks.
func NewCollector(pid int, dwarf bool) *Collector {
	c := &Collector{
		pid: pid, dwarf: dwarf,
		mem:      &pageMem{pid: pid},
		objs:     map[string]*Object{},
		objErr:   map[string]string{},
		locIdx:   map[uint64]int{},
		stkIdx:   map[string]*Stack{},
		LastFunc: map[string]int{},
		Stops:    map[stopKey]int{},
		Disagree: map[disagreement]int{},
		unknown:  map[uint64]struct{}{},
	}
	c.CheckStats.DWARFFail = map[string]int{}
	c.u = &unwind.Unwinder{Arch: arch.AMD64, Space: &c.space, Mem: c.mem}
	if dwarf {
		c.chk = &checker{mem: c.mem}
	}
	return c
}

// Refresh rereads /proc/PID/maps and rebuilds the address space, opening
// objects not seen before.
func (c *Collector) Refresh() error {
	c.lastRe = time.Now()
	c.MapsReads++
	name := fmt.Sprintf("/proc/%d/maps", c.pid)
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	ents, err := ParseMaps(f, name)
	f.Close()
	if err != nil {
		return err
	}
	c.maps = c.maps[:0]
	c.space = c.space[:0]
	for i := range ents {
		e := &ents[i]
		if !e.Exec() {
			continue
		}
		m := &execMap{MapEntry: *e}
		if e.Path == "[vdso]" {
			m.obj, m.errMsg = c.vdso(e)
		} else if e.File() {
			m.obj, m.errMsg = c.object(e)
		}
		if m.obj != nil {
			if b, ok := m.obj.Bias(e); ok {
				m.bias = b
			} else {
				m.obj, m.errMsg = nil, "no PT_LOAD maps this part of the file"
			}
		}
		c.maps = append(c.maps, m)
		if m.obj != nil && m.obj.Table != nil {
			c.space = append(c.space, unwind.Mapping{Lo: e.Lo, Hi: e.Hi, Bias: m.bias, Table: m.obj.Table, Obj: len(c.maps) - 1})
		}
	}
	return nil
}

// object returns the object a file mapping maps, opened once per file.
func (c *Collector) object(e *MapEntry) (*Object, string) {
	path := strings.TrimSuffix(e.Path, " (deleted)")
	key := fmt.Sprintf("%s %d %s", e.Dev, e.Inode, path)
	if o, ok := c.objs[key]; ok {
		return o, ""
	}
	if msg, ok := c.objErr[key]; ok {
		return nil, msg
	}
	var conv Converter
	if c.ConvertFiles {
		conv = c.Convert
	}
	// map_files names the mapped file even when its path was replaced or
	// deleted; it needs privileges the path does not.
	o, err := loadObject(fmt.Sprintf("/proc/%d/map_files/%x-%x", c.pid, e.Lo, e.Hi), path, c.dwarf, conv)
	if err != nil && path == e.Path {
		o, err = loadObject(path, path, c.dwarf, conv)
	}
	if err != nil {
		msg := err.Error()
		c.objErr[key] = msg
		return nil, msg
	}
	c.converted(o)
	c.objs[key] = o
	return o, ""
}

// converted records an object's conversion, if it had one: at attach
// when the maps are read for the first time.
func (c *Collector) converted(o *Object) {
	if o.Conversion != nil {
		o.Conversion.Attach = c.MapsReads <= 1
		c.Conversions = append(c.Conversions, o.Conversion)
	}
}

// maxVDSO bounds the vDSO image read from the process (a few pages).
const maxVDSO = 1 << 20

// vdso reads the kernel's vDSO image from the process's memory, once per
// address: it is an ELF file mapped whole, with the .sframe the kernel
// built it with, if any.
func (c *Collector) vdso(e *MapEntry) (*Object, string) {
	key := fmt.Sprintf("[vdso] %x-%x", e.Lo, e.Hi)
	if o, ok := c.objs[key]; ok {
		return o, ""
	}
	if msg, ok := c.objErr[key]; ok {
		return nil, msg
	}
	fail := func(msg string) (*Object, string) {
		c.objErr[key] = msg
		return nil, msg
	}
	if e.Hi-e.Lo > maxVDSO || e.Offset != 0 {
		return fail("unexpected vDSO mapping")
	}
	img := make([]byte, e.Hi-e.Lo)
	c.mem.Reset() // chunks start at the page read: none may start earlier
	for off := 0; off < len(img); off += chunkSize {
		p := c.mem.page(e.Lo + uint64(off))
		if p == nil {
			return fail("vDSO not readable")
		}
		copy(img[off:], p.bytes[:p.n])
	}
	c.mem.Reset()
	// No file to convert beforehand: without .sframe, its SFrame is
	// built from its CFI now (with or without ConvertFiles).
	o, err := readObject(bytes.NewReader(img), int64(len(img)), "[vdso]", c.dwarf, c.Convert)
	if err != nil {
		return fail(err.Error())
	}
	c.converted(o)
	c.objs[key] = o
	return o, ""
}

// findMap returns the executable mapping holding addr, or nil.
func (c *Collector) findMap(addr uint64) *execMap {
	i := sort.Search(len(c.maps), func(i int) bool { return c.maps[i].Hi > addr })
	if i < len(c.maps) && c.maps[i].Lo <= addr {
		return c.maps[i]
	}
	return nil
}

// Sample walks one stack from a topmost frame and records it. It returns
// the number of frames.
func (c *Collector) Sample(top unwind.Frame) int {
	c.mem.Reset()
	r0 := c.mem.Reads
	t0 := time.Now()
	check0, counts0 := c.CheckTime, c.CheckStats
	n, why, where := c.walk(top)
	d := time.Since(t0)
	c.UnwindTime += d
	c.WalkHist.Add(d - (c.CheckTime - check0))
	if why == unwind.ReasonNoObject {
		// Perhaps a library was loaded since the maps were read: read
		// them again, once per page of code found nowhere (or, past a
		// bound on those pages, once every 50 ms).
		page := c.stopAddr >> 12
		_, tried := c.unknown[page]
		if !tried && len(c.unknown) >= maxUnknownPages {
			tried = time.Since(c.lastRe) < 50*time.Millisecond
		}
		if !tried {
			t0 := threadCPU()
			err := c.Refresh()
			c.RefreshTime += threadCPU() - t0
			if err == nil {
				// The retry's comparisons replace the first walk's (the
				// maps of reasons keep the first walk's entries).
				c.CheckStats.Agree, c.CheckStats.Disagree = counts0.Agree, counts0.Disagree
				c.CheckStats.SFrameOnly, c.CheckStats.NeitherStepped, c.CheckStats.NoSFrame = counts0.SFrameOnly, counts0.NeitherStepped, counts0.NoSFrame
				t1 := time.Now()
				n, why, where = c.walk(top)
				c.UnwindTime += time.Since(t1)
			}
			if why == unwind.ReasonNoObject && len(c.unknown) < maxUnknownPages {
				c.unknown[c.stopAddr>>12] = struct{}{}
			}
		}
	}
	c.MemReads += c.mem.Reads - r0
	c.Samples++
	c.Frames += n
	if why == unwind.ReasonOutermost {
		c.Outermost++
		c.LastFunc[c.Locs[c.frames[n-1]].Func]++
	} else {
		c.Stops[stopKey{reasonText(why), where}]++
	}
	c.record()
	return n
}

func reasonText(r unwind.Reason) string {
	switch r {
	case unwind.ReasonNoObject:
		return "object without .sframe"
	case unwind.ReasonNoFDE:
		return "PC without FDE"
	case unwind.ReasonBadRead:
		return "failed read"
	case unwind.ReasonOK:
		return fmt.Sprintf("deeper than %d frames", MaxDepth)
	}
	return r.String()
}

// walk steps from top, filling c.frames with location indices, and says
// why and where it stopped.
func (c *Collector) walk(f unwind.Frame) (int, unwind.Reason, string) {
	c.frames = c.frames[:0]
	for len(c.frames) < MaxDepth {
		addr := f.PC
		if !f.Top {
			addr--
		}
		m := c.findMap(addr)
		li := c.loc(addr, m)
		c.frames = append(c.frames, li)
		prev := f
		why, _ := c.u.Step(&f)
		if c.chk != nil {
			// After the SFrame step, so that the stack reads are charged
			// to the walk, not to the check.
			t0 := time.Now()
			var dw dwarfAnswer
			if m != nil && m.obj != nil {
				dw = c.chk.step(m.obj, m.bias, &prev, addr)
			}
			c.compare(m, addr, &prev, why, &f, dw)
			c.CheckTime += time.Since(t0)
		}
		if why == unwind.ReasonOutermost {
			return len(c.frames), why, ""
		}
		if why != unwind.ReasonOK {
			c.stopAddr = addr
			return len(c.frames), why, c.where(why, m, addr)
		}
	}
	return len(c.frames), unwind.ReasonOK, ""
}

// where names the object (and function) where a walk stopped.
func (c *Collector) where(why unwind.Reason, m *execMap, addr uint64) string {
	switch {
	case m == nil:
		return fmt.Sprintf("PC %#x outside every executable mapping", addr)
	case m.obj == nil && m.Path == "":
		return "anonymous executable memory"
	case m.obj == nil && !m.File():
		return m.Path
	case m.obj == nil:
		return m.Path + ": " + m.errMsg
	case m.obj.Table == nil:
		return m.obj.Path + " (" + m.obj.NoSFrame + ")"
	}
	fn := m.obj.Symbolize(addr - m.bias)
	if why == unwind.ReasonBadRead {
		return fmt.Sprintf("%s in %s", fn, m.obj.Path)
	}
	return fmt.Sprintf("%s %#x (%s)", m.obj.Path, addr-m.bias, fn)
}

// loc returns the index of the location for addr, symbolizing it once.
func (c *Collector) loc(addr uint64, m *execMap) int {
	if i, ok := c.locIdx[addr]; ok && c.Locs[i].Map == m {
		return i
	}
	l := Loc{Addr: addr, Map: m}
	switch {
	case m == nil:
		l.Func = "[unknown]"
	case m.obj == nil:
		l.Func = "[" + strings.Trim(m.Path, "[]") + "]"
		if m.Path == "" {
			l.Func = "[anon]"
		}
	default:
		l.Func = m.obj.Symbolize(addr - m.bias)
		if l.Func == "" {
			l.Func = fmt.Sprintf("%s+%#x", baseName(m.obj.Path), addr-m.bias)
		}
	}
	c.Locs = append(c.Locs, l)
	c.locIdx[addr] = len(c.Locs) - 1
	return len(c.Locs) - 1
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// record counts the stack in c.frames.
func (c *Collector) record() {
	c.key = c.key[:0]
	for _, i := range c.frames {
		c.key = binary.AppendUvarint(c.key, uint64(i))
	}
	if s, ok := c.stkIdx[string(c.key)]; ok {
		s.Count++
		return
	}
	s := &Stack{Locs: append([]int(nil), c.frames...), Count: 1}
	c.stkIdx[string(c.key)] = s
	c.Stacks = append(c.Stacks, s)
}
