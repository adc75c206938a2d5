package trace

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// WriteFolded writes one line per distinct stack, root first, frames
// separated by ';', then a space and the sample count: the input of
// flamegraph.pl and most flame-graph viewers.
func (c *Collector) WriteFolded(w io.Writer) error {
	bw := bufio.NewWriter(w)
	lines := make([]string, 0, len(c.Stacks))
	counts := map[string]int{}
	for _, s := range c.Stacks {
		var b strings.Builder
		for i := len(s.Locs) - 1; i >= 0; i-- {
			name := c.Locs[s.Locs[i]].Func
			// ';' separates frames and the last space the count.
			name = strings.NewReplacer(";", ":", " ", "_", "\n", "_").Replace(name)
			b.WriteString(name)
			if i > 0 {
				b.WriteByte(';')
			}
		}
		k := b.String()
		if _, ok := counts[k]; !ok {
			lines = append(lines, k)
		}
		counts[k] += s.Count
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintf(bw, "%s %d\n", l, counts[l])
	}
	return bw.Flush()
}

// Profile builds a pprof profile: one sample per distinct stack, with the
// sample count and the CPU time it stands for at freq samples a second;
// locations carry their function names and mappings their files and
// build IDs.
func (c *Collector) Profile(freq int, start time.Time, dur time.Duration) *profile.Profile {
	period := int64(time.Second) / int64(freq)
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "samples", Unit: "count"},
			{Type: "cpu", Unit: "nanoseconds"},
		},
		DefaultSampleType: "cpu",
		PeriodType:        &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:            period,
		TimeNanos:         start.UnixNano(),
		DurationNanos:     dur.Nanoseconds(),
	}
	// Rereading the maps makes new execMaps for the same mappings: one
	// profile mapping per range, offset and file.
	type mapKey struct {
		lo, hi, off uint64
		path        string
	}
	maps := map[mapKey]*profile.Mapping{}
	mapping := func(m *execMap) *profile.Mapping {
		if m == nil {
			return nil
		}
		k := mapKey{m.Lo, m.Hi, m.Offset, m.Path}
		if pm, ok := maps[k]; ok {
			return pm
		}
		pm := &profile.Mapping{
			ID: uint64(len(p.Mapping) + 1), Start: m.Lo, Limit: m.Hi, Offset: m.Offset,
			File: m.Path, HasFunctions: m.obj != nil,
		}
		if m.obj != nil {
			pm.File, pm.BuildID = m.obj.Path, m.obj.BuildID
		}
		p.Mapping = append(p.Mapping, pm)
		maps[k] = pm
		return pm
	}
	funcs := map[string]*profile.Function{}
	function := func(name, file string) *profile.Function {
		k := name + "\x00" + file
		if f, ok := funcs[k]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name}
		p.Function = append(p.Function, f)
		funcs[k] = f
		return f
	}
	locs := make([]*profile.Location, len(c.Locs))
	for i := range c.Locs {
		l := &c.Locs[i]
		pm := mapping(l.Map)
		file := ""
		if pm != nil {
			file = pm.File
		}
		locs[i] = &profile.Location{
			ID: uint64(i + 1), Mapping: pm, Address: l.Addr,
			Line: []profile.Line{{Function: function(l.Func, file)}},
		}
	}
	p.Location = locs
	// pprof takes the first mapping for the main binary: order them by
	// address, which puts the executable (PIE or not) before the libraries
	// and the vDSO, as the kernel maps them.
	sort.Slice(p.Mapping, func(i, j int) bool { return p.Mapping[i].Start < p.Mapping[j].Start })
	for i, m := range p.Mapping {
		m.ID = uint64(i + 1)
	}
	for _, s := range c.Stacks {
		ps := &profile.Sample{Value: []int64{int64(s.Count), int64(s.Count) * period}}
		for _, i := range s.Locs {
			ps.Location = append(ps.Location, locs[i])
		}
		p.Sample = append(p.Sample, ps)
	}
	return p
}

