package report

import (
	"fmt"
	"github.com/cfi2sframe/cfi2sframe/internal/coverage"
	"math/bits"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// encoded is what the report takes from one conversion of a whole file.
type encoded struct {
	size  uint64 // bytes of the section
	funcs int    // its functions
	fres  int    // their FREs, function by function
	// The FRE blocks (V3: attribute and FREs) the section holds, their
	// FREs, and its size were every function to have its own block
	// (unshared; the same FRE types): what sharing saved is unshared -
	// size.
	blocks    int
	heldFREs  int
	unshared  uint64
	freType   [3]int          // functions per FRE type (start fields of 1, 2 and 4 bytes)
	wordSize  [3]int          // FREs per data-word size
	converted int             // functions from CFI (translate.Result.Converted)
	codeBytes uint64          // bytes of the functions outside PLT sections
	spans     []coverage.Span // every function's range, PLT sections included
	skipped   map[string]int
}

// convertV converts the file in SFrame version v as the command does
// (convert: the one conversion path), in memory, and measures the
// section. The layout is only planned (with the fragile one where the
// standard one cannot be made), and SFrame data the file has is replaced:
// the section is what cfi2sframe would write.
func convertV(f *convert.File, plts []translate.PLT, v uint8, o Options) (*encoded, error) {
	res, err := f.Convert(convert.Options{Version: v, Force: true, FragileLayout: true, FromCode: o.FromCode, DebugDirs: o.DebugDirs})
	if err != nil {
		return nil, err
	}
	e, err := figures(res.SFrame, res.Addr, res.Translate, plts)
	if err != nil {
		return nil, fmt.Errorf("encoding V%d: %w", v, err)
	}
	return e, nil
}

// figures measures an encoded section (at addr) and its translation: its
// size, its functions and FREs, one function at a time, the FRE-type and
// data-word-size histograms, and the code bytes of its functions outside
// the PLT sections.
func figures(sec []byte, addr uint64, tr *translate.Result, plts []translate.PLT) (*encoded, error) {
	t, err := sframe.Open(sec, addr)
	if err != nil {
		return nil, err
	}
	e := &encoded{size: uint64(len(sec)), funcs: int(t.Header.NumFDEs), converted: tr.Converted, skipped: map[string]int{}}
	for _, d := range tr.Diags {
		if d.Skipped {
			e.skipped[string(d.Reason)]++
		}
	}
	var d sframe.FDE
	attr := uint64(0)
	if t.Header.Version == sframe.Version3 {
		attr = 5 // the attribute before a V3 function's FREs
	}
	seen := map[uint32]bool{}
	var blockBytes uint64
	for i := range int(t.Header.NumFDEs) {
		if err := t.FDE(i, &d); err != nil {
			return nil, err
		}
		n := attr
		for _, f := range d.FREs {
			n += uint64(d.AddrSize) + 1 + uint64(f.NumWords)*uint64(f.WordSize)
		}
		blockBytes += n
		if len(d.FREs) > 0 && !seen[d.FREOff] {
			seen[d.FREOff] = true
			e.blocks++
			e.heldFREs += len(d.FREs)
		}
		if !inPLT(d.Start, plts) {
			e.codeBytes += uint64(d.Size)
		}
		e.spans = append(e.spans, coverage.Span{Lo: d.Start, Hi: d.Start + uint64(d.Size)})
		e.freType[bits.TrailingZeros8(d.AddrSize)]++
		for _, f := range d.FREs {
			e.fres++
			e.wordSize[f.WordSize/2]++
		}
	}
	e.unshared = e.size - uint64(t.Header.FRELen) + blockBytes
	return e, nil
}
