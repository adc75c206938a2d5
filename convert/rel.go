package convert

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/relobj"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// sectionShift places each section of a relocatable object at its own
// synthetic address (index << sectionShift), so that FDEs of different
// sections never overlap in the translator.
const sectionShift = 36

// convertRelocatable adds what as --gsframe would have added to an ET_REL
// object: one .sframe section (FDEs in .eh_frame order, not sorted, start
// addresses PC-relative) and .rela.sframe relocating each start field
// against the symbol .rela.eh_frame uses for the same function.
func convertRelocatable(name string, in []byte, f *elfread.File, o Options) (*Result, error) {
	fail := func(err error) (*Result, error) { return nil, &Error{File: name, Err: err} }
	ef := f.ELF
	if _, err := f.SFrame(); err == nil {
		if !o.Force {
			return fail(ErrHasSFrame)
		}
		return fail(errors.New("replacing .sframe in a relocatable object is not supported; assemble it again without --gsframe"))
	}
	if ef.Section(".eh_frame") == nil {
		if _, err := cfi.Sections(f); err != nil {
			return fail(err) // e.g. unnamed section headers: .eh_frame cannot be looked for
		}
		// No function with CFI (data only, or assembled without CFI
		// directives): as --gsframe writes no .sframe for such an object,
		// so a build that converts every object gets it back unchanged.
		return &Result{Output: in, Translate: &translate.Result{}, Unchanged: true,
			Note: "relocatable object without .eh_frame (no functions with CFI): copied unchanged, as as --gsframe writes no .sframe for it"}, nil
	}
	loaded, err := cfi.Load(f)
	if err != nil {
		return fail(err)
	}
	if loaded.Sections == 0 {
		return fail(ErrNoCFI)
	}
	if err := noFDE(loaded.FDEs, loaded.Errors); err != nil {
		return fail(err)
	}
	targets, err := relobj.FDETargets(ef)
	if err != nil {
		return fail(err)
	}
	res := &Result{CFIErrors: loaded.Errors, FDEs: loaded.FDEs}

	type fdeInfo struct {
		tgt   relobj.Target
		order int64 // .eh_frame offset: gas keeps input order
	}
	info := map[uint64]fdeInfo{}
	var tables []*cfi.Table
	for _, t := range loaded.Tables {
		if t.FDE.Size == 0 {
			continue
		}
		tgt, ok := targets[t.FDE.StartField]
		if !ok {
			res.CFIErrors = append(res.CFIErrors, fmt.Errorf(".eh_frame: FDE at offset %d: no relocation for its start address", t.FDE.Offset))
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
		tables = append(tables, nt)
		info[base] = fdeInfo{tgt, t.FDE.Offset}
	}

	names := relSymbolizer(ef)
	tr, err := translate.Translate(translate.Input{
		Machine: ef.Machine, Order: ef.ByteOrder, Tables: tables,
		Symbol: func(a uint64) string { return names(int(a>>sectionShift), a&(1<<sectionShift-1)) },
	}, translate.Options{Version: o.Version, OutermostGap: o.OutermostGap, SignalOutermost: o.SignalFrames})
	if err != nil {
		return fail(err)
	}
	// Diagnostics speak of section offsets, as objdump does for objects.
	for i := range tr.Diags {
		d := &tr.Diags[i]
		mask := uint64(1)<<sectionShift - 1
		d.Start, d.End, d.PC = d.Start&mask, d.End&mask, d.PC&mask
	}
	res.Translate = tr
	funcs := tr.Funcs
	// A function split around outermost rows (Options.OutermostGap)
	// starts inside its FDE: it takes that FDE's relocation target, with
	// the distance added to the addend.
	bases := make([]uint64, 0, len(info))
	for b := range info {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	origin := func(start uint64) (fdeInfo, uint64) {
		if fi, ok := info[start]; ok {
			return fi, 0
		}
		i := sort.Search(len(bases), func(i int) bool { return bases[i] > start }) - 1
		if i < 0 {
			return fdeInfo{}, 0
		}
		return info[bases[i]], start - bases[i]
	}
	sort.SliceStable(funcs, func(i, j int) bool {
		a, da := origin(funcs[i].Start)
		b, db := origin(funcs[j].Start)
		return a.order < b.order || a.order == b.order && da < db
	})

	enc := sframe.Options{
		Version: o.Version, ABI: tr.ABI, Order: ef.ByteOrder,
		PCRel:      o.Version == sframe.Version3 || o.PCRel,
		CFAFixedFP: tr.CFAFixedFP, CFAFixedRA: tr.CFAFixedRA,
	}
	// Start fields are left to the relocations: encode with every start at
	// 0 (FDE order and FRE data do not depend on it; the synthetic
	// per-section addresses would not fit V2's 32-bit field).
	zeroed := make([]sframe.Function, len(funcs))
	for i, fn := range funcs {
		zeroed[i] = fn
		zeroed[i].Start = 0
	}
	b, err := sframe.Encode(zeroed, enc)
	if err != nil {
		return fail(err)
	}
	fieldSize, fdeSize := 8, 16
	if o.Version == sframe.Version2 {
		fieldSize, fdeSize = 4, 20
	}
	rtype, err := relobj.RelocType(ef.Machine, fieldSize)
	if err != nil {
		return fail(err)
	}
	relocs := make([]relobj.Reloc, len(funcs))
	for i, fn := range funcs {
		off := sframe.HeaderSize + i*fdeSize
		for k := 0; k < fieldSize; k++ {
			b[off+k] = 0 // the relocation supplies the value (RELA)
		}
		fi, delta := origin(fn.Start)
		t := fi.tgt
		relocs[i] = relobj.Reloc{Off: uint64(off), Sym: t.Sym, Type: rtype, Addend: t.Addend + int64(delta)}
	}
	const align = 8
	if ef.Machine == elf.EM_S390 {
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
		return fail(err)
	}
	res.Output, res.SFrame = out, b
	return res, nil
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
