package translate

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/sfcompare"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// The agreement test translates the CFI of every committed GNU fixture
// (testdata/sframe: built by GNU as/ld --gsframe) and compares, at every PC
// of every function GNU's .sframe describes, GNU's rule with ours (our
// functions encoded with sframe.Encode and decoded again): CFA, RA, FP,
// mangled RA, RA undefined, flex, signal, PAuth key. Functions we describe
// that GNU does not, and functions GNU describes that we skip, are counted
// too. Every difference must appear, with its exact count, in
// agreeExceptions below.

// diffClass names one kind of disagreement.
type diffClass string

const (
	diffMissing   diffClass = "missing"    // GNU has a rule at the PC, we have none
	diffCFA       diffClass = "cfa"        // CFA rule differs
	diffRA        diffClass = "ra"         // RA rule differs
	diffFP        diffClass = "fp"         // FP rule differs
	diffMangled   diffClass = "mangled-ra" // mangled-RA bit differs
	diffRAUndef   diffClass = "ra-undefined"
	diffFlex      diffClass = "flex"
	diffSignal    diffClass = "signal"
	diffKey       diffClass = "pauth-key"
	diffOursOnly  diffClass = "ours-only" // a function we describe and GNU does not (counted per function)
	diffNotInGNUs diffClass = "gnu-skips" // a CFI function neither GNU nor we describe (per function; agreement, not a difference)
	diffWeSkip    diffClass = "we-skip"   // a function GNU describes whose CFI we skip (per function)
	diffV1Mask    diffClass = "v1-pcmask" // a PC of a V1 PCMASK FDE, which has no well-defined meaning
	diffGNUNone   diffClass = "gnu-none"  // a PC inside a GNU FDE for which GNU has no FRE
)

// exception is one documented disagreement with GNU: in fixture, count
// PCs (or functions, for the per-function classes) of class inside
// section.
type exception struct {
	fixture string
	section string
	class   diffClass
	count   int
	why     string
}

const (
	pltGotBug = "GNU ld 2.44-2.47.50 describes .plt.got entries with CFA=sp+16, but they are entered by a call and push nothing " +
		"(ld's own .eh_frame for .plt.got says rsp+8, and so do we)"
	aarch64PLT  = "GNU ld (2.44-2.47.50) writes no SFrame for the AArch64 .plt (PLT0 and the 16-byte entries); we describe it from its instructions"
	crtNoSFrame = "deregister_tm_clones, register_tm_clones, __do_global_dtors_aux, frame_dummy come from the system's crtbeginS.o, " +
		"assembled without --gsframe: GNU has no SFrame for them, we convert their .eh_frame"
	oldUndefRA = "GNU as 2.40/2.44 ignore .cfi_undefined rip/x30 in _start and describe it as an ordinary frame; binutils 2.45+ " +
		"(V2 and V3) and we write the outermost-frame FRE without data words (note: objdump 2.44 misreads that FRE as fp-1)"
	v1Mask    = "ld 2.40's V1 PCMASK FDE for the PLT entries has no repetition size and no well-defined lookup rule; counted, not compared"
	v1PltGot  = "ld 2.40 writes no SFrame for .plt.got; we describe it from its instructions"
	gasEscape = "fp_escape saves rbp with a raw .cfi_escape (DW_CFA_offset_extended_sf); GNU as does not interpret escapes and " +
		"drops the function, we execute the CFI and describe it (FP at CFA-16)"
	sigtrampExpr = "sigtramp_expr (glibc __restore_rt style: CFA = [rsp+160], rbp and rip behind DW_CFA_expression over the " +
		"ucontext, written with .cfi_escape) gets from GNU as 2.47.50 a signal FDE with no FREs (the V3 outermost-frame marker), " +
		"as gas does not interpret escapes; we execute the CFI and describe it with a flexible FDE (CFA and RA/FP reg-deref)"
	gas244RAReg = "ra_reg keeps the return address in r11 (.cfi_register rip, r11); GNU as 2.44 ignores that rule and writes RA at " +
		"CFA-8 at every PC (wrong while CFA=sp+0); SFrame V2 cannot say 'RA in r11', so we skip the function (ra-register)"
)

