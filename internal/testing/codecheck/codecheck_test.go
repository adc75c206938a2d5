package codecheck

import (
	"debug/elf"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
)

// corpus is testdata/fromcode, built by its build.sh.
var corpus = filepath.Join("..", "..", "..", "testdata", "fromcode")

func readCorpus(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpus, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// standInBuild is a stand-in for codeentry.Load: the executable sections
// and the function symbols, nothing more.
func standInBuild(f *elfread.File) (*codeflow.Code, error) {
	c := &codeflow.Code{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder,
		NoReturn: func(uint64) bool { return false }}
	for _, s := range f.ELF.Sections {
		if s.Flags&elf.SHF_EXECINSTR == 0 || s.Type != elf.SHT_PROGBITS {
			continue
		}
		b, err := s.Data()
		if err != nil {
			return nil, err
		}
		c.Text = append(c.Text, codeflow.Range{Addr: s.Addr, Data: b})
	}
	sort.Slice(c.Text, func(i, j int) bool { return c.Text[i].Addr < c.Text[j].Addr })
	syms, _ := f.ELF.Symbols()
	seen := map[uint64]bool{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && !seen[s.Value] {
			seen[s.Value] = true
			c.Entries = append(c.Entries, codeflow.Entry{Addr: s.Value, End: s.Value + s.Size})
		}
	}
	sort.Slice(c.Entries, func(i, j int) bool { return c.Entries[i].Addr < c.Entries[j].Addr })
	return c, nil
}

// oracle is a stand-in for codeflow.Analyze that gives, for each FDE, the
// rows its CFI says, passed through change (which may make them wrong);
// an FDE whose CFA is anywhere but SP or FP is left out (code-cfa-lost),
// as the analysis must leave it out.
func oracle(t *testing.T, elfBytes []byte, change func(c *codeflow.Code, f *codeflow.Func)) func(*codeflow.Code, func(codeflow.Func), func(codeflow.Skip)) {
	return func(c *codeflow.Code, emit func(codeflow.Func), skip func(codeflow.Skip)) {
		a, err := abiOf(c.Machine)
		if err != nil {
			t.Fatal(err)
		}
		refs, err := reference(elfBytes, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range refs {
			f, bad := fromCFI(a, &ref)
			if bad {
				skip(codeflow.Skip{Start: ref.start, End: ref.end, Entry: ref.start, Reason: codeflow.ReasonCFALost})
				continue
			}
			if change != nil {
				change(c, &f)
			}
			emit(f)
		}
	}
}

// fromCFI is the Func the CFI of ref says; bad when a row cannot be said.
func fromCFI(a abi, ref *refFunc) (codeflow.Func, bool) {
	f := codeflow.Func{Start: ref.start, End: ref.end, Entry: ref.start}
	saved := func(r cfi.Rule) codeflow.Saved {
		if r.Kind == cfi.Offset {
			return codeflow.Saved{Where: codeflow.OnStack, Off: r.Offset}
		}
		return codeflow.Saved{Where: codeflow.InReg}
	}
	for _, r := range ref.rows {
		row := codeflow.Row{PC: r.loc, CFAOff: r.cfaOff, RASigned: r.mangled}
		switch {
		case r.cfaExpr:
			return f, true
		case r.cfaReg == a.sp:
			row.Base, row.SP = codeflow.BaseSP, codeflow.Val{Off: -r.cfaOff, Known: true}
		case r.cfaReg == a.fp:
			row.Base, row.FPVal = codeflow.BaseFP, codeflow.Val{Off: -r.cfaOff, Known: true}
		default:
			return f, true
		}
		row.FP, row.RA = saved(r.fp), saved(r.ra)
		f.Rows = append(f.Rows, row)
	}
	return f, false
}

// nextInst is the instruction start after pc.
func nextInst(c *codeflow.Code, pc uint64) uint64 {
	return pc + uint64(instLen(c.Machine, text(c, pc)))
}

func TestCheckCatchesEachField(t *testing.T) {
	each := func(fn func(r *codeflow.Row)) func(*codeflow.Code, *codeflow.Func) {
		return func(_ *codeflow.Code, f *codeflow.Func) {
			for i := range f.Rows {
				fn(&f.Rows[i])
			}
		}
	}
	tests := []struct {
		name   string
		file   string
		change func(*codeflow.Code, *codeflow.Func)
		want   string // the one field wrong; "" for none
		cross  bool   // some CFA judged through the other pointer
	}{
		{"right x86-64", "x86_64-cfi", nil, "", false},
		{"right aarch64", "aarch64-cfi", nil, "", false},
		{"CFA offset", "x86_64-cfi", each(func(r *codeflow.Row) {
			r.CFAOff += 8
			r.SP.Off -= 8
			r.FPVal.Off -= 8
		}), FieldCFA, false},
		// CFI says FP+k after the frame is set up; a row from SP that does
		// not know FP cannot be judged: it is counted, not passed.
		{"other pointer, unknown", "x86_64-cfi", each(func(r *codeflow.Row) {
			if r.Base == codeflow.BaseFP {
				r.Base, r.SP, r.FPVal = codeflow.BaseSP, codeflow.Val{Off: -r.CFAOff, Known: true}, codeflow.Val{}
			}
		}), "", false},
		{"FP offset", "x86_64-cfi", each(func(r *codeflow.Row) {
			if r.FP.Where == codeflow.OnStack {
				r.FP.Off -= 8
			}
		}), FieldFP, false},
		{"FP saved said in its register", "aarch64-cfi", each(func(r *codeflow.Row) {
			r.FP = codeflow.Saved{Where: codeflow.InReg}
		}), FieldFP, false},
		{"RA offset", "x86_64-cfi", each(func(r *codeflow.Row) { r.RA.Off = -16 }), FieldRA, false},
		{"RA in LR said on the stack", "aarch64-cfi", each(func(r *codeflow.Row) {
			if r.RA.Where == codeflow.InReg {
				r.RA = codeflow.Saved{Where: codeflow.OnStack, Off: -8}
			}
		}), FieldRA, false},
		{"RA signing", "aarch64-cfi", each(func(r *codeflow.Row) { r.RASigned = !r.RASigned }), FieldSigned, false},
		{"row contradicts itself", "x86_64-cfi", each(func(r *codeflow.Row) {
			if r.Base == codeflow.BaseSP {
				r.SP.Off--
			}
		}), FieldRow, false},
		{"row a instruction late", "x86_64-cfi", func(c *codeflow.Code, f *codeflow.Func) {
			for i := 1; i < len(f.Rows); i++ {
				if n := nextInst(c, f.Rows[i].PC); (i+1 == len(f.Rows) || n < f.Rows[i+1].PC) && n < f.End {
					f.Rows[i].PC = n
				}
			}
		}, FieldCFA, false},
		{"row inside an instruction", "x86_64-cfi", func(c *codeflow.Code, f *codeflow.Func) {
			r := f.Rows[len(f.Rows)-1]
			if n := nextInst(c, r.PC); n-r.PC > 1 && n < f.End {
				r.PC++
				f.Rows = append(f.Rows, r)
			}
		}, FieldRow, false},
		// CFI says SP+k; the row counts from FP, whose distance it does not
		// know, but knows SP: judged through SP.
		{"other pointer, right", "x86_64-cfi", each(func(r *codeflow.Row) {
			if r.Base == codeflow.BaseSP {
				r.Base, r.CFAOff = codeflow.BaseFP, 1000
			}
		}), "", true},
		{"other pointer, wrong", "x86_64-cfi", each(func(r *codeflow.Row) {
			if r.Base == codeflow.BaseSP {
				r.Base, r.CFAOff = codeflow.BaseFP, 1000
				r.SP.Off += 16
			}
		}), FieldCFA, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := readCorpus(t, tt.file)
			res, err := Check(b, Options{Build: standInBuild, Analyze: oracle(t, b, tt.change)})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			fields := map[string]bool{}
			for _, w := range res.Wrong {
				fields[w.Field] = true
			}
			switch {
			case tt.want == "" && len(res.Wrong) > 0:
				t.Errorf("%d wrong, want none", len(res.Wrong))
			case tt.want != "" && (len(fields) != 1 || !fields[tt.want]):
				t.Errorf("wrong fields %v, want only %s", fields, tt.want)
			}
			if res.Judged == 0 || res.Judged < res.PCs*3/4 {
				t.Errorf("judged %d of %d PCs", res.Judged, res.PCs)
			}
			if n := res.NotJudged[CFAOtherBase]; n == 0 && strings.HasPrefix(tt.name, "other pointer, unknown") {
				t.Errorf("none not judged for the other pointer")
			}
			if got := res.Cross > 0; got != tt.cross {
				t.Errorf("%d judged through the other pointer, want some: %v", res.Cross, tt.cross)
			}
		})
	}
}

// TestCover: what became of each function's instructions when the
// analysis describes part of one, none of another, and leaves one out.
func TestCover(t *testing.T) {
	b := readCorpus(t, "x86_64-cfi")
	base := oracle(t, b, nil)
	ef, err := elfread.NewFileBytes(b, "")
	if err != nil {
		t.Fatal(err)
	}
	syms := funcSyms(t, ef.ELF)
	half, gone := syms["push_pop"].Value, syms["fp_frame"].Value
	analyze := func(c *codeflow.Code, emit func(codeflow.Func), skip func(codeflow.Skip)) {
		base(c, func(f codeflow.Func) {
			switch f.Start {
			case gone:
				return
			case half:
				f.End = f.Rows[1].PC // reached as far as its first push
				f.Rows = f.Rows[:1]
			}
			emit(f)
		}, skip)
	}
	res, err := Check(b, Options{Build: standInBuild, Analyze: analyze})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	want := map[string]string{"push_pop": OutcomePartly, "fp_frame": OutcomeNoEntry,
		"realign_nofp": string(codeflow.ReasonCFALost), "leaf_add": OutcomeDescribed}
	for _, f := range res.Functions {
		if w, ok := want[f.Name]; ok && f.Outcome != w {
			t.Errorf("%s: %s, want %s", f.Name, f.Outcome, w)
		}
	}
	sum := res.Described
	for _, n := range res.Left {
		sum += n
	}
	if sum != res.Covered || res.Left[Unreached] == 0 || res.Left[OutcomeNoEntry] == 0 || len(res.Wrong) > 0 {
		t.Errorf("covered %d, described %d, left %v, %d wrong", res.Covered, res.Described, res.Left, len(res.Wrong))
	}
}
