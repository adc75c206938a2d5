// Package verify checks a .sframe section against the call-frame
// information (CFI) of the same file: at every PC an SFrame function
// describes, the CFA, return-address and frame-pointer rules must mean what
// the CFI's rules mean.
//
// The comparison is independent of the translator: both sides are reduced
// to one small vocabulary of locations ("saved at CFA-8", "in register
// x30", "value is rsp+16", ...) and compared there, so a bug in translate
// shows up here instead of being repeated.
//
// Every function the CFI describes must also be in .sframe, unless
// translate would leave it out too: that decision, and its reason code,
// are translate's own (translate.Describer), not a second copy of it.
//
// CheckFile checks a file: the .sframe a loader reads against the CFI,
// and the layout of a linked file.
package verify

import (
	"cmp"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/cfiexpr"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Kind classifies a finding.
type Kind string

const (
	// Disagree: SFrame and CFI give different rules at a PC.
	Disagree Kind = "disagree"
	// NoCFI: SFrame describes a PC no CFI covers (for instance a PLT
	// described from its instructions); it cannot be checked here.
	NoCFI Kind = "no-cfi"
	// FromCode: SFrame describes a function no CFI covers, from its
	// machine code (cfi2sframe --from-code), and the rule at a PC does
	// not follow from the instructions and the rules before it
	// (codeflow.CheckRules): What names the rule part, SFrame the row,
	// CFI what the instructions give. A failure.
	FromCode Kind = "from-code"
	// Unproven: a rule of a function described from code that the
	// check cannot re-derive from the row before it (an SFrame row from
	// the frame pointer does not say where SP is, which the analysis
	// knew): not shown wrong, not a failure; counted
	// (Result.Unproven), the first few listed.
	Unproven Kind = "from-code-unproven"
	// Missing: CFI describes a function that .sframe does not, and
	// translate would have described it.
	Missing Kind = "missing"
	// Skipped: CFI describes a function that .sframe does not, and
	// translate skips it too (Finding.Reason says why): not a failure.
	Skipped Kind = "skipped"
	// SignalMark: a signal frame of the CFI (its CIE has the 'S'
	// augmentation) that .sframe describes by a V3 signal FDE saying RA
	// undefined, or by one without FREs: the mark that tells an unwinder
	// to read the kernel's signal frame (or to stop there), which is what
	// cfi2sframe --signal-frames and GNU as write for a trampoline whose
	// CFI SFrame cannot carry. Not a failure.
	SignalMark Kind = "signal-mark"
	// Shared: a function that a Go program's function table (.gopclntab)
	// and .eh_frame or .debug_frame both describe: it was checked against
	// the rules of the section cfi2sframe converts it from (Finding.CFI
	// names it: .eh_frame over the table, the table over .debug_frame),
	// and Finding.Detail names the other. Not a failure.
	Shared Kind = "shared"
)

// defaultList is how many Missing and how many Skipped findings
// CheckFile keeps (Result.Findings); the others are only counted.
const defaultList = 10

// defaultShared is how many Shared findings CheckFile keeps of each pair
// of sections where CFI wins over a Go program's table (.eh_frame over
// .gopclntab); every Go function of a program with DWARF is in both
// .gopclntab and .debug_frame, which are only counted.
const defaultShared = 3

// Finding is one result of the check. For Disagree, PC is the first PC of
// a run of PCs with the same disagreement and End the run's end.
type Finding struct {
	Kind   Kind   `json:"kind"`
	Func   uint64 `json:"func"`             // function start (SFrame FDE, or CFI FDE for Missing)
	Symbol string `json:"symbol,omitempty"` // symbol name, if known
	PC     uint64 `json:"pc"`
	End    uint64 `json:"end"`
	What   string `json:"what,omitempty"` // "CFA", "RA", "FP", "mangled-RA", "signal"
	SFrame string `json:"sframe,omitempty"`
	CFI    string `json:"cfi,omitempty"`
	// Every and Until, when set, say that the run recurs every Every bytes
	// up to Until: PCMASK functions and PLT expressions are checked over
	// one period (see checkFDE).
	Every uint64 `json:"every,omitempty"`
	Until uint64 `json:"until,omitempty"`
	// Reason and Detail (Skipped): translate's reason code, as
	// cfi2sframe --diagnostics gives it, and its explanation. Detail
	// (Shared): the other section describing the function.
	Reason translate.Reason `json:"reason,omitempty"`
	Detail string           `json:"detail,omitempty"`
}

func (f Finding) String() string {
	name := f.Symbol
	if name == "" {
		name = fmt.Sprintf("%#x", f.Func)
	}
	loc := fmt.Sprintf("%s+%#x", name, f.PC-f.Func)
	switch f.Kind {
	case Missing:
		return fmt.Sprintf("%s [%#x,%#x): described by CFI, not by .sframe", name, f.PC, f.End)
	case Skipped:
		return fmt.Sprintf("%s [%#x,%#x): not in .sframe, skipped as cfi2sframe skips it: %s: %s", name, f.PC, f.End, f.Reason, f.Detail)
	case FromCode, Unproven:
		return f.fromCodeString(loc)
	case NoCFI:
		return fmt.Sprintf("%s [%#x,%#x): no CFI to check .sframe against", loc, f.PC, f.End)
	case SignalMark:
		return fmt.Sprintf("%s [%#x,%#x): signal frame, marked in .sframe (%s: %s), CFI says %s", loc, f.PC, f.End, f.What, f.SFrame, f.CFI)
	case Shared:
		return fmt.Sprintf("%s [%#x,%#x): described by both %s and %s: checked against %s, which cfi2sframe converts it from", name, f.PC, f.End, f.CFI, f.Detail, f.CFI)
	}
	s := fmt.Sprintf("%s [%#x,%#x): %s: sframe says %s, CFI says %s", loc, f.PC, f.End, f.What, f.SFrame, f.CFI)
	if f.Every != 0 {
		s += fmt.Sprintf(" (and every %#x bytes up to %#x)", f.Every, f.Until)
	}
	return s
}

// Result is the outcome of CheckFile.
type Result struct {
	// Findings: every Disagree and NoCFI finding; of the Missing and the
	// Skipped ones, the first 10 of each (by address).
	Findings  []Finding `json:"findings"`
	Functions int       `json:"functions"` // SFrame functions checked
	Checked   uint64    `json:"checked_bytes"`
	// Missing counts the CFI functions .sframe does not describe that
	// translate would have described: each makes the check fail.
	Missing int `json:"missing"`
	// Skipped counts, by translate's reason code, the CFI functions
	// .sframe does not describe that translate skips too.
	Skipped map[translate.Reason]int `json:"skipped,omitempty"`
	// Shared counts the functions a Go program's function table and
	// another CFI section both describe (Shared findings), by the pair of
	// sections: ".eh_frame over .gopclntab", ".gopclntab over
	// .debug_frame", the first the one checked against.
	Shared map[string]int `json:"shared,omitempty"`
	// ReturnAddresses counts the functions whose last SFrame byte is the
	// return address of the call that ends their CFI, in padding:
	// cfi2sframe covers it for readers that look a return address up as
	// it is (the kernel). It is checked against the CFI at the call.
	ReturnAddresses int `json:"return_addresses,omitempty"`
	// FromCode counts the SFrame functions no CFI covers that were
	// checked against their instructions instead (x86-64, AArch64).
	FromCode int `json:"from_code,omitempty"`
	// Unproven counts the rules of those functions the check could not
	// re-derive (kind Unproven): not failures.
	Unproven int `json:"from_code_unproven,omitempty"`
	// Agree: no Disagree or FromCode finding, no Missing function and no
	// Layout problem.
	Agree bool `json:"agree"`
	// Layout lists what is wrong with where the file puts .sframe and its
	// segments (see checkLayout).
	Layout []LayoutProblem `json:"layout,omitempty"`
}

// input is what check compares.
type input struct {
	Machine elf.Machine
	Order   binary.ByteOrder // the file's (for AArch64); nil means little-endian
	// SFrame is the section, read one function at a time, so memory does
	// not grow with its rows; it should have passed (*sframe.Table).Check
	// (a function whose bytes are malformed is a Disagree finding, "FDE").
	// Without it, the file has no SFrame data (an empty or SHT_NOBITS
	// section): every CFI function is checked for being missing, as
	// against an SFrame V3 section without functions.
	SFrame *sframe.Table
	Tables []*cfi.Table
	// Stream, instead of Tables: the FDEs as cfi.Open indexes them (24
	// bytes each). Check parses and executes each FDE when it gets to its
	// code and forgets its table once the SFrame functions have moved past
	// it (when they come in address order, as linkers write them), so
	// memory grows with the FDE list, not with every row of the file.
	Stream *cfi.File
	Symbol func(addr uint64) string // may be nil
	// Code gives the file's code (codeentry.Load), for the functions no
	// CFI covers to be checked against their instructions; nil, or nil
	// returned, leaves them NoCFI. Called once, when the first is met.
	Code func() *codeflow.Code
	// PLTs are the file's PLT sections, as translate takes them: CFI
	// inside one that translate describes from its instructions is
	// covered by that description.
	PLTs []translate.PLT
	// List is how many Missing and how many Skipped findings to keep
	// (0: defaultList; negative: all), and how many Shared findings of
	// each pair of sections (0: defaultShared). All are counted.
	List int
}

// check compares the section with the CFI at every PC of every SFrame
// function.
func check(in input) *Result {
	c := newChecker(in)
	res := &Result{}
	n := 0
	if in.SFrame != nil {
		n = int(in.SFrame.Header.NumFDEs)
	}
	covered := make([]span, 0, n)
	var fde sframe.FDE
	d := &fde
	for i := 0; i < n; i++ {
		if err := in.SFrame.FDE(i, d); err != nil {
			c.add(Finding{Kind: Disagree, Func: d.Start, PC: d.Start, End: d.Start + uint64(d.Size), What: "FDE", SFrame: err.Error()})
			continue
		}
		if d.Size == 0 {
			continue
		}
		res.Functions++
		res.Checked += uint64(d.Size)
		covered = append(covered, span{d.Start, d.Start + uint64(d.Size)})
		c.checkFDE(d)
	}
	// CFI functions that .sframe does not cover at all. Spans that start
	// together are ordered by end, so that the search below finds the
	// first one past a PC.
	slices.SortFunc(covered, func(a, b span) int {
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return cmp.Compare(a.hi, b.hi)
	})
	c.missing(res, covered)
	c.shared(res)
	res.ReturnAddresses = c.returns
	res.FromCode = c.fromCodeFDEs
	res.Unproven = c.unproven
	res.Findings = c.findings
	sort.SliceStable(res.Findings, func(i, j int) bool { return res.Findings[i].PC < res.Findings[j].PC })
	res.Agree = res.Missing == 0
	for _, f := range res.Findings {
		if f.Kind == Disagree || f.Kind == FromCode {
			res.Agree = false
		}
	}
	return res
}

type span struct{ lo, hi uint64 }

// missing checks the CFI functions no SFrame function overlaps (in
// covered, sorted). translate.Describer says what translate does with
// each: describe it (then it is Missing, and the check fails), skip it
// with a reason (Skipped), or pass over it (an empty FDE, one at address
// 0, one that cannot be executed: not reported). The Describer sees every
// CFI function in translate's order, covered ones too, as whether a
// function overlaps depends on those before it; only uncovered ones are
// executed here, once each and into one reused table, and only the first
// input.List of each kind are kept, so memory stays that of the FDE list
// however many functions are missing.
func (c *checker) missing(res *Result, covered []span) {
	isCovered := func(f cfi.Entry) bool {
		i := sort.Search(len(covered), func(i int) bool { return covered[i].hi > f.Start })
		return i < len(covered) && covered[i].lo < f.Start+f.Size
	}
	if !slices.ContainsFunc(c.spans, func(f cfi.Entry) bool { return !isCovered(f) }) {
		return // nothing to decide
	}
	desc := c.describer()
	limit, listed := c.in.List, map[Kind]int{}
	if limit == 0 {
		limit = defaultList
	}
	list := func(f Finding) {
		if limit < 0 || listed[f.Kind] < limit {
			listed[f.Kind]++
			c.add(f)
		}
	}
	var scratch cfiTable
	for k, f := range c.spans {
		if isCovered(f) {
			if desc != nil {
				desc.Next(f.Start, f.Size, c.executable(k, &scratch))
			}
			continue
		}
		t := c.execute(k, &scratch)
		described, d := true, (*translate.Diagnostic)(nil)
		if desc != nil {
			desc.Next(f.Start, f.Size, t != nil)
			described, d = desc.Decide(t)
		} else if t == nil || f.Start == 0 {
			described = false // what translate does, for a machine it does not know
		}
		switch {
		case described:
			res.Missing++
			list(Finding{Kind: Missing, Func: f.Start, PC: f.Start, End: f.Start + f.Size})
		case d != nil:
			if res.Skipped == nil {
				res.Skipped = map[translate.Reason]int{}
			}
			res.Skipped[d.Reason]++
			list(Finding{Kind: Skipped, Func: f.Start, PC: f.Start, End: f.Start + f.Size, Reason: d.Reason, Detail: d.Detail})
		}
	}
}

// shared counts the functions a Go program's function table and another
// CFI section both describe (cfi.File.Shared, Stream only), by the pair
// of sections, and lists the first of each pair by address (input.List,
// defaultShared by default).
func (c *checker) shared(res *Result) {
	if c.in.Stream == nil {
		return
	}
	type fn struct {
		e            cfi.Entry
		used, unused string
	}
	var all []fn
	c.in.Stream.Shared(func(e cfi.Entry, used, unused string) { all = append(all, fn{e, used, unused}) })
	if len(all) == 0 {
		return
	}
	slices.SortStableFunc(all, func(a, b fn) int { return cmp.Compare(a.e.Start, b.e.Start) })
	limit := c.in.List
	if limit == 0 {
		limit = defaultShared
	}
	res.Shared = map[string]int{}
	for _, f := range all {
		pair := f.used + " over " + f.unused
		res.Shared[pair]++
		// Every Go function of a build with DWARF is in Go's
		// .debug_frame too, which the table wins over by design: counted,
		// not named, unless every finding is asked for.
		named := limit < 0 || res.Shared[pair] <= limit && f.used != ".gopclntab"
		if named {
			c.add(Finding{Kind: Shared, Func: f.e.Start, PC: f.e.Start, End: f.e.Start + f.e.Size, What: "source", CFI: f.used, Detail: f.unused})
		}
	}
}

// describer returns translate's decision maker for this file, with the
// options the section shows: flexible FDEs only in V3; in V1 and V2,
// functions outermost throughout may be left out (OutermostGap: what
// cfi2sframe --for glibc writes, in V2; an unwinder stops where no FDE
// covers a PC as it does at an outermost one). Nil for a machine
// translate does not convert: every uncovered function is then Missing.
func (c *checker) describer() *translate.Describer {
	o := translate.Options{Version: sframe.Version3}
	if c.hdr.Version < sframe.Version3 {
		o = translate.Options{Version: sframe.Version2, OutermostGap: true}
	}
	d, err := translate.NewDescriber(c.in.Machine, c.in.Order, c.in.PLTs, o)
	if err != nil {
		return nil
	}
	return d
}

type checker struct {
	in       input
	hdr      *sframe.Header
	arch     *arch.Arch // the section's ABI
	sp, fp   uint64
	ra       uint64
	spans    []cfi.Entry  // the CFI functions, sorted by start
	tables   []*cfi.Table // spans[i]'s table (input.Tables), or nil: see table
	cache    map[int]*cfiTable
	free     []*cfiTable  // tables dropped from cache, for reuse
	ran, bad bitset       // spans executed (Stream), and those that failed
	ctx      *cfi.Context // parses and executes Stream entries
	pcs      []uint64     // checkFDE's boundaries, reused
	findings []Finding
	open     map[string]*Finding // current run per "what"
	returns  int                 // Result.ReturnAddresses
	// fromCodeFDEs: Result.FromCode.
	fromCodeFDEs int
	// unproven: Result.Unproven.
	unproven int
}

// rowAt returns the rule of SFrame function d at pc, from d's last FRE
// that starts at or before pc's offset in d (for a PCMask function, in
// its repeated block), or false when there is none.
func (c *checker) rowAt(d *sframe.FDE, pc uint64) (sframe.Rule, bool) {
	j := d.FREAt(pc)
	if j < 0 {
		return sframe.Rule{}, false
	}
	return c.in.SFrame.Interpret(d, &d.FREs[j]), true
}

func newChecker(in input) *checker {
	c := &checker{in: in, open: map[string]*Finding{}}
	switch {
	case in.SFrame != nil:
		c.hdr = &in.SFrame.Header
	default:
		// No section: nothing is compared, so the header only decides
		// what counts as describable.
		c.hdr = &sframe.Header{Version: sframe.Version3}
	}
	// Without a section (nothing compared) the machine's ABI.
	if c.arch = arch.ForSFrameABI(c.hdr.ABI); c.arch == nil {
		if c.arch = arch.ForMachine(in.Machine); c.arch == nil {
			c.arch = arch.AMD64
		}
	}
	c.sp, c.fp, c.ra = uint64(c.arch.SP()), uint64(c.arch.FP()), uint64(c.arch.RA())
	if in.Stream != nil {
		c.spans = make([]cfi.Entry, 0, len(in.Stream.Entries()))
		for _, e := range in.Stream.Entries() {
			if e.Size > 0 {
				c.spans = append(c.spans, e)
			}
		}
		slices.SortStableFunc(c.spans, func(a, b cfi.Entry) int { return cmp.Compare(a.Start, b.Start) })
		c.cache = map[int]*cfiTable{}
		c.ran, c.bad = newBitset(len(c.spans)), newBitset(len(c.spans))
		return c
	}
	for _, t := range in.Tables {
		if t != nil && t.FDE != nil && t.FDE.Size > 0 && len(t.Rows) > 0 {
			c.tables = append(c.tables, t)
		}
	}
	sort.SliceStable(c.tables, func(i, j int) bool { return c.tables[i].FDE.Start < c.tables[j].FDE.Start })
	for _, t := range c.tables {
		c.spans = append(c.spans, cfi.Entry{Start: t.FDE.Start, Size: t.FDE.Size})
	}
	return c
}

// cfiTable is an executed table and the FDE record, parsed again from its
// Stream entry, that the table points at.
type cfiTable struct {
	t cfi.Table
	f cfi.FDE
}

// table returns the executed table of spans[i], or nil when it cannot be
// executed or has no rows (such an FDE counts as absent).
func (c *checker) table(i int) *cfi.Table {
	if t, ok := c.cached(i); ok {
		return t
	}
	var t *cfiTable
	if k := len(c.free); k > 0 {
		t, c.free = c.free[k-1], c.free[:k-1]
	} else {
		t = &cfiTable{}
	}
	if !c.run(i, t) {
		c.free = append(c.free, t)
		c.cache[i] = nil
		return nil
	}
	c.cache[i] = t
	return &t.t
}

// cached returns the table of spans[i] when it is known without executing
// anything: all tables kept, or this one cached (nil when it could not be
// executed).
func (c *checker) cached(i int) (*cfi.Table, bool) {
	if c.cache == nil {
		return c.tables[i], true
	}
	t, ok := c.cache[i]
	if !ok || t == nil {
		return nil, ok
	}
	return &t.t, true
}

// run parses and executes spans[i] into t (Stream), and records whether
// that worked (a table without rows counts as failed).
func (c *checker) run(i int, t *cfiTable) bool {
	if c.ctx == nil {
		c.ctx = c.in.Stream.Context(nil)
	}
	err := c.ctx.ParseEntry(c.spans[i], &t.f)
	if err == nil {
		err = c.ctx.Execute(&t.f, &t.t)
	}
	ok := err == nil && len(t.t.Rows) > 0
	c.ran.set(i)
	if !ok {
		c.bad.set(i)
	}
	return ok
}

// execute returns the table of spans[i] without keeping it: the cached
// one, or one executed into scratch (valid until scratch is used again).
// Nil when it cannot be executed.
func (c *checker) execute(i int, scratch *cfiTable) *cfi.Table {
	if t, ok := c.cached(i); ok {
		return t
	}
	if c.ran.get(i) && c.bad.get(i) {
		return nil
	}
	if !c.run(i, scratch) {
		return nil
	}
	return &scratch.t
}

// executable says whether spans[i] can be executed, executing it into
// scratch only when that is not known yet.
func (c *checker) executable(i int, scratch *cfiTable) bool {
	if c.cache == nil {
		return c.tables[i] != nil
	}
	if c.ran.get(i) {
		return !c.bad.get(i)
	}
	return c.execute(i, scratch) != nil
}

// bitset is one bit per CFI function.
type bitset []uint64

func newBitset(n int) bitset    { return make(bitset, (n+63)/64) }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) get(i int) bool { return b[i/64]&(1<<(i%64)) != 0 }

