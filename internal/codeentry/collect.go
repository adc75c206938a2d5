package codeentry

import (
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
)

// cand is a candidate entry: its strongest source so far, its end when
// a symbol gives it, and whether a call or pointer corroborates it.
type cand struct {
	src       codeflow.Source
	end       uint64
	called    bool  // a direct call or a pointer reaches it
	symbolled bool  // a symbol starts there
	srcs      uint8 // a bit (1<<Source) for each source that gave it
}

// collector gathers the candidates of every source.
type collector struct {
	img   *image
	notes *Notes
	data  []Span
	cands map[uint64]*cand
	// taken are the candidates refEntries gave (for the tests: the
	// relocations' pointers share their Source).
	taken map[uint64]bool
}

func newCollector(img *image, notes *Notes) *collector {
	return &collector{img: img, notes: notes, cands: map[uint64]*cand{}}
}

// add records addr as an entry from src; end is its end if known (0
// otherwise). Candidates outside the text, in a PLT or in data are left
// out here; the checks that need every source are in finish.
func (c *collector) add(addr, end uint64, src codeflow.Source) {
	c.notes.Found[src]++
	switch {
	case c.img.textAt(addr) < 0:
		c.notes.Rejected["outside-text"]++
		return
	case c.img.inPLT(addr):
		c.notes.Rejected[RejectPLT]++
		return
	case inSpans(c.data, addr):
		c.notes.Rejected[RejectData]++
		return
	}
	k := c.cands[addr]
	if k == nil {
		k = &cand{src: src}
		c.cands[addr] = k
	}
	k.srcs |= 1 << src
	if src < k.src {
		k.src = src
	}
	if end > addr && (k.end == 0 || src <= codeflow.FromDebugFile) {
		k.end = end
	}
	switch src {
	case codeflow.FromSymbol, codeflow.FromDebugFile:
		k.symbolled = true
	case codeflow.FromCall, codeflow.FromPointer:
		k.called = true
	}
}

// finish checks the candidates against each other and gives the
// entries, sorted, with their ends.
func (c *collector) finish(syms *symbols, sw *sweepResult, described []Span) []codeflow.Entry {
	var out []codeflow.Entry
	for addr, k := range c.cands {
		if syms.cold[addr] && !k.symbolled {
			// Only a cold symbol starts here: a weaker source hit a
			// cold part.
			c.notes.Rejected[RejectCold]++
			continue
		}
		if !k.symbolled {
			if syms.inside(addr) {
				c.notes.Rejected[RejectInside]++
				continue
			}
			weak := k.src == codeflow.FromGap || k.src == codeflow.FromPadding
			if weak && !k.called && sw.jumpedTo(addr) {
				c.notes.Rejected[RejectJumpTarget]++
				continue
			}
		}
		out = append(out, codeflow.Entry{Addr: addr, End: k.end, Source: k.src})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	c.setEnds(out, described)
	return out
}

// setEnds gives each entry without a symbol's size an end: the next
// entry, the next described range or the end of its text range,
// whichever comes first.
func (c *collector) setEnds(out []codeflow.Entry, described []Span) {
	for i := range out {
		e := &out[i]
		t := c.img.textAt(e.Addr)
		limit := c.img.text[t].end()
		if e.End > e.Addr && e.End <= limit {
			continue
		}
		end := limit
		if i+1 < len(out) && out[i+1].Addr < end {
			end = out[i+1].Addr
		}
		j := sort.Search(len(described), func(j int) bool { return described[j].Hi > e.Addr })
		if j < len(described) && described[j].Lo > e.Addr && described[j].Lo < end {
			end = described[j].Lo
		}
		e.End = end
	}
}
