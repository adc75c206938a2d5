package translate

import (
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// translateFile is New and Translate, for the tests.
func translateFile(in Input, src Source, o Options, emit func(*sframe.Function) error) (*Result, error) {
	t, err := New(in, o)
	if err != nil {
		return nil, err
	}
	return t.Translate(src, emit)
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