// WriteSummary prints what a run collected: samples, the share walked to
// the outermost frame, where and why the other walks stopped, the cost per
// sample and, with the DWARF check, the frame-by-frame agreement.
func (r *Result) WriteSummary(w io.Writer) {
	c := r.Collector
	threads := "threads"
	if r.Threads == 1 {
		threads = "thread"
	}
	fmt.Fprintf(w, "process %d: %d samples from %d %s in %.2fs", r.PID, c.Samples, r.Threads, threads, r.Elapsed.Seconds())
	if r.Exit != "" {
		fmt.Fprintf(w, "; %s", r.Exit)
	}
	fmt.Fprintf(w, " (%s)\n", r.StopReason)
	c.writeConversions(w)
	if c.Samples == 0 {
		return
	}
	pct := func(n, d int) float64 {
		if d == 0 {
			return 0
		}
		return 100 * float64(n) / float64(d)
	}
	fmt.Fprintf(w, "walked to the outermost frame: %d (%.2f%%), %.1f frames per sample\n",
		c.Outermost, pct(c.Outermost, c.Samples), float64(c.Frames)/float64(c.Samples))
	for _, kv := range sortedCounts(c.LastFunc) {
		fmt.Fprintf(w, "  ending in %-30s %d (%.2f%%)\n", kv.k, kv.n, pct(kv.n, c.Samples))
	}
	if len(c.Stops) > 0 {
		fmt.Fprintf(w, "walks stopped early: %d (%.2f%%)\n", c.Samples-c.Outermost, pct(c.Samples-c.Outermost, c.Samples))
		stops := make([]stopKey, 0, len(c.Stops))
		for k := range c.Stops {
			stops = append(stops, k)
		}
		sort.Slice(stops, func(i, j int) bool {
			if c.Stops[stops[i]] != c.Stops[stops[j]] {
				return c.Stops[stops[i]] > c.Stops[stops[j]]
			}
			return stops[i].Reason+stops[i].Where < stops[j].Reason+stops[j].Where
		})
		for i, k := range stops {
			if i == 20 {
				fmt.Fprintf(w, "  ... %d more places\n", len(stops)-i)
				break
			}
			fmt.Fprintf(w, "  %6d  %s: %s\n", c.Stops[k], k.Reason, k.Where)
		}
	}
	if r.Lost > 0 || r.Late > 0 {
		fmt.Fprintf(w, "interrupts answered by an exit: %d; ticks with a thread not yet stopped: %d\n", r.Lost, r.Late)
	}
	walk := c.WalkCPU - c.RefreshTime
	sf := c.UnwindTime - c.CheckTime
	check := ""
	if c.chk != nil {
		check = fmt.Sprintf(", DWARF check %.1f µs more", float64(c.CheckTime.Nanoseconds())/1e3/float64(c.Samples))
	}
	fmt.Fprintf(w, "cost per sample: SFrame walk median %.1f µs, mean %.1f µs (mean %.1f µs in %.2f memory reads, %.2f µs a frame in the rest%s); thread stopped for %.1f µs of tracer CPU (registers, walk, resume; %.1f µs wall clock); %.1f µs tracer CPU in all (maps read %d times, %.0f ms CPU reading maps and objects)\n",
		float64(c.WalkHist.Quantile(0.5).Nanoseconds())/1e3,
		float64(sf.Nanoseconds())/1e3/float64(c.Samples),
		float64(c.mem.ReadTime.Nanoseconds())/1e3/float64(c.Samples),
		float64(c.MemReads)/float64(c.Samples),
		float64((sf-c.mem.ReadTime).Nanoseconds())/1e3/float64(c.Frames), check,
		float64(walk.Nanoseconds())/1e3/float64(c.Samples),
		float64((c.WalkTime-c.RefreshTime).Nanoseconds())/1e3/float64(c.Samples),
		float64(r.TracerCPU.Nanoseconds())/1e3/float64(c.Samples),
		c.MapsReads, float64(c.RefreshTime.Nanoseconds())/1e6)
	if c.chk == nil {
		return
	}
	st := &c.CheckStats
	cmp := st.Agree + st.Disagree
	fmt.Fprintf(w, "DWARF check: %d of %d frames agree (%.3f%%), %d disagree", st.Agree, cmp, pct(st.Agree, cmp), st.Disagree)
	fmt.Fprintf(w, "; not compared: %d in objects without .sframe, %d where neither could step, %d where SFrame stepped and DWARF's rule is not evaluated\n", st.NoSFrame, st.NeitherStepped, st.SFrameOnly)
	if st.GoOutermost+st.GoNoFP > 0 {
		fmt.Fprintf(w, "  of those agreeing, in Go functions (Go's linker's .debug_frame): %d ended where Go's runtime ends a walk, which .debug_frame does not mark; %d without the frame pointer compared, for which it has no rule\n", st.GoOutermost, st.GoNoFP)
	}
	for _, kv := range sortedCounts(st.DWARFFail) {
		fmt.Fprintf(w, "  DWARF not evaluated: %-28s %d\n", kv.k, kv.n)
	}
	type group struct {
		obj, fn string
		pc      uint64
		n       int
		ex      disagreement
	}
	groups := map[string]*group{}
	var list []*group
	for d, n := range c.Disagree {
		k := fmt.Sprintf("%s %x", d.Obj, d.PC)
		g := groups[k]
		if g == nil {
			g = &group{obj: d.Obj, fn: d.Func, pc: d.PC, ex: d}
			groups[k] = g
			list = append(list, g)
		}
		g.n += n
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		if list[i].obj != list[j].obj {
			return list[i].obj < list[j].obj
		}
		return list[i].pc < list[j].pc
	})
	for i, g := range list {
		if i == 50 {
			fmt.Fprintf(w, "  ... %d more PCs\n", len(list)-i)
			break
		}
		fmt.Fprintf(w, "  disagree %d× at %s %#x (%s): SFrame %s; DWARF %s\n", g.n, g.obj, g.pc, g.fn, g.ex.SFrame, g.ex.DWARF)
	}
}

