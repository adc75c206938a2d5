// Package allfuncs translates every table internal/alltables executed at
// once and keeps the SFrame functions: what the conversion of a
// relocatable object needs (it places and sorts them before encoding),
// and the reference the tests hold the one-FDE-at-a-time conversion to.
// It is apart from internal/alltables, which translate's own tests import,
// because it imports translate; and apart from convert, its one importer
// outside tests, because internal/report's tests hold report's figures to
// its Section too.
package allfuncs

import (
	"slices"

	"github.com/cfi2sframe/cfi2sframe/internal/callsite"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Translate translates t's PLTs and then the functions of tables (in
// start order, alltables.Sorted), as a conversion does, and returns a copy
// of every function, in the order translate gave them, with the summed
// result. pad (nil for none) is a linked file's ReturnPad, as a
// conversion applies it.
func Translate(t *translate.Translator, tables []*cfi.Table, pad *callsite.ReturnPad) ([]sframe.Function, *translate.Result, error) {
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
	fres, err := t.Functions(alltables.Sorted(tables), pad.Wrap(keep))
	if err != nil {
		return nil, nil, err
	}
	res.Add(fres)
	return funcs, res, nil
}

// Section is Translate encoded in one sframe.Encode, the reference
// section the streamed conversion is held to: o says the version, byte
// order, address and flags; the ABI and its fixed offsets are t's; pad
// is as for Translate.
func Section(t *translate.Translator, tables []*cfi.Table, o sframe.Options, pad *callsite.ReturnPad) ([]byte, *translate.Result, error) {
	funcs, res, err := Translate(t, tables, pad)
	if err != nil {
		return nil, nil, err
	}
	o.ABI, o.CFAFixedFP, o.CFAFixedRA = t.ABI()
	b, err := sframe.Encode(funcs, o)
	return b, res, err
}
