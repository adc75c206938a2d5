package codeentry

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The sweep of a large file (chromium: 236 MB of code) is split into
// parts swept on all CPUs, each from its first byte as if the bytes
// before did not decode. That is a guess: the one decode from the
// range's start may reach the part's first byte in the middle of an
// instruction, or in a padding run. So the parts are stitched in order:
// from where the decode before a part left off (its offset and state),
// it goes on one instruction at a time until it reaches an offset the
// part's own decode started at, in the same state; from there on both
// decodes are the same (each step depends on nothing else), and the
// part's findings before that offset are dropped for those of the
// stitching. x86-64 decodes fall into step within a few instructions;
// a part where they never do is swept again whole by the stitching. The
// result is the single decode's, bit for bit.

// partSize is the bytes of code one part holds (a multiple of 64, so
// that parts write disjoint words of the start bitmaps).
const partSize = 256 << 10

// maxSnaps is how many steps of a part's decode are remembered for the
// stitching to fall into step with; past them the stitching decodes the
// rest of the part itself.
const maxSnaps = 256

// part is the sweep of [lo, hi) of text range ri: from lo to the first
// step that starts at or past hi.
type part struct {
	ri, lo, hi int
	out        sweepOut
	end        int        // the offset its last step went to
	st         sweepState // the state there
	snaps      []snap
}

// snap is a part's decode before one of its first steps: the offset,
// the state, and how much it had found (the lengths of out's lists).
type snap struct {
	off int
	st  sweepState
	n   outLens
}

type outLens struct{ calls, jumps, refs, tables, data, pads, callNext int }

func (o *sweepOut) lens() outLens {
	return outLens{len(o.calls), len(o.jumps), len(o.refs), len(o.tables), len(o.data), len(o.pads), o.callNext}
}

// dropFirst drops what o found before it had found n.
func (o *sweepOut) dropFirst(n outLens) {
	o.calls, o.jumps, o.refs, o.tables = o.calls[n.calls:], o.jumps[n.jumps:], o.refs[n.refs:], o.tables[n.tables:]
	o.data, o.pads = o.data[n.data:], o.pads[n.pads:]
	o.callNext -= n.callNext
}

// sweepParts sweeps the ranges sweep allocated bitmaps for, in parts of
// size bytes (a multiple of 64) on all CPUs, then stitches each range's
// parts and adds what they found to sw. It counts the parts the
// stitching fell into step with after their first byte, and those it
// swept itself.
func (sw *sweepResult) sweepParts(data []Span, size int) (late, whole int) {
	var parts []part
	for i, r := range sw.img.text {
		if sw.starts[i] == nil {
			continue
		}
		for lo := 0; lo < len(r.data); lo += size {
			parts = append(parts, part{ri: i, lo: lo, hi: min(lo+size, len(r.data))})
		}
	}
	// Each part is stitched as soon as it and those before it are swept,
	// so that only the parts in flight hold their findings.
	done := make([]chan struct{}, len(parts))
	for k := range done {
		done[k] = make(chan struct{})
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(parts))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int(next.Add(1) - 1); k < len(parts); k = int(next.Add(1) - 1) {
				sw.sweepPart(&parts[k], data)
				close(done[k])
			}
		}()
	}
	var off int
	var st sweepState
	for k := range parts {
		<-done[k]
		p := &parts[k]
		if k == 0 || p.ri != parts[k-1].ri {
			// A range's first part starts where the range does, as the
			// one decode.
			sw.add(&p.out)
			off, st = p.end, p.st
		} else {
			l, w := sw.stitch(p, data, &off, &st)
			late, whole = late+l, whole+w
		}
		p.snaps = nil
	}
	wg.Wait()
	return late, whole
}

// sweepPart decodes p from its first byte, as if after bytes that do not
// decode, marking the instructions it starts in the bitmaps (its own
// words: parts start at multiples of 64).
func (sw *sweepResult) sweepPart(p *part, data []Span) {
	r := sw.img.text[p.ri]
	var st sweepState
	off := p.lo
	for off < p.hi {
		if len(p.snaps) < maxSnaps {
			p.snaps = append(p.snaps, snap{off, st, p.out.lens()})
		}
		at := off
		var start, stopped bool
		off, start, stopped = sw.step(r, data, off, &st, &p.out)
		sw.mark(p.ri, at, start, stopped)
	}
	p.end, p.st = off, st
}

func (sw *sweepResult) mark(ri, off int, start, stopped bool) {
	if start {
		sw.starts[ri][off/64] |= 1 << (off % 64)
	}
	if stopped {
		sw.stopped[ri][off/64] |= 1 << (off % 64)
	}
}

// stitch goes on with the one decode of p's range, at *off in state *st
// when the parts before p are stitched, into p (see above), adds what it
// found to sw and leaves *off and *st where the decode leaves p. late:
// it fell into step after p's first byte; whole: it never did.
func (sw *sweepResult) stitch(p *part, data []Span, off *int, st *sweepState) (late, whole int) {
	r := sw.img.text[p.ri]
	type mk struct {
		off           int
		start, stoppd bool
	}
	var fix sweepOut
	var marks []mk
	j := 0 // the first of p's snaps not behind *off
	for {
		for j < len(p.snaps) && p.snaps[j].off < *off {
			j++
		}
		if j < len(p.snaps) && p.snaps[j].off == *off && p.snaps[j].st == *st {
			// In step: p's findings from here on are the decode's.
			if *off > p.lo {
				late = 1
			}
			sw.clearBits(p.ri, p.lo, *off)
			p.out.dropFirst(p.snaps[j].n)
			*off, *st = p.end, p.st
			break
		}
		if *off >= p.hi {
			// Never in step: the stitching swept p itself.
			sw.clearBits(p.ri, p.lo, p.hi)
			p.out = sweepOut{}
			whole = 1
			break
		}
		at := *off
		var start, stopped bool
		*off, start, stopped = sw.step(r, data, *off, st, &fix)
		marks = append(marks, mk{at, start, stopped})
	}
	for _, m := range marks {
		sw.mark(p.ri, m.off, m.start, m.stoppd)
	}
	sw.add(&fix)
	sw.add(&p.out)
	return late, whole
}

// clearBits clears the bitmaps' bits of offsets [lo, hi) of range ri.
func (sw *sweepResult) clearBits(ri, lo, hi int) {
	for off := lo; off < hi; off++ {
		sw.starts[ri][off/64] &^= 1 << (off % 64)
		sw.stopped[ri][off/64] &^= 1 << (off % 64)
	}
}

// add adds what o found to sw, and frees o's lists.
func (sw *sweepResult) add(o *sweepOut) {
	for _, t := range o.calls {
		sw.calls[t] = true
	}
	for _, t := range o.jumps {
		sw.jumps[t] = true
	}
	for _, t := range o.refs {
		sw.refs[t] = true
	}
	for _, t := range o.tables {
		sw.tables[t] = true
	}
	sw.data = append(sw.data, o.data...)
	sw.pads = append(sw.pads, o.pads...)
	sw.callNext += o.callNext
	*o = sweepOut{}
}
