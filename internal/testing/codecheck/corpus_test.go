package codecheck

import (
	"debug/elf"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// leftOut are the corpus's functions the analysis must leave out whole,
// and why.
var leftOut = map[string]codeflow.Reason{
	// the old SP is kept only in %r11 while SP is realigned
	"realign_nofp": codeflow.ReasonCFALost,
}

// TestCorpus judges the analysis (Linked: codeentry.Load and
// codeflow.Analyze) on every function of testdata/fromcode: not one
// wrong row, and the functions that must be left out left out.
func TestCorpus(t *testing.T) {
	for _, name := range []string{"x86_64-cfi", "aarch64-cfi"} {
		t.Run(name, func(t *testing.T) {
			judgeCorpus(t, readCorpus(t, name), Linked())
		})
	}
}

// TestCorpusOracle runs TestCorpus's judgement with the CFI's own rows
// (the oracle stand-in): what a right analysis must pass.
func TestCorpusOracle(t *testing.T) {
	for _, name := range []string{"x86_64-cfi", "aarch64-cfi"} {
		t.Run(name, func(t *testing.T) {
			b := readCorpus(t, name)
			judgeCorpus(t, b, Options{Build: standInBuild, Analyze: oracle(t, b, nil)})
		})
	}
}

func judgeCorpus(t *testing.T, b []byte, opt Options) {
	t.Helper()
	res, err := Check(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if len(res.Wrong) > 0 {
		t.Errorf("%d wrong fields at %d PCs", len(res.Wrong), res.WrongPCs())
	}
	if res.Judged == 0 {
		t.Error("nothing judged")
	}
	for _, f := range res.Functions {
		if why, ok := leftOut[f.Name]; ok && (f.Described > 0 || f.Outcome != string(why)) {
			t.Errorf("%s: %s, %d of %d instructions described; want it left out: %s", f.Name, f.Outcome, f.Described, f.PCs, why)
		}
	}
}

// funcSyms are the sizes of a file's function symbols, by name.
func funcSyms(t *testing.T, f *elf.File) map[string]elf.Symbol {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]elf.Symbol{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			m[s.Name] = s
		}
	}
	return m
}

// TestNoCFIHasNoFDEs: the -nocfi files hold the same functions as the
// -cfi ones, and no FDE covers any of them, where in the -cfi files an
// FDE covers each (but _start, written without CFI).
func TestNoCFIHasNoFDEs(t *testing.T) {
	for _, arch := range []string{"x86_64", "aarch64"} {
		t.Run(arch, func(t *testing.T) {
			var syms [2]map[string]elf.Symbol
			for i, v := range []string{"-cfi", "-nocfi"} {
				b := readCorpus(t, arch+v)
				ef, err := elfread.NewFileBytes(b, arch+v)
				if err != nil {
					t.Fatal(err)
				}
				syms[i] = funcSyms(t, ef.ELF)
				cf, err := cfi.OpenBytes(b)
				if err != nil {
					t.Fatal(err)
				}
				covered := func(pc uint64) bool {
					for _, e := range cf.Entries() {
						if pc >= e.Start && pc < e.Start+e.Size {
							return true
						}
					}
					return false
				}
				for name, s := range syms[i] {
					if want := v == "-cfi" && name != "_start"; covered(s.Value) != want {
						t.Errorf("%s%s: %s at %#x covered by an FDE: %v, want %v", arch, v, name, s.Value, !want, want)
					}
				}
			}
			if len(syms[0]) < 10 || len(syms[0]) != len(syms[1]) {
				t.Fatalf("%d functions with CFI, %d without", len(syms[0]), len(syms[1]))
			}
			for name, s := range syms[0] {
				if o, ok := syms[1][name]; !ok || o.Size != s.Size {
					t.Errorf("%s: %d bytes with CFI, %d without (present: %v)", name, s.Size, o.Size, ok)
				}
			}
		})
	}
}
