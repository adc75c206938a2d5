package report

import (
	"cmp"
	"debug/elf"
	"fmt"
	"slices"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// chunkFDEs is about how many FDEs are translated and encoded at a time.
// A variable so that tests can cut files into tiny pieces.
var chunkFDEs = 4096

// encoded is what the report takes from one translation and encoding of a
// whole file.
type encoded struct {
	size      uint64 // bytes of the section
	funcs     int    // its functions
	fres      int
	freType   [3]int // functions per FRE type
	wordSize  [3]int // FREs per data-word size
	converted int    // functions from CFI (translate.Result.Converted)
	codeBytes uint64 // bytes of the functions outside PLT sections
	skipped   map[string]int
}

// translateEncode translates and encodes the file's CFI and PLTs as one
// translate.Translate and one sframe.Encode call would, and measures the
// result, but a piece at a time, so that memory holds the rows of about
// chunkFDEs functions instead of the whole file's:
//
//   - the PLT sections are translated on their own; FDEs over a PLT that
//     is described from its instructions are dropped, as Translate drops
//     them (its diagnostic for them does not skip a function);
//   - the FDEs, sorted by start as Translate sorts them, are cut only
//     where no earlier FDE reaches past the next one's start, so that
//     each piece sees the overlaps Translate would see;
//   - each piece is encoded with the PLT functions in its address range
//     and the address that puts its FDE index entries where they are in
//     the whole section (V2's start offsets depend on it); the section's
//     size is the pieces' sizes less all but one header.
//
// The FDEs are st.Entries (cfi.Index) when st has them, else st.FDEs.
func translateEncode(path string, ef *elf.File, st *cfi.Stream, plts []translate.PLT, v uint8) (*encoded, error) {
	if st.FDEs == nil {
		return translateEncodeList(path, ef, st, plts, v, st.Entries,
			func(e cfi.Entry) (uint64, uint64) { return e.Start, e.Size },
			func(in *translate.Input, es []cfi.Entry) { in.Entries, in.ExecEntry = es, st.ExecuteEntry })
	}
	fdes := make([]*cfi.FDE, 0, len(st.FDEs))
	for _, f := range st.FDEs {
		if f != nil {
			fdes = append(fdes, f)
		}
	}
	return translateEncodeList(path, ef, st, plts, v, fdes,
		func(f *cfi.FDE) (uint64, uint64) { return f.Start, f.Size },
		func(in *translate.Input, fs []*cfi.FDE) { in.FDEs, in.Exec = fs, st.Execute })
}

// translateEncodeList is translateEncode over a list of FDEs of either
// form: rangeOf gives an FDE's start and size, feed puts a piece of the list
// into a translate.Input.
func translateEncodeList[T any](path string, ef *elf.File, st *cfi.Stream, plts []translate.PLT, v uint8,
	all []T, rangeOf func(T) (uint64, uint64), feed func(*translate.Input, []T)) (*encoded, error) {
	opts := translate.Options{Version: v}
	res := &encoded{skipped: map[string]int{}}
	in := translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, PLTs: plts}
	pltRes, err := translate.Translate(in, opts)
	if err != nil {
		return nil, err
	}
	count := func(tr *translate.Result) {
		for _, d := range tr.Diags {
			if d.Skipped {
				res.skipped[string(d.Reason)]++
			}
		}
	}
	count(pltRes)
	// The PLT sections whose instructions gave functions.
	type span struct{ lo, hi uint64 }
	var described []span
	for _, p := range plts {
		one, err := translate.Translate(translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, PLTs: []translate.PLT{p}}, opts)
		if err != nil {
			return nil, err
		}
		if len(one.Funcs) > 0 {
			described = append(described, span{p.Addr, p.Addr + uint64(len(p.Data))})
		}
	}
	used := func(f T) bool { start, size := rangeOf(f); return size > 0 && start != 0 } // what Translate does not set aside
	fdes := make([]T, 0, len(all))
	for _, f := range all {
		start, size := rangeOf(f)
		if used(f) && slices.ContainsFunc(described, func(s span) bool { return start < s.hi && s.lo < start+size }) {
			continue
		}
		fdes = append(fdes, f)
	}
	slices.SortStableFunc(fdes, func(a, b T) int { sa, _ := rangeOf(a); sb, _ := rangeOf(b); return cmp.Compare(sa, sb) })

	fdeSize := uint64(20)
	if v == sframe.Version3 {
		fdeSize = 16
	}
	pltFuncs := pltRes.Funcs // sorted by start
	var index uint64         // functions before the piece in the whole section's index
	var funcs []sframe.Function
	var d sframe.FDE
	errs := len(st.Errors)
	// piece translates fdes[lo:hi] and encodes it with the PLT functions
	// that start before limit (or all that are left when last).
	piece := func(lo, hi int, limit uint64, last bool) error {
		in := translate.Input{Machine: ef.Machine, Order: ef.ByteOrder}
		feed(&in, fdes[lo:hi])
		tr, err := translate.Translate(in, opts)
		st.Errors = st.Errors[:errs] // counted by the caller
		if err != nil {
			return err
		}
		count(tr)
		res.converted += tr.Converted
		k := 0
		for k < len(pltFuncs) && (last || pltFuncs[k].Start < limit) {
			k++
		}
		funcs = append(append(funcs[:0], pltFuncs[:k]...), tr.Funcs...)
		pltFuncs = pltFuncs[k:]
		slices.SortStableFunc(funcs, func(a, b sframe.Function) int { return cmp.Compare(a.Start, b.Start) })
		b, err := sframe.Encode(funcs, sframe.Options{Version: v, ABI: tr.ABI, Order: ef.ByteOrder, Addr: index * fdeSize,
			PCRel: true, Sort: true, CFAFixedFP: tr.CFAFixedFP, CFAFixedRA: tr.CFAFixedRA})
		if err != nil {
			return fmt.Errorf("%s: encoding V%d: %v", path, v, err)
		}
		index += uint64(len(funcs))
		if res.size == 0 {
			res.size = sframe.HeaderSize
		}
		res.size += uint64(len(b)) - sframe.HeaderSize
		for i := range funcs {
			if !inPLT(funcs[i].Start, plts) {
				res.codeBytes += uint64(funcs[i].Size)
			}
		}
		// Read back one function at a time: the histograms need each
		// FRE's encoding.
		tb, err := sframe.Open(b, 0)
		if err != nil {
			return fmt.Errorf("%s: decoding our own V%d section: %v", path, v, err)
		}
		res.funcs += tb.NumFDEs()
		for i := 0; i < tb.NumFDEs(); i++ {
			if err := tb.FDE(i, &d); err != nil {
				return fmt.Errorf("%s: decoding our own V%d section: %v", path, v, err)
			}
			if int(d.FREType) < 3 {
				res.freType[d.FREType]++
			}
			res.fres += len(d.FREs)
			for j := range d.FREs {
				switch d.FREs[j].WordSize {
				case 1:
					res.wordSize[0]++
				case 2:
					res.wordSize[1]++
				case 4:
					res.wordSize[2]++
				}
			}
		}
		return nil
	}
	lo := 0
	var reach uint64 // the furthest end of the FDEs before the cut
	for i, f := range fdes {
		if !used(f) {
			continue
		}
		start, size := rangeOf(f)
		if i-lo >= chunkFDEs && start >= reach {
			if err := piece(lo, i, start, false); err != nil {
				return nil, err
			}
			lo = i
		}
		reach = max(reach, start+size)
	}
	if err := piece(lo, len(fdes), 0, true); err != nil {
		return nil, err
	}
	return res, nil
}