var agreeExceptions = []exception{
	{"v3-x86_64-lib-lazy.so", ".plt.got", diffCFA, 8, pltGotBug},
	{"v3-x86_64-lib-now.so", ".plt.got", diffCFA, 8, pltGotBug},
	{"v3-x86_64-lib-ibt.so", ".plt.got", diffCFA, 16, pltGotBug},
	{"v2-x86_64-lib-lazy.so", ".plt.got", diffCFA, 8, pltGotBug},
	{"v2-x86_64-lib-now.so", ".plt.got", diffCFA, 8, pltGotBug},
	{"v2-x86_64-lib-ibt.so", ".plt.got", diffCFA, 16, pltGotBug},

	{"v3-aarch64-exe", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v3-aarch64-lib.so", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v3-aarch64be-exe", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v3-aarch64be-lib.so", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v2-aarch64-exe", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v2-aarch64-lib.so", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v2-aarch64be-exe", ".plt", diffOursOnly, 2, aarch64PLT},
	{"v2-aarch64be-lib.so", ".plt", diffOursOnly, 2, aarch64PLT},

	{"v3-aarch64-lib.so", ".text", diffOursOnly, 4, crtNoSFrame},
	{"v2-aarch64-lib.so", ".text", diffOursOnly, 4, crtNoSFrame},

	{"v1-x86_64-start.o", ".text", diffRAUndef, 16, oldUndefRA},
	{"v2-x86_64-start.o", ".text", diffRAUndef, 16, oldUndefRA},
	{"v2-x86_64-exe", ".text", diffRAUndef, 16, oldUndefRA},
	{"v2-aarch64-start.o", ".text", diffRAUndef, 16, oldUndefRA},
	{"v2-aarch64-exe", ".text", diffRAUndef, 16, oldUndefRA},
	{"v2-aarch64be-exe", ".text", diffRAUndef, 16, oldUndefRA},

	{"v1-x86_64-lib-lazy.so", ".plt", diffV1Mask, 48, v1Mask},
	{"v1-x86_64-lib-lazy.so", ".plt.got", diffOursOnly, 1, v1PltGot},

	{"v3-x86_64-start.o", ".text", diffGNUNone, 9, sigtrampExpr},
	{"v3-x86_64-exe", ".text", diffGNUNone, 9, sigtrampExpr},

	{"v3-x86_64-flex.o", ".text", diffOursOnly, 1, gasEscape},
	{"v2-x86_64-flex.o", ".text", diffOursOnly, 1, gasEscape},
	{"v2-x86_64-flex.o", ".text", diffWeSkip, 1, gas244RAReg},
	{"v2-x86_64-flex.o", ".text", diffMissing, 5, gas244RAReg},
}

// fixtureVersion is the SFrame version we write for a fixture: what its
// GNU as wrote (V1 fixtures are compared with V2 output: same rules).
func fixtureVersion(name string) uint8 {
	if strings.HasPrefix(name, "v3-") {
		return sframe.Version3
	}
	return sframe.Version2
}

type agreeStats struct {
	funcs, pcs int
	diffs      map[[2]string]int // {section, class} → count
	examples   []string
	summary    string
}

func (s *agreeStats) add(section string, c diffClass, example string) {
	s.diffs[[2]string{section, string(c)}]++
	if len(s.examples) < 8 && example != "" {
		s.examples = append(s.examples, example)
	}
}

func TestAgreeWithGNU(t *testing.T) {
	paths, err := filepath.Glob("../testdata/sframe/v*-*")
	if err != nil {
		t.Fatal(err)
	}
	var total agreeStats
	total.diffs = map[[2]string]int{}
	seen := map[string]bool{}
	n := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if strings.HasSuffix(name, ".objdump") {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			st := agree(t, p)
			if st == nil {
				return
			}
			var keys []string
			for k, c := range st.diffs {
				keys = append(keys, fmt.Sprintf("%s %s=%d", k[0], k[1], c))
			}
			sort.Strings(keys)
			t.Logf("%d functions, %d PCs compared; differences: %v; %s", st.funcs, st.pcs, keys, st.summary)
			total.funcs += st.funcs
			total.pcs += st.pcs
			for k, c := range st.diffs {
				total.diffs[k] += c
			}
			// Compare with the exceptions, exactly.
			want := map[[2]string]int{}
			for _, e := range agreeExceptions {
				if e.fixture == name {
					want[[2]string{e.section, string(e.class)}] = e.count
					seen[name+e.section+string(e.class)] = true
				}
			}
			for k, c := range st.diffs {
				if diffClass(k[1]) == diffNotInGNUs {
					continue
				}
				if want[k] != c {
					t.Errorf("%s in %s: %d differences, %d documented", k[1], k[0], c, want[k])
				}
			}
			for k, c := range want {
				if st.diffs[k] == 0 {
					t.Errorf("documented exception %s in %s (%d) did not occur", k[1], k[0], c)
				}
			}
			if t.Failed() {
				for _, e := range st.examples {
					t.Log(e)
				}
			}
		})
	}
	if n < 40 {
		t.Errorf("only %d fixtures found", n)
	}
	for _, e := range agreeExceptions {
		if !seen[e.fixture+e.section+string(e.class)] {
			t.Errorf("exception for %s: fixture not found", e.fixture)
		}
	}
	t.Logf("all fixtures: %d functions, %d PCs compared; differences %v", total.funcs, total.pcs, total.diffs)
}

