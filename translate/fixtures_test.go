package translate

import (
	"cmp"
	"debug/elf"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/alltables"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// eachLinked calls fn with every linked (not ET_REL) x86-64 and AArch64
// fixture of testdata/sframe and, with system, this machine's ls and libc
// when they are there; it closes each file after fn and returns how many
// it opened.
func eachLinked(t *testing.T, system bool, fn func(name string, f *elfread.File)) int {
	t.Helper()
	paths, err := filepath.Glob("../testdata/sframe/v*-*")
	if err != nil {
		t.Fatal(err)
	}
	if system {
		paths = append(paths, "/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6")
	}
	n := 0
	for _, p := range paths {
		name := filepath.Base(p)
		if strings.HasSuffix(name, ".objdump") || strings.Contains(name, "s390x") {
			continue
		}
		f, err := elfread.Open(p)
		if err != nil {
			if strings.HasPrefix(p, "/usr/") {
				continue // not on this machine
			}
			t.Fatal(err)
		}
		if f.ELF.Type != elf.ET_REL {
			n++
			fn(name, f)
		}
		f.Close()
	}
	return n
}

// translated is a translation with every function it emitted kept.
type translated struct {
	*Result
	Funcs   []sframe.Function // sorted by start address (stably), as an encoder's index has them
	emitted []uint64          // their starts in the order emitted
	// The Translator's ABI and fixed offsets, for the encoder.
	ABI                    sframe.ABI
	CFAFixedFP, CFAFixedRA int8
}

// translateAll translates tables (in any order: alltables.Sorted sorts them) and
// keeps every function.
func translateAll(in Input, tables []*cfi.Table, o Options) (*translated, error) {
	var funcs []sframe.Function
	t, err := New(in, o)
	if err != nil {
		return nil, err
	}
	res, err := translateAllOf(t, alltables.Sorted(tables), collect(&funcs))
	if err != nil {
		return nil, err
	}
	tr := &translated{Result: res, Funcs: funcs}
	tr.ABI, tr.CFAFixedFP, tr.CFAFixedRA = t.ABI()
	for _, fn := range funcs {
		tr.emitted = append(tr.emitted, fn.Start)
	}
	slices.SortStableFunc(tr.Funcs, func(a, b sframe.Function) int { return cmp.Compare(a.Start, b.Start) })
	return tr, nil
}
