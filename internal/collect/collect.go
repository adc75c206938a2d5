// Package collect translates every table of a file at once and keeps the
// functions: what the conversion of a relocatable object needs (it places
// and sorts them before encoding), and the reference the tests hold the
// one-FDE-at-a-time conversion to. (It is apart from internal/cfiload,
// which translate's own tests import, because it imports translate.)
package collect

import (
	"slices"

	"github.com/cfi2sframe/cfi2sframe/internal/callsite"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/cfiload"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Functions translates t's PLTs and then the functions of tables (in
// start order, cfiload.Tables), as a conversion does, and returns a copy
// of every function, in the order translate gave them, with the summed
// result. pad (nil for none) is a linked file's ReturnPad, as a
// conversion applies it.
func Functions(t *translate.Translator, tables []*cfi.Table, pad *callsite.ReturnPad) ([]sframe.Function, *translate.Result, error) {
	var funcs []sframe.Function
	keep := func(fn *sframe.Function) error {
		c := *fn
		c.Rows = slices.Clone(fn.Rows)
		funcs = append(funcs, c)
		return nil
	}
	res, err := t.PLTs(keep)
	if err != nil {
		return nil, nil, err
	}
	fres, err := t.Functions(cfiload.Tables(tables), pad.Wrap(keep))
	if err != nil {
		return nil, nil, err
	}
	res.Add(fres)
	return funcs, res, nil
}

// Section is Functions encoded in one sframe.Encode, the reference
// section the streamed conversion is held to: o says the version, byte
// order, address and flags; the ABI and its fixed offsets are t's; pad
// is as for Functions.
func Section(t *translate.Translator, tables []*cfi.Table, o sframe.Options, pad *callsite.ReturnPad) ([]byte, *translate.Result, error) {
	funcs, res, err := Functions(t, tables, pad)
	if err != nil {
		return nil, nil, err
	}
	o.ABI, o.CFAFixedFP, o.CFAFixedRA = t.ABI()
	b, err := sframe.Encode(funcs, o)
	return b, res, err
}