// agree compares one fixture.
func agree(t *testing.T, path string) *agreeStats {
	name := filepath.Base(path)
	f, err := elfread.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ef := f.ELF
	raw, err := f.SFrame()
	if err != nil {
		t.Fatalf("GNU .sframe: %v", err)
	}
	gnu, err := sfsection.Decode(raw.Data, raw.Addr)
	if err != nil {
		t.Fatalf("GNU .sframe: %v", err)
	}
	gnuT, err := sframe.Open(raw.Data, raw.Addr)
	if err != nil {
		t.Fatalf("GNU .sframe: %v", err)
	}
	loadedTables, loadedErrs := alltables.Execute(openCFI(t, f))
	if len(loadedErrs) > 0 {
		t.Errorf("CFI errors: %v", loadedErrs)
	}
	version := fixtureVersion(name)
	st := &agreeStats{diffs: map[[2]string]int{}}

	// Group GNU's FDEs and our tables by the section they describe:
	// linked files have one address space (group 0); in objects every
	// text section starts at 0, so group by the relocation's target
	// section and put that section at sec<<32 for translation.
	gnuGroup := map[int][]int{}
	ourGroup := map[int][]*cfi.Table{}
	rel := ef.Type == elf.ET_REL
	secName := func(sec int, addr uint64) string {
		if rel {
			return ef.Sections[sec].Name
		}
		for _, s := range ef.Sections {
			if s.Flags&elf.SHF_EXECINSTR != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
				return s.Name
			}
		}
		return "?"
	}
	var base func(sec int) uint64
	if rel {
		gsec, err := sframeTargets(ef, gnu)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range gsec {
			gnuGroup[s.sec] = append(gnuGroup[s.sec], i)
			if version == sframe.Version3 && gnu.FDEs[i].Start != s.off {
				t.Errorf("GNU FDE %d: start %#x, relocation says %#x", i, gnu.FDEs[i].Start, s.off)
			}
			gnu.FDEs[i].Start = uint64(s.sec)<<32 + s.off
		}
		targets, err := relobj.FDETargets(ef)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range loadedTables {
			tg, ok := targets[tb.FDE.StartField]
			if !ok {
				t.Fatalf("FDE at .eh_frame offset %d: no relocation", tb.FDE.Offset)
			}
			ourGroup[tg.Section] = append(ourGroup[tg.Section], rebase(tb, uint64(tg.Section)<<32+tg.Offset))
		}
		base = func(sec int) uint64 { return uint64(sec) << 32 }
		gnu.Header.Flags &^= sframe.FlagFDESorted
	} else {
		for i := range gnu.FDEs {
			gnuGroup[0] = append(gnuGroup[0], i)
		}
		ourGroup[0] = loadedTables
		base = func(int) uint64 { return 0 }
	}
	var secs []int
	for s := range gnuGroup {
		secs = append(secs, s)
	}
	for s := range ourGroup {
		if _, ok := gnuGroup[s]; !ok {
			secs = append(secs, s)
		}
	}
	sort.Ints(secs)
	var sums []string
	for _, sec := range secs {
		in := Input{Machine: ef.Machine, Order: ef.ByteOrder}
		if !rel {
			in.PLTs = pltSections(t, ef)
		}
		res, err := translateAll(in, ourGroup[sec], Options{Version: version})
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, res.Summary())
		for _, d := range res.Diags {
			if !d.Skipped {
				// Remarks (a PLT whose CFI disagrees with its
				// instructions): GNU ld's .eh_frame for its PLTs agrees.
				st.add(secName(sec, d.Start-base(sec)), diffClass(d.Reason), fmt.Sprintf("%s: %v", name, d))
			}
		}
		b, err := sframe.Encode(res.Funcs, sframe.Options{Version: version, ABI: res.ABI, Order: ef.ByteOrder,
			Addr: base(sec), PCRel: true, Sort: true, CFAFixedFP: res.CFAFixedFP, CFAFixedRA: res.CFAFixedRA})
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		ours, err := sframe.Open(b, base(sec))
		if err != nil {
			t.Fatalf("decode our section: %v", err)
		}
		g := *gnu
		g.FDEs = nil
		for _, i := range gnuGroup[sec] {
			g.FDEs = append(g.FDEs, gnu.FDEs[i])
		}
		skipped := map[uint64]Reason{}
		for _, d := range res.Diags {
			if d.Skipped {
				skipped[d.Start-base(sec)] = d.Reason
			}
		}
		for i := range g.FDEs {
			d := &g.FDEs[i]
			st.funcs++
			dstart := d.Start - base(sec)
			if r, ok := skipped[dstart]; ok {
				st.add(secName(sec, dstart), diffWeSkip, fmt.Sprintf("GNU describes %s+%#x, we skip it (%s)", secName(sec, dstart), dstart, r))
			}
			if gnu.Header.Version == sframe.Version1 && d.PCType == sframe.PCMask {
				// V1 PCMASK FDEs (ld 2.40's PLT entries) have no
				// repetition size; the V1 spec's rule (PC & START >=
				// START) is not what their FREs mean. Counted, not
				// compared.
				for range d.Size {
					st.add(secName(sec, dstart), diffV1Mask, "")
				}
				continue
			}
			for off := uint64(0); off < uint64(d.Size); off++ {
				pc := d.Start + off
				gr, gok := rowIn(gnuT, &g, pc)
				if !gok {
					// GNU has no rule here (an FDE without FREs, or a PC
					// before its first FRE): counted, must be documented.
					st.add(secName(sec, pc-base(sec)), diffGNUNone, fmt.Sprintf("%s %#x: no GNU rule", name, pc-base(sec)))
					if or, ook := sfcompare.Row(ours, pc); d.Signal && (!ook || !or.Signal) {
						t.Errorf("%s %#x: GNU's signal FDE without FREs; ours %+v (found %v) is not a signal frame", name, pc-base(sec), or, ook)
					}
					continue
				}
				st.pcs++
				or, ook := sfcompare.Row(ours, pc)
				sn := secName(sec, pc-base(sec))
				ex := fmt.Sprintf("%s %s+%#x: GNU %+v, ours %+v", name, sn, pc-base(sec), gr, or)
				switch {
				case !ook:
					st.add(sn, diffMissing, ex)
				case gr.RAUndefined != or.RAUndefined:
					st.add(sn, diffRAUndef, ex)
				case gr.CFA != or.CFA:
					st.add(sn, diffCFA, ex)
				case gr.RA != or.RA:
					st.add(sn, diffRA, ex)
				case gr.FP != or.FP:
					st.add(sn, diffFP, ex)
				case gr.MangledRA != or.MangledRA:
					st.add(sn, diffMangled, ex)
				case gr.Flex != or.Flex:
					st.add(sn, diffFlex, ex)
				case gr.Signal != or.Signal:
					st.add(sn, diffSignal, ex)
				case gr.PauthKeyB != or.PauthKeyB:
					st.add(sn, diffKey, ex)
				}
			}
		}
		// Our functions GNU does not describe at all.
		for _, fn := range res.Funcs {
			start := fn.Start - base(sec)
			covered := false
			for i := range g.FDEs {
				d := &g.FDEs[i]
				if fn.Start < d.Start+uint64(d.Size) && d.Start < fn.Start+uint64(fn.Size) {
					covered = true
					break
				}
			}
			if !covered {
				sn := secName(sec, start)
				st.add(sn, diffOursOnly, fmt.Sprintf("%s %s+%#x size %d: ours only", name, sn, start, fn.Size))
			}
		}
		for _, d := range res.Diags {
			if !d.Skipped {
				continue
			}
			start := d.Start - base(sec)
			described := false
			for i := range g.FDEs {
				if g.FDEs[i].Start == d.Start {
					described = true
				}
			}
			if !described {
				st.add(secName(sec, start), diffNotInGNUs, "")
			}
		}
	}
	st.summary = strings.Join(sums, "; ")
	return st
}

