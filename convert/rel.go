package convert

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/allfuncs"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// sectionShift places each section of a relocatable object at its own
// synthetic address (index << sectionShift), so that FDEs of different
// sections never overlap in the translator.
const sectionShift = 36

// sectionMask keeps the offset in its section of a synthetic address.
const sectionMask = uint64(1)<<sectionShift - 1

// convertRelocatable adds what as --gsframe would have added to an ET_REL
// object: one .sframe section (FDEs in .eh_frame order, not sorted, start
// addresses PC-relative) and .rela.sframe relocating each start field
// against the symbol .rela.eh_frame uses for the same function.
func convertRelocatable(in []byte, f *elfread.File, o Options) (*Result, error) {
	if res, err := relUnchanged(in, f, o); res != nil || err != nil {
		return res, err
	}
	cf, err := cfi.OpenBytes(in)
	if err != nil {
		return nil, err
	}
	if len(cf.Sections()) == 0 {
		return nil, ErrNoCFI
	}
	if err := noFDE(cf.Parsed(), cf.Errors()); err != nil {
		return nil, err
	}
	loaded, cfiErrs := alltables.Execute(cf)
	targets, err := relobj.FDETargets(f.ELF)
	if err != nil {
		return nil, err
	}
	res := &Result{CFIErrors: cfiErrs}
	tables, origins, errs := placeTables(loaded, targets)
	res.CFIErrors = append(res.CFIErrors, errs...)
	funcs, tr, tl, err := translateRel(f.ELF, tables, o)
	if err != nil {
		return nil, err
	}
	res.Translate = tr
	origins.sort(funcs)
	b, relocs, err := encodeRel(f.ELF, funcs, origins, tl, o)
	if err != nil {
		return nil, err
	}
	const align = 8
	if f.ELF.Machine == elf.EM_S390 {
		// GNU as for s390x rounds every section's size up to its
		// alignment (.text to 4, .sframe to 8 bytes, zeros after the
		// data): so does the section gas would write.
		for len(b)%align != 0 {
			b = append(b, 0)
		}
	}
	out, err := relobj.Append(in, relobj.Section{
		Name: ".sframe", Type: elf.SectionType(elfread.SHTGNUSFrame), Flags: elf.SHF_ALLOC, Align: align,
		Data: b, Relocs: relocs,
	})
	if err != nil {
		return nil, err
	}
	res.output, res.SFrame = out, b
	return res, nil
}

// relUnchanged decides about an object before its CFI is read: one with
// SFrame data is refused; one without .eh_frame gets a Result with the
// object unchanged. Both nil: convert it.
func relUnchanged(in []byte, f *elfread.File, o Options) (*Result, error) {
	if _, err := f.SFrame(); err == nil {
		if !o.Force {
			return nil, ErrHasSFrame
		}
		return nil, errors.New("replacing .sframe in a relocatable object is not supported; assemble it again without --gsframe")
	}
	if f.ELF.Section(".eh_frame") != nil {
		return nil, nil
	}
	if _, err := cfi.OpenBytes(in); err != nil {
		return nil, err // e.g. unnamed section headers: .eh_frame cannot be looked for
	}
	// No function with CFI (data only, or assembled without CFI
	// directives): as --gsframe writes no .sframe for such an object, so
	// a build that converts every object gets it back unchanged.
	return &Result{output: in, Translate: &translate.Result{},
		Unchanged: "relocatable object without .eh_frame (no functions with CFI): copied unchanged, as as --gsframe writes no .sframe for it"}, nil
}

// origin is where a function's FDE came from: the relocation target of
// its start field, and its place in .eh_frame (gas keeps input order).
type origin struct {
	tgt   relobj.Target
	order int64 // .eh_frame offset
}

// origins maps each FDE's synthetic start address to its origin.
type origins map[uint64]origin

// placeTables moves each FDE's table to its synthetic address: its target
// section's base plus its offset there. An FDE whose start field has no
// relocation is left out, with an error.
func placeTables(tables []*cfi.Table, targets map[int64]relobj.Target) ([]*cfi.Table, origins, []error) {
	var out []*cfi.Table
	var errs []error
	ors := origins{}
	for _, t := range tables {
		if t.FDE.Size == 0 {
			continue
		}
		tgt, ok := targets[t.FDE.StartField]
		if !ok {
			errs = append(errs, &cfi.Error{Section: ".eh_frame", Off: t.FDE.Offset, Msg: "FDE: no relocation for its start address"})
			continue
		}
		base := uint64(tgt.Section)<<sectionShift + tgt.Offset
		fde := *t.FDE
		fde.Start = base
		rows := make([]cfi.Row, len(t.Rows))
		copy(rows, t.Rows)
		for i := range rows {
			rows[i].Loc = rows[i].Loc - t.FDE.Start + base
		}
		nt := &cfi.Table{FDE: &fde, Rows: rows}
		if t.LastAdvance != 0 {
			nt.LastAdvance = t.LastAdvance - t.FDE.Start + base
		}
		out = append(out, nt)
		ors[base] = origin{tgt, t.FDE.Offset}
	}
	return out, ors, errs
}

