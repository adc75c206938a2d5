package report

import (
	"debug/elf"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

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

// translateEncode translates the file's CFI functions (src) and PLTs in
// SFrame version v into an encoder, as a conversion does, and measures
// the section: its size, and the counts and histograms of its functions
// and rows, read back one function at a time. Memory holds one function's rows and the
// section's bytes, as in a conversion.
func translateEncode(ef *elf.File, src translate.Source, plts []translate.PLT, v uint8) (*encoded, error) {
	t, err := translate.New(translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, PLTs: plts}, translate.Options{Version: v})
	if err != nil {
		return nil, err
	}
	id, fixedFP, fixedRA := t.ABI()
	enc, err := sframe.NewEncoder(sframe.Options{Version: v, ABI: id, Order: ef.ByteOrder,
		PCRel: true, Sort: true, CFAFixedFP: fixedFP, CFAFixedRA: fixedRA})
	if err != nil {
		return nil, err
	}
	res := &encoded{skipped: map[string]int{}}
	tr, err := t.Translate(src, func(fn *sframe.Function) error {
		if !inPLT(fn.Start, plts) {
			res.codeBytes += uint64(fn.Size)
		}
		return enc.Add(fn)
	})
	if err != nil {
		return nil, fmt.Errorf("encoding V%d: %w", v, err)
	}
	b, err := enc.Section(0)
	if err != nil {
		return nil, fmt.Errorf("encoding V%d: %w", v, err)
	}
	for _, d := range tr.Diags {
		if d.Skipped {
			res.skipped[string(d.Reason)]++
		}
	}
	if err := res.count(b); err != nil {
		return nil, fmt.Errorf("encoding V%d: %w", v, err)
	}
	res.converted = tr.Converted
	return res, nil
}

// count sets the size, counts and histograms of section b.
func (res *encoded) count(b []byte) error {
	tb, err := sframe.Open(b, 0)
	if err != nil {
		return err
	}
	res.size, res.funcs, res.fres = uint64(len(b)), int(tb.Header.NumFDEs), int(tb.Header.NumFREs)
	var d sframe.FDE
	for i := range int(tb.Header.NumFDEs) {
		if err := tb.FDE(i, &d); err != nil {
			return err
		}
		res.freType[d.FREType]++
		for j := range d.FREs {
			res.wordSize[d.FREs[j].WordSize/2]++ // 1, 2, 4 bytes
		}
	}
	return nil
}