// rebase moves a table to start at addr.
func rebase(t *cfi.Table, addr uint64) *cfi.Table {
	fde := *t.FDE
	fde.Start = addr
	rows := make([]cfi.Row, len(t.Rows))
	copy(rows, t.Rows)
	for i := range rows {
		rows[i].Loc = rows[i].Loc - t.FDE.Start + addr
	}
	return &cfi.Table{FDE: &fde, Rows: rows}
}

// sfTarget is where an object's .sframe FDE start relocation points.
type sfTarget struct {
	sec int
	off uint64 // symbol value + addend
}

// rowIn returns the rule at pc of the first function of s that covers
// it, from its last FRE starting at or before pc's offset in it, and
// false where there is none: a lookup in some of a section's FDEs (one
// text section's, in an object whose text sections all start at 0),
// interpreted by tb, the table of the whole section.
func rowIn(tb *sframe.Table, s *sfsection.Section, pc uint64) (sframe.Rule, bool) {
	for i := range s.FDEs {
		d := &s.FDEs[i]
		if pc-d.Start >= uint64(d.Size) {
			continue
		}
		j := d.FREAt(pc)
		if j < 0 {
			return sframe.Rule{}, false
		}
		return tb.Interpret(d, &d.FREs[j]), true
	}
	return sframe.Rule{}, false
}