// forget drops the cached tables of FDEs that end at or before pc, keeping
// their memory for the next ones.
func (c *checker) forget(pc uint64) {
	for i, t := range c.cache {
		if c.spans[i].Start+c.spans[i].Size <= pc {
			if t != nil {
				c.free = append(c.free, t)
			}
			delete(c.cache, i)
		}
	}
}

func (c *checker) add(f Finding) {
	if c.in.Symbol != nil && f.Symbol == "" {
		f.Symbol = c.in.Symbol(f.Func)
	}
	c.findings = append(c.findings, f)
}

// lookup returns the CFI table and row in force at pc.
func (c *checker) lookup(pc uint64) (*cfi.Table, *cfi.Row) {
	i := sort.Search(len(c.spans), func(i int) bool { return c.spans[i].Start > pc }) - 1
	var t *cfi.Table
	for ; i >= 0; i-- {
		if t = c.table(i); t != nil {
			break
		}
	}
	if t == nil || pc >= t.FDE.End() {
		return nil, nil
	}
	j := t.RowAt(pc)
	if j < 0 {
		return t, nil
	}
	return t, &t.Rows[j]
}

// pltPeriod is the period of the x86-64 PLT CFA expression: its value
// depends on pc & M with M a DW_OP_lit (0..31), so on pc mod 32 only.
const pltPeriod = 32