// writeConversions lists the objects without .sframe that were given
// SFrame converted from their CFI in memory, with what each cost, and the
// total.
func (c *Collector) writeConversions(w io.Writer) {
	if len(c.Conversions) == 0 {
		return
	}
	var n, bytes, attach int
	var wall, cpu, attachWall time.Duration
	for _, cv := range c.Conversions {
		wall += cv.Time
		cpu += cv.CPU
		if cv.Attach {
			attach++
			attachWall += cv.Time
		}
		if cv.Err == "" {
			n++
			bytes += cv.Bytes
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	objects := "objects"
	if n == 1 {
		objects = "object"
	}
	fmt.Fprintf(w, "SFrame built in memory from CFI for %d %s without .sframe", n, objects)
	if failed := len(c.Conversions) - n; failed > 0 {
		fmt.Fprintf(w, " (%d more failed)", failed)
	}
	fmt.Fprintf(w, ": %d bytes in %.1f ms (%.1f ms CPU)", bytes, ms(wall), ms(cpu))
	if attach < len(c.Conversions) {
		fmt.Fprintf(w, "; %d at attach in %.1f ms, %d when first seen later", attach, ms(attachWall), len(c.Conversions)-attach)
	}
	fmt.Fprintln(w)
	for _, cv := range c.Conversions {
		when := "at attach"
		if !cv.Attach {
			when = "when first seen"
		}
		if cv.Err != "" {
			fmt.Fprintf(w, "  %-50s failed %s after %.1f ms: %s\n", cv.Path, when, ms(cv.Time), cv.Err)
			continue
		}
		fmt.Fprintf(w, "  %-50s %9d bytes %8.1f ms (%.1f ms CPU) %s\n", cv.Path, cv.Bytes, ms(cv.Time), ms(cv.CPU), when)
	}
}

type countKV struct {
	k string
	n int
}

func sortedCounts(m map[string]int) []countKV {
	out := make([]countKV, 0, len(m))
	for k, n := range m {
		out = append(out, countKV{k, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].n != out[j].n {
			return out[i].n > out[j].n
		}
		return out[i].k < out[j].k
	})
	return out
}
