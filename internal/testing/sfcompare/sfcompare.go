// Package sfcompare compares two .sframe sections of the same program —
// GNU's (built with as --gsframe) and ours (converted from a build
// without) — at every PC of every function GNU describes.
package sfcompare

import (
	"debug/elf"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Counts is the outcome of a comparison.
type Counts struct {
	Funcs     int      // functions GNU describes
	PCs       int      // PCs compared
	Differ    int      // PCs where the rules differ
	Missing   int      // GNU functions ours lacks
	GNUPLTGot int      // PCs in x86-64 .plt.got where GNU ld says sp+16 and ours sp+8
	Extra     int      // functions only ours describes
	Examples  []string // a few differences
}

// Add accumulates o.
func (c *Counts) Add(o *Counts) {
	c.Funcs += o.Funcs
	c.PCs += o.PCs
	c.Differ += o.Differ
	c.Missing += o.Missing
	c.GNUPLTGot += o.GNUPLTGot
	c.Extra += o.Extra
	c.Examples = append(c.Examples, o.Examples...)
}

func (c *Counts) String() string {
	return fmt.Sprintf("%d GNU functions, %d PCs compared, %d differ, %d GNU functions missing from ours, %d PCs in .plt.got where GNU ld is wrong, %d functions only ours describes",
		c.Funcs, c.PCs, c.Differ, c.Missing, c.GNUPLTGot, c.Extra)
}

// Load decodes a file's .sframe: every function, and the table its
// lookups use.
func Load(file string) (*sfsection.Section, *sframe.Table, *elf.File, error) {
	f, err := elfread.Open(file)
	if err != nil {
		return nil, nil, nil, err
	}
	s, err := f.SFrame()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	sec, err := sfsection.Decode(s.Data, s.Addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %v", file, err)
	}
	t, err := sframe.Open(s.Data, s.Addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %v", file, err)
	}
	return sec, t, f.ELF, nil
}

// Row returns the rule at pc and whether a row gives it: not when no FDE
// covers pc or the one that does has no row there (or no rows at all).
func Row(t *sframe.Table, pc uint64) (sframe.Rule, bool) {
	r, err := t.Lookup(pc)
	return r, err == nil && !r.NoFREs
}

// Same says whether two rules mean the same (an outermost frame carries
// nothing else).
func Same(a, b sframe.Rule) bool {
	if a.RAUndefined || b.RAUndefined {
		return a.RAUndefined == b.RAUndefined
	}
	return a.CFA == b.CFA && a.RA == b.RA && a.FP == b.FP && a.MangledRA == b.MangledRA && a.Flex == b.Flex && a.Signal == b.Signal
}

// Files compares ours against GNU's section at every PC of every function
// GNU describes. The builds differ only by .sframe, but an extra program
// header may shift the code (AArch64): a GNU address is mapped to ours
// through the executable section holding it (same name, same size).
func Files(gnuFile, oursFile string) (*Counts, error) {
	gnu, gnuT, gef, err := Load(gnuFile)
	if err != nil {
		return nil, err
	}
	ours, oursT, oef, err := Load(oursFile)
	if err != nil {
		return nil, err
	}
	var derr error
	delta := func(pc uint64) (int64, bool) {
		for _, gs := range gef.Sections {
			if gs.Flags&elf.SHF_EXECINSTR == 0 || pc < gs.Addr || pc >= gs.Addr+gs.Size {
				continue
			}
			os := oef.Section(gs.Name)
			if os == nil || os.Size != gs.Size {
				derr = fmt.Errorf("section %s differs between the two builds", gs.Name)
				return 0, false
			}
			return int64(os.Addr) - int64(gs.Addr), true
		}
		derr = fmt.Errorf("GNU function at %#x is in no executable section", pc)
		return 0, false
	}
	var gotLo, gotHi uint64
	if s := oef.Section(".plt.got"); s != nil && oef.Machine == elf.EM_X86_64 {
		gotLo, gotHi = s.Addr, s.Addr+s.Size
	}
	c := &Counts{}
	starts := map[uint64]bool{}
	for i := range gnu.FDEs {
		d := &gnu.FDEs[i]
		c.Funcs++
		dl, ok := delta(d.Start)
		if !ok {
			return nil, derr
		}
		starts[uint64(int64(d.Start)+dl)] = true
		if _, ok := Row(oursT, uint64(int64(d.Start)+dl)); !ok && len(d.FREs) > 0 {
			c.Missing++
			c.Examples = append(c.Examples, fmt.Sprintf("GNU function at %#x missing", d.Start))
			continue
		}
		for pc := d.Start; pc < d.Start+uint64(d.Size); pc++ {
			g, gok := Row(gnuT, pc)
			opc := uint64(int64(pc) + dl)
			o, ook := Row(oursT, opc)
			c.PCs++
			if !gok && !ook {
				continue
			}
			if opc >= gotLo && opc < gotHi && gok && ook && g.CFA.Offset == 16 && o.CFA.Offset == 8 {
				c.GNUPLTGot++ // ld's .plt.got bug: entered by call, nothing pushed
				continue
			}
			if gok != ook || !Same(g, o) {
				c.Differ++
				if len(c.Examples) < 5 {
					c.Examples = append(c.Examples, fmt.Sprintf("pc %#x: GNU %+v / ours %+v", pc, g, o))
				}
			}
		}
	}
	for i := range ours.FDEs {
		if !starts[ours.FDEs[i].Start] {
			c.Extra++
		}
	}
	sort.Strings(c.Examples)
	return c, nil
}