// translateRel translates an object's placed tables and keeps every
// function, by start address, with the translator (its ABI, for the
// encoder). Diagnostics speak of section offsets, as objdump does for
// objects.
func translateRel(ef *elf.File, tables []*cfi.Table, o Options) ([]sframe.Function, *translate.Result, *translate.Translator, error) {
	names := relSymbolizer(ef)
	t, err := translate.New(translate.Input{
		Machine: ef.Machine, Order: ef.ByteOrder,
		Symbol: func(a uint64) string { return names(int(a>>sectionShift), a&sectionMask) },
	}, o.translateOptions())
	if err != nil {
		return nil, nil, nil, err
	}
	funcs, tr, err := allfuncs.Translate(t, tables, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range tr.Diags {
		d := &tr.Diags[i]
		d.Start, d.End, d.PC = d.Start&sectionMask, d.End&sectionMask, d.PC&sectionMask
	}
	sort.SliceStable(funcs, func(i, j int) bool { return funcs[i].Start < funcs[j].Start })
	return funcs, tr, t, nil
}

// of returns the origin of a function starting at start and its distance
// from the FDE's start: a function split around outermost rows
// (Options.OutermostGap) starts inside its FDE, whose relocation target
// it takes, with the distance added to the addend.
func (ors origins) of(start uint64, bases []uint64) (origin, uint64) {
	if o, ok := ors[start]; ok {
		return o, 0
	}
	i := sort.Search(len(bases), func(i int) bool { return bases[i] > start }) - 1
	if i < 0 {
		return origin{}, 0
	}
	return ors[bases[i]], start - bases[i]
}

// bases returns the FDEs' synthetic start addresses, sorted.
func (ors origins) bases() []uint64 {
	bases := make([]uint64, 0, len(ors))
	for b := range ors {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases
}

// sort puts funcs in the order of their FDEs in .eh_frame (the parts of
// one FDE in address order), which is the order gas writes.
func (ors origins) sort(funcs []sframe.Function) {
	bases := ors.bases()
	sort.SliceStable(funcs, func(i, j int) bool {
		a, da := ors.of(funcs[i].Start, bases)
		b, db := ors.of(funcs[j].Start, bases)
		return a.order < b.order || a.order == b.order && da < db
	})
}

// encodeRel encodes an object's section, its functions in their order,
// and the relocations of their start fields, which the section's header
// locates and which are left zero (RELA: the relocation supplies the value). The
// functions are encoded with every start at 0: FDE order and FRE data do
// not depend on it, and the synthetic per-section addresses would not fit
// V2's 32-bit field.
func encodeRel(ef *elf.File, funcs []sframe.Function, ors origins, t *translate.Translator, o Options) ([]byte, []relobj.Reloc, error) {
	abi, fixedFP, fixedRA := t.ABI()
	enc, err := sframe.NewEncoder(sframe.Options{
		Version: o.Version, ABI: abi, Order: ef.ByteOrder,
		PCRel:      o.Version == sframe.Version3 || o.PCRel,
		CFAFixedFP: fixedFP, CFAFixedRA: fixedRA,
	})
	if err != nil {
		return nil, nil, err
	}
	for _, fn := range funcs {
		fn.Start = 0
		if err := enc.Add(&fn); err != nil {
			return nil, nil, err
		}
	}
	b, err := enc.Section(0)
	if err != nil {
		return nil, nil, err
	}
	// The start fields, which relocations fill: the first bytes of each
	// FDE index entry, in the order the functions were added.
	tb, err := sframe.Open(b, 0)
	if err != nil {
		return nil, nil, err
	}
	h := &tb.Header
	size := 4
	if h.Version == sframe.Version3 {
		size = 8
	}
	rtype, err := relobj.RelocType(ef.Machine, size)
	if err != nil {
		return nil, nil, err
	}
	bases := ors.bases()
	relocs := make([]relobj.Reloc, len(funcs))
	for i, fn := range funcs {
		off := h.Size() + int(h.FDEOff) + i*h.FDESize()
		clear(b[off : off+size])
		or, delta := ors.of(fn.Start, bases)
		relocs[i] = relobj.Reloc{Off: uint64(off), Sym: or.tgt.Sym, Type: rtype, Addend: or.tgt.Addend + int64(delta)}
	}
	return b, relocs, nil
}

// relSymbolizer names the function symbol at an offset of a section.
func relSymbolizer(ef *elf.File) func(sec int, off uint64) string {
	type key struct {
		sec int
		off uint64
	}
	m := map[key]string{}
	if syms, err := ef.Symbols(); err == nil {
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" {
				m[key{int(s.Section), s.Value}] = s.Name
			}
		}
	}
	return func(sec int, off uint64) string {
		if n, ok := m[key{sec, off}]; ok {
			return n
		}
		if sec > 0 && sec < len(ef.Sections) {
			return fmt.Sprintf("%s+%#x", ef.Sections[sec].Name, off)
		}
		return ""
	}
}
