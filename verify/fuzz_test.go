package verify

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// FuzzCommandPath runs what the commands run on one ELF input: convert
// (elfread, cfi, translate, sframe encode, ELF writer), then dump's and
// verify's path on the input and on the converted output (decode the
// .sframe, load the CFI, check). Nothing may panic, and a converted output
// must read back: an ELF file with a .sframe that decodes.
func FuzzCommandPath(f *testing.F) {
	for _, n := range []string{"v3-x86_64-O2.o", "v2-aarch64-exe", "v3-x86_64-lib-ibt.so", "v1-x86_64-lib-lazy.so"} {
		if b, err := os.ReadFile(filepath.Join("../testdata/sframe", n)); err == nil && len(b) < 64<<10 {
			f.Add(b)
		}
	}
	if b, err := os.ReadFile("../testdata/example/hello"); err == nil {
		f.Add(b)
	}
	f.Add(hostile.PCMaskFunc())
	f.Add(hostile.ManyRows(100))
	f.Add(hostile.Bomb(".debug_frame", hostile.Zstd, 1000, 2000))
	f.Add(hostile.HugeSegment(elf.PT_GNU_EH_FRAME))
	f.Add(hostile.NoShstrtab())
	f.Fuzz(func(t *testing.T, in []byte) {
		checkBytes(in)
		checkReader(t, in)
		res, out, err := convertBytes("in", in, convert.Options{Force: true})
		if err != nil {
			return
		}
		ef, err := elfread.NewFile(bytes.NewReader(out), "out")
		if err != nil {
			t.Fatalf("converted output does not read back: %v", err)
		}
		if res.Members == 0 && ef.ELF.Type != elf.ET_REL {
			es, err := ef.SFrame()
			if err != nil {
				t.Fatalf("converted output has no .sframe: %v", err)
			}
			if _, err := sfsection.Decode(es.Data, es.Addr); err != nil {
				t.Fatalf("converted .sframe does not decode: %v", err)
			}
		}
		checkBytes(out)
		checkReader(t, out)
	})
}

// checkBytes is verify's path: decode .sframe, load CFI, compare.
func checkBytes(in []byte) {
	f, err := elfread.NewFile(bytes.NewReader(in), "x")
	if err != nil {
		return
	}
	es, err := f.SFrame()
	if err != nil {
		return
	}
	tb, err := sframe.Open(es.Data, es.Addr)
	if err != nil {
		return
	}
	l, err := loadCFI(f)
	if err != nil {
		return
	}
	check(input{Machine: f.ELF.Machine, SFrame: tb, Tables: l.Tables, Symbol: f.Symbolizer()})
}

// checkReader is the verify command's path (the section read one function
// at a time, the CFI executed on demand); it must find what check's path
// finds.
func checkReader(t *testing.T, in []byte) {
	f, err := elfread.NewFile(bytes.NewReader(in), "x")
	if err != nil {
		return
	}
	es, err := f.SFrame()
	if err != nil {
		return
	}
	tb, err := sframe.Open(es.Data, es.Addr)
	if err != nil || tb.Check() != nil {
		return
	}
	l, err := loadCFI(f)
	if err != nil {
		return
	}
	ix := l.File
	want := check(input{Machine: f.ELF.Machine, SFrame: tb, Tables: l.Tables})
	got := check(input{Machine: f.ELF.Machine, SFrame: tb, Stream: ix})
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("indexed CFI: %+v\nevery table: %+v", got, want)
	}
}
