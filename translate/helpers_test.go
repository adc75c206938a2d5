package translate

import (
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// translateFile is New, PLTs and Functions, for the tests.
func translateFile(in Input, src Source, o Options, emit func(*sframe.Function) error) (*Result, error) {
	t, err := New(in, o)
	if err != nil {
		return nil, err
	}
	return translateAllOf(t, src, emit)
}

// translateAllOf is t's PLTs, then its Functions over src, their Results
// added: a whole file on one goroutine.
func translateAllOf(t *Translator, src Source, emit func(*sframe.Function) error) (*Result, error) {
	res, err := t.PLTs(emit)
	if err != nil {
		return nil, err
	}
	fres, err := t.Functions(src, emit)
	if err != nil {
		return nil, err
	}
	res.Add(fres)
	return res, nil
}

// openCFI opens f's call-frame information as a conversion does.
func openCFI(t testing.TB, f *elfread.File) *cfi.File {
	t.Helper()
	cf, err := cfi.Open(f.ELF)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}