// checkFDE compares one SFrame function. PCs are visited at every boundary
// of either side: FRE starts, CFI FDE ends and rows. Between two boundaries
// a rule can still depend on the PC itself, periodically: a PCMASK
// function's FREs repeat every RepSize bytes, and the x86-64 PLT CFA
// expression repeats every 32 bytes. Such a stretch is checked over one
// common period only; what is found there is reported once with the period
// and the end of the stretch (Finding.Every, Finding.Until). So the work
// is bounded by the number of FREs and CFI rows times at most
// lcm(255, 32) PCs, never by the function's size: a 1 KB file may declare
// a 4 GiB function.
func (c *checker) checkFDE(d *sframe.FDE) {
	if c.fromCode(d) {
		return
	}
	start, end := d.Start, d.Start+uint64(d.Size)
	if len(c.cache) > 64 {
		c.forget(start)
	}
	rep := uint64(0)
	if d.PCType == sframe.PCMask {
		rep = uint64(d.RepSize)
	}
	pcs := append(c.pcs[:0], start)
	if rep == 0 {
		for i := range d.FREs {
			pcs = append(pcs, start+uint64(d.FREs[i].Start))
		}
	}
	i := sort.Search(len(c.spans), func(i int) bool { return c.spans[i].Start+c.spans[i].Size > start })
	for ; i < len(c.spans) && c.spans[i].Start < end; i++ {
		t := c.table(i)
		if t == nil {
			continue
		}
		pcs = append(pcs, t.FDE.Start, t.FDE.End())
		for _, r := range t.Rows {
			pcs = append(pcs, r.Loc)
		}
	}
	slices.Sort(pcs)
	// Keep the distinct boundaries inside [start, end).
	n := 0
	for _, pc := range pcs {
		if pc < start || pc >= end || (n > 0 && pcs[n-1] == pc) {
			continue
		}
		pcs[n] = pc
		n++
	}
	pcs = pcs[:n]
	c.pcs = pcs
	for i, pc := range pcs {
		next := end
		if i+1 < len(pcs) {
			next = pcs[i+1]
		}
		period := rep
		if _, row := c.lookup(pc); row != nil && row.CFA.Kind == cfi.CFAExpression {
			if _, ok := cfiexpr.ParsePLTExpr(row.CFA.Expr); ok {
				period = lcm(max(period, 1), pltPeriod)
			}
		}
		if period == 0 {
			c.checkPC(d, pc, next)
			continue
		}
		c.checkPeriodic(d, pc, next, period)
	}
	c.flush()
}