// sframeTargets returns, for each FDE of an object's .sframe, the section
// and offset its start-address relocation points at. (The start fields
// themselves mean little in an object: V2 ones are relative to the .sframe
// section, which only the linker places.)
func sframeTargets(ef *elf.File, s *sfsection.Section) ([]sfTarget, error) {
	idx := -1
	for i, sec := range ef.Sections {
		if sec.Name == ".sframe" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("no .sframe")
	}
	var rela *elf.Section
	for _, sec := range ef.Sections {
		if sec.Type == elf.SHT_RELA && int(sec.Info) == idx {
			rela = sec
		}
	}
	if rela == nil {
		if len(s.FDEs) == 0 {
			return nil, nil
		}
		return nil, fmt.Errorf("no relocations for .sframe")
	}
	data, err := rela.Data()
	if err != nil {
		return nil, err
	}
	syms, err := ef.Symbols()
	if err != nil {
		return nil, err
	}
	fdeSize := 20 // V2
	switch s.Header.Version {
	case sframe.Version1:
		fdeSize = 17
	case sframe.Version3:
		fdeSize = 16
	}
	out := make([]sfTarget, len(s.FDEs))
	for i := range out {
		out[i].sec = -1
	}
	hdr := uint64(s.Header.Size())
	for off := 0; off+24 <= len(data); off += 24 {
		r := data[off : off+24]
		roff := ef.ByteOrder.Uint64(r)
		sym := ef.ByteOrder.Uint64(r[8:]) >> 32
		if roff < hdr || sym == 0 || int(sym) > len(syms) {
			continue
		}
		i := int(roff-hdr) / fdeSize
		if (roff-hdr)%uint64(fdeSize) != 0 || i >= len(out) {
			continue // not a start field
		}
		out[i] = sfTarget{int(syms[sym-1].Section), syms[sym-1].Value + ef.ByteOrder.Uint64(r[16:])}
	}
	for i, s := range out {
		if s.sec < 0 {
			return nil, fmt.Errorf(".sframe FDE %d: no start relocation", i)
		}
	}
	return out, nil
}

// pltSections returns the PLT sections of a linked file, as convert passes
// them.
func pltSections(t *testing.T, ef *elf.File) []PLT {
	var out []PLT
	for _, s := range ef.Sections {
		if (s.Name != ".plt" && s.Name != ".plt.sec" && s.Name != ".plt.got") || s.Type != elf.SHT_PROGBITS || s.Size == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, PLT{Name: s.Name, Addr: s.Addr, Data: data, EntSize: s.Entsize})
	}
	return out
}
