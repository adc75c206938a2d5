package translate

import (
	"fmt"
	"math"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/cfiexpr"
	"github.com/cfi2sframe/cfi2sframe/internal/pltsim"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// pltLayout is the stub layout of one PLT section.
type pltLayout struct {
	header int // bytes of PLT0 (0 for sections without one)
	entry  int // bytes per entry
}

func (a *abi) layout(p PLT) (pltLayout, bool) {
	var l pltLayout
	switch {
	case a.arch == arch.AMD64 && p.Name == ".plt" && !pltsim.HasHeader(a.arch, p.Data):
		// A static executable's: no PLT0; GNU ld's entries are 8 bytes
		// (jmp *GOT(%rip); xchg %ax,%ax), 16 with IBT (plt tries both).
		l = pltLayout{entry: 16}
	case a.arch == arch.AMD64 && p.Name == ".plt":
		l = pltLayout{header: 16, entry: 16}
	case a.arch == arch.AMD64 && p.Name == ".plt.sec":
		l = pltLayout{entry: 16}
	case a.arch == arch.AMD64 && p.Name == ".plt.got":
		l = pltLayout{entry: 16}
		if len(p.Data)%16 != 0 {
			l.entry = 8 // non-IBT .plt.got: jmp *got(%rip); xchg %ax,%ax
		}
	case a.arch == arch.ARM64 && p.Name == ".plt" && pltsim.HasHeader(a.arch, p.Data):
		l = pltLayout{header: 32, entry: 16}
	case a.arch == arch.ARM64 && (p.Name == ".plt" || p.Name == ".iplt"):
		// A static executable's IRELATIVE stubs without PLT0: GNU ld's
		// .plt, lld's .iplt.
		l = pltLayout{entry: 16}
	case a.arch == arch.S390X && p.Name == ".plt":
		l = pltLayout{header: 32, entry: 32} // GNU ld's (bfd/elf64-s390.c)
	default:
		return l, false
	}
	if p.EntSize > 0 && p.EntSize <= math.MaxUint8 && uint64(len(p.Data)-min(l.header, len(p.Data)))%p.EntSize == 0 {
		l.entry = int(p.EntSize)
	}
	return l, true
}

// plt describes a PLT section from its instructions: PLT0 as an ordinary
// function, each run of entries that behave alike as one PCMASK function
// repeating every entry size (for ld's usual PLT, one for all entries, as
// GNU ld describes them), an entry unlike its neighbours as an ordinary
// function.
func (a *abi) plt(p PLT) ([]sframe.Function, *Diagnostic) {
	l, ok := a.layout(p)
	if !ok {
		return nil, nil
	}
	sizes := []int{16, 24}
	switch {
	case p.EntSize != 0:
		return a.pltWith(p, l)
	case a.arch == arch.AMD64 && p.Name == ".plt" && l.header == 0:
		sizes = []int{8, 16}
	case a.arch != arch.ARM64:
		return a.pltWith(p, l)
	}
	// AArch64 ld leaves sh_entsize 0: entries are 16 bytes, or 24 with
	// -z pac-plt (adrp; ldr; add; autia1716; br; nop) and with BTI and PAC
	// together; so does GNU ld for a static x86-64 executable's .plt, whose
	// entries are 8 bytes, or 16 with IBT. Take the first size whose every
	// entry is a known stub.
	var first *Diagnostic
	for _, e := range sizes {
		l.entry = e
		funcs, d := a.pltWith(p, l)
		if d == nil {
			return funcs, nil
		}
		if first == nil {
			first = d
		}
	}
	return nil, first
}

// pltWith describes a PLT section with a given layout.
func (a *abi) pltWith(p PLT, l pltLayout) ([]sframe.Function, *Diagnostic) {
	fail := func(format string, args ...any) ([]sframe.Function, *Diagnostic) {
		return nil, &Diagnostic{Start: p.Addr, End: p.Addr + uint64(len(p.Data)), PC: p.Addr, Reason: PLTUnknown, Detail: fmt.Sprintf(format, args...)}
	}
	if len(p.Data) < l.header || (len(p.Data)-l.header)%l.entry != 0 {
		return fail("%s: %d bytes do not make a %d-byte header and %d-byte entries", p.Name, len(p.Data), l.header, l.entry)
	}
	var funcs []sframe.Function
	if l.header > 0 {
		rows, err := a.stub(p.Data[:l.header], true)
		if err != nil {
			return fail("%s header: %v", p.Name, err)
		}
		funcs = append(funcs, sframe.Function{Start: p.Addr, Size: uint32(l.header), PCType: sframe.PCInc, Rows: rows})
	}
	n := (len(p.Data) - l.header) / l.entry
	if n == 0 {
		return funcs, nil
	}
	base := p.Addr + uint64(l.header)
	entries := make([][]sframe.Row, n)
	for i := 0; i < n; i++ {
		off := l.header + i*l.entry
		rows, err := a.stub(p.Data[off:off+l.entry], false)
		if err != nil {
			return fail("%s entry %d (offset %#x): %v", p.Name, i, off, err)
		}
		entries[i] = rows
	}
	// Each run of entries that behave alike is one PCMASK function (GNU ld
	// writes one for the whole section); an entry unlike its neighbours,
	// such as the TLSDESC trampoline ld puts after the x86-64 lazy entries
	// (endbr64; push GOT+8; jmp *GOT+TDG), is an ordinary function.
	for i := 0; i < n; {
		j := i + 1
		for j < n && sameRows(entries[j], entries[i]) {
			j++
		}
		start, size := base+uint64(i*l.entry), uint64((j-i)*l.entry)
		if j-i > 1 && l.entry <= math.MaxUint8 && size <= math.MaxUint32 {
			funcs = append(funcs, sframe.Function{Start: start, Size: uint32(size), PCType: sframe.PCMask, RepSize: uint8(l.entry), Rows: entries[i]})
		} else {
			for k := i; k < j; k++ {
				funcs = append(funcs, sframe.Function{Start: base + uint64(k*l.entry), Size: uint32(l.entry), PCType: sframe.PCInc, Rows: entries[k]})
			}
		}
		i = j
	}
	return funcs, nil
}

func sameRows(a, b []sframe.Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// stub simulates one stub and returns its rows (offsets from its start).
func (a *abi) stub(code []byte, header bool) ([]sframe.Row, error) {
	steps, err := pltsim.Simulate(a.arch, code, header)
	if err != nil {
		return nil, err
	}
	rows := make([]sframe.Row, 0, len(steps))
	for _, s := range steps {
		r := sframe.Row{
			Start: s.Off,
			CFA:   sframe.Loc{Kind: sframe.LocReg, Reg: uint32(a.sp), Offset: s.CFAOffset},
		}
		switch {
		case s.RAOffset != 0:
			r.RA = sframe.Loc{Kind: sframe.LocCFA, Offset: s.RAOffset}
		case a.fixedRA != 0:
			r.RA = sframe.Loc{Kind: sframe.LocFixed, Offset: int32(a.fixedRA)}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// pltFromCFI describes an x86-64 lazy PLT from the FDE GNU ld and lld give
// it, when the section itself is unknown (stripped section headers): rows
// up to the PC-dependent CFA expression are PLT0, an ordinary function;
// from there on the expression CFA = rsp+N (+Extra once (rip & Mask) >=
// Threshold) is exactly a PCMASK function repeating every Mask+1 bytes.
func (a *abi) pltFromCFI(t *cfi.Table) ([]sframe.Function, bool) {
	if a.arch != arch.AMD64 || len(t.Rows) == 0 {
		return nil, false
	}
	f := t.FDE
	last := &t.Rows[len(t.Rows)-1]
	if last.CFA.Kind != cfi.CFAExpression {
		return nil, false
	}
	p, ok := cfiexpr.ParsePLTExpr(last.CFA.Expr)
	rep := uint64(p.Mask) + 1
	if !ok || p.SPReg != a.sp || p.PCReg != a.ra || rep&(rep-1) != 0 || rep > math.MaxUint8 ||
		last.Loc%rep != 0 || (f.End()-last.Loc)%rep != 0 || uint64(p.Threshold) >= rep || f.Size > math.MaxUint32 {
		return nil, false
	}
	if last.Rule(a.ra).Kind != cfi.Offset || last.Rule(a.ra).Offset != int64(a.fixedRA) {
		return nil, false
	}
	ra := sframe.Loc{Kind: sframe.LocFixed, Offset: int32(a.fixedRA)}
	var out []sframe.Function
	if last.Loc > f.Start {
		head := &cfi.Table{FDE: &cfi.FDE{CIE: f.CIE, Start: f.Start, Size: last.Loc - f.Start}, Rows: t.Rows[:len(t.Rows)-1]}
		fn, d := a.function(head)
		if d != nil {
			return nil, false
		}
		out = append(out, fn)
	}
	out = append(out, sframe.Function{
		Start: last.Loc, Size: uint32(f.End() - last.Loc), PCType: sframe.PCMask, RepSize: uint8(rep),
		Rows: []sframe.Row{
			{Start: 0, CFA: sframe.Loc{Kind: sframe.LocReg, Reg: uint32(a.sp), Offset: int32(p.SPOffset)}, RA: ra},
			{Start: uint32(p.Threshold), CFA: sframe.Loc{Kind: sframe.LocReg, Reg: uint32(a.sp), Offset: int32(p.SPOffset) + int32(p.Extra)}, RA: ra},
		},
	})
	return out, true
}

// pltRule is the CFA offset from SP (and, when known, the RA rule) at one
// PC of a PLT, from either description.
type pltRule struct {
	cfa int64
	ok  bool // the CFA is SP-based (with the PLT expression evaluated)
}

// cfiPLTRule evaluates the CFI row covering pc: an SP-based CFA, or the
// x86-64 lazy-PLT expression at that PC.
func (a *abi) cfiPLTRule(t *cfi.Table, pc uint64) pltRule {
	i := t.RowAt(pc)
	if i < 0 {
		return pltRule{}
	}
	row := &t.Rows[i]
	switch row.CFA.Kind {
	case cfi.CFARegOffset:
		if row.CFA.Reg == a.sp {
			return pltRule{cfa: row.CFA.Offset, ok: true}
		}
	case cfi.CFAExpression:
		if p, ok := cfiexpr.ParsePLTExpr(row.CFA.Expr); ok && p.SPReg == a.sp && p.PCReg == a.ra {
			off := p.SPOffset
			if uint8(pc)&p.Mask >= p.Threshold {
				off += int64(p.Extra)
			}
			return pltRule{cfa: off, ok: true}
		}
	}
	return pltRule{}
}

// funcPLTRule evaluates an instruction-derived PLT function at pc.
func funcPLTRule(fn *sframe.Function, pc uint64) pltRule {
	off := uint32(pc - fn.Start)
	if fn.PCType == sframe.PCMask && fn.RepSize != 0 {
		off %= uint32(fn.RepSize)
	}
	var r *sframe.Row
	for i := range fn.Rows {
		if fn.Rows[i].Start > off {
			break
		}
		r = &fn.Rows[i]
	}
	if r == nil || r.CFA.Kind != sframe.LocReg {
		return pltRule{}
	}
	return pltRule{cfa: int64(r.CFA.Offset), ok: true}
}

// checkPLTCFI compares the CFI covering (part of) a PLT with the
// description derived from the PLT's instructions, at every PC both cover.
// The instructions win; a disagreement is reported, not fatal.
func (a *abi) checkPLTCFI(t *cfi.Table, funcs []sframe.Function) *Diagnostic {
	f := t.FDE
	var first uint64
	var cfiRule, ours pltRule
	n, bad := 0, 0
	for i := range funcs {
		fn := &funcs[i]
		lo, hi := max(fn.Start, f.Start), min(fn.Start+uint64(fn.Size), f.End())
		for pc := lo; pc < hi; pc++ {
			n++
			c, o := a.cfiPLTRule(t, pc), funcPLTRule(fn, pc)
			if c != o {
				if bad == 0 {
					first, cfiRule, ours = pc, c, o
				}
				bad++
			}
		}
	}
	if bad == 0 {
		return nil
	}
	say := func(r pltRule) string {
		if !r.ok {
			return "a rule not based on the stack pointer"
		}
		return fmt.Sprintf("CFA=%s%+d", a.arch.RegName(a.sp), r.cfa)
	}
	return &Diagnostic{Start: f.Start, End: f.End(), PC: first, Reason: PLTCFIDisagrees,
		Detail: fmt.Sprintf("FDE at offset %#x says %s, the instructions %s (%d of %d PCs differ); the instructions are used",
			f.Offset, say(cfiRule), say(ours), bad, n)}
}