// checkPeriodic checks [lo, hi), where the rules repeat every period bytes,
// at every PC of its first period.
func (c *checker) checkPeriodic(d *sframe.FDE, lo, hi, period uint64) {
	w := hi
	if hi-lo > period {
		w = lo + period
	}
	if w == hi {
		for pc := lo; pc < hi; pc++ {
			c.checkPC(d, pc, pc+1)
		}
		return
	}
	c.flush()
	first := len(c.findings)
	for pc := lo; pc < w; pc++ {
		c.checkPC(d, pc, pc+1)
	}
	c.flush()
	for k := first; k < len(c.findings); k++ {
		f := &c.findings[k]
		if f.PC == lo && f.End == w {
			f.End = hi // the whole period, so the whole stretch
			continue
		}
		f.Every, f.Until = period, hi
	}
}

func lcm(a, b uint64) uint64 {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

func (c *checker) checkPC(d *sframe.FDE, pc, next uint64) {
	rule, ok := c.rowAt(d, pc)
	t, row := c.lookup(pc)
	if row == nil && pc > d.Start && pc == d.Start+uint64(d.Size)-1 {
		// The return address of a call that ends the CFI function, in
		// the padding after it: its rule is the one at the call.
		if t1, row1 := c.lookup(pc - 1); row1 != nil && t1.FDE.End() == pc {
			t, row = t1, row1
			c.returns++
		}
	}
	if row == nil {
		c.note(d, pc, next, NoCFI, "", "", "")
		return
	}
	if !ok {
		// An FDE without FREs: V3 reads it as the outermost frame.
		if ra := c.cfiReg(row, t, c.ra); ra.kind != kUndef {
			k := Disagree
			if d.Signal && t.FDE.CIE.Signal {
				k = SignalMark
			}
			c.note(d, pc, next, k, "RA", "outermost (FDE without FREs)", ra.String(c))
		}
		return
	}
	if rule.Signal && rule.RAUndefined && t.FDE.CIE.Signal {
		if ra := c.cfiReg(row, t, c.ra); ra.kind != kUndef {
			c.note(d, pc, next, SignalMark, "RA", "undefined (signal FDE)", ra.String(c))
		}
		return
	}
	cmp := func(what string, s, f loc) {
		if !s.equal(f) {
			c.note(d, pc, next, Disagree, what, s.String(c), f.String(c))
		}
	}
	// A row whose caller's SP is not where the ABI puts it relative to
	// the CFA is written with the CFA moved (translate's rebase): compare
	// it moved.
	shift := c.cfaShift(row)
	raS, raF := c.sframeRA(rule), c.cfiReg(row, t, c.ra).moved(shift)
	cmp("RA", raS, raF)
	if rule.RAUndefined {
		// An outermost-frame FRE carries no CFA or FP.
		return
	}
	cfa := c.cfiCFA(row, pc)
	if shift != 0 {
		cfa.off += shift
	}
	cmp("CFA", c.sframeLoc(rule.CFA, true, false), cfa)
	cmp("FP", c.sframeLoc(rule.FP, false, false), c.cfiReg(row, t, c.fp).moved(shift))
	if c.arch.PointerAuth() && rule.MangledRA != row.MangledRA {
		c.note(d, pc, next, Disagree, "mangled-RA", fmt.Sprint(rule.MangledRA), fmt.Sprint(row.MangledRA))
	}
	if c.hdr.Version >= sframe.Version3 && rule.Signal != t.FDE.CIE.Signal {
		c.note(d, pc, next, Disagree, "signal", fmt.Sprint(rule.Signal), fmt.Sprint(t.FDE.CIE.Signal))
	}
}

// note records a finding, merging it with the previous one when it
// continues the same run.
func (c *checker) note(d *sframe.FDE, pc, next uint64, k Kind, what, s, f string) {
	key := string(k) + "/" + what
	if o := c.open[key]; o != nil && o.End == pc && o.SFrame == s && o.CFI == f && o.Func == d.Start {
		o.End = next
		return
	}
	c.flushKey(key)
	c.open[key] = &Finding{Kind: k, Func: d.Start, PC: pc, End: next, What: what, SFrame: s, CFI: f}
}

func (c *checker) flushKey(key string) {
	if o := c.open[key]; o != nil {
		c.add(*o)
		delete(c.open, key)
	}
}

func (c *checker) flush() {
	keys := make([]string, 0, len(c.open))
	for k := range c.open {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.flushKey(k)
	}
}
