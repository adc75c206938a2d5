package codeflow

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/isa"
)

// cfiTable is one FDE's rows, kept for the comparison.
type cfiTable struct {
	start, end uint64
	rows       []cfi.Row
}

// tally counts one build's comparison.
type tally struct {
	compared, wrong, unjudged int
	missing                   map[string]int // CFI PCs without a row, by why
}

// TestAgainstCFI compiles testdata/flow.c with gcc and clang at several
// levels, with and without frame pointers, analyses each FDE's function
// as if it had no CFI, and holds every row given to the compiler's CFI.
func TestAgainstCFI(t *testing.T) {
	var total tally
	total.missing = map[string]int{}
	ran := false
	for _, cc := range []string{"gcc", "clang"} {
		if _, err := exec.LookPath(cc); err != nil {
			t.Logf("%s not found", cc)
			continue
		}
		for _, opt := range []string{"-O0", "-O2", "-O3", "-Os"} {
			for _, fp := range []string{"-fno-omit-frame-pointer", "-fomit-frame-pointer"} {
				bin := buildC(t, cc, opt, fp)
				got := compareCFI(t, bin, cc+" "+opt+" "+fp)
				ran = true
				total.compared += got.compared
				total.wrong += got.wrong
				total.unjudged += got.unjudged
				for k, v := range got.missing {
					total.missing[k] += v
				}
			}
		}
	}
	if !ran {
		t.Skip("no C compiler")
	}
	t.Logf("all builds: %d PCs compared, %d wrong, %d not judged; CFI PCs without rows: %v",
		total.compared, total.wrong, total.unjudged, total.missing)
	if total.compared < 500 {
		t.Errorf("only %d PCs compared", total.compared)
	}
}

func buildC(t *testing.T, cc, opt, fp string) string {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "flow")
	args := []string{opt, fp, "-fpie", "-fasynchronous-unwind-tables", "-nostdlib", "-static", "-Wl,-e,main",
		"-o", out, filepath.Join("testdata", "flow.c"), filepath.Join("testdata", "stubs.s")}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, b)
	}
	return out
}

// compareCFI analyses bin with its FDEs as entries and compares each row.
func compareCFI(t *testing.T, bin, name string) tally {
	t.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	f, err := cfi.OpenBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	var tables []cfiTable
	ctx := f.Context(f.Entries())
	for {
		fde, err := ctx.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		tb := ctx.Table()
		if tb == nil {
			t.Fatalf("%s: FDE at %#x does not execute", name, fde.Start)
		}
		rows := make([]cfi.Row, len(tb.Rows))
		for i, r := range tb.Rows {
			rows[i] = r
			rows[i].Regs = append([]cfi.RegRule(nil), r.Regs...)
		}
		tables = append(tables, cfiTable{fde.Start, fde.End(), rows})
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i].start < tables[j].start })
	im := loadELF(t, bin)
	im.code.Entries = im.code.Entries[:0]
	for _, tb := range tables {
		im.code.Entries = append(im.code.Entries, Entry{Addr: tb.start, End: tb.end, Source: FromSymbol})
	}
	im.code.NoReturn = func(a uint64) bool {
		return a == im.syms["abort"] || a == im.syms["die"] || a == im.syms["__stack_chk_fail"]
	}
	res := analyze(im.code)
	checkNoOverlap(t, res.funcs)
	got := tally{missing: map[string]int{}}
	covered := map[uint64]bool{}
	for _, fn := range res.funcs {
		for _, pc := range insns(im, fn.Start, fn.End) {
			covered[pc] = true
			tb := tableAt(tables, pc)
			if tb == nil {
				continue
			}
			r := res.rowAt(pc)
			k := sort.Search(len(tb.rows), func(k int) bool { return tb.rows[k].Loc > pc }) - 1
			switch judge(r, &tb.rows[k]) {
			case verdictRight:
				got.compared++
			case verdictWrong:
				got.compared++
				got.wrong++
				t.Errorf("%s: at %#x (FDE %#x): we say %s (sp %v fp %v), CFI says cfa r%d%+d, rbp %+v",
					name, pc, tb.start, short(r), r.SP, r.FPVal, tb.rows[k].CFA.Reg, tb.rows[k].CFA.Offset, tb.rows[k].Rule(6))
			default:
				got.unjudged++
			}
		}
	}
	why := map[uint64]string{}
	for _, s := range res.skips {
		why[s.Entry] = string(s.Reason)
		t.Logf("%s: left out %#x: %s at %#x: %s", name, s.Entry, s.Reason, s.At, s.Detail)
	}
	for _, tb := range tables {
		for _, pc := range insns(im, tb.start, tb.end) {
			if !covered[pc] {
				w, ok := why[tb.start]
				if !ok {
					w = "unreached"
					if in, err := isa.AMD64(im.code.Text[0].Data[pc-im.code.Text[0].Addr:]); err == nil && in.Op == x86asm.NOP {
						w = "unreached padding"
					} else {
						t.Logf("%s: unreached %#x in FDE %#x", name, pc, tb.start)
					}
				}
				got.missing[w]++
			}
		}
	}
	t.Logf("%s: %d FDEs, %d PCs compared, %d wrong, %d not judged, without rows %v",
		name, len(tables), got.compared, got.wrong, got.unjudged, got.missing)
	return got
}

type verdict int

const (
	verdictRight verdict = iota
	verdictWrong
	verdictUnjudged
)

// judge holds our row to the CFI's: the CFA (from the other base through
// what we knew of it), the caller's rbp, the return address.
func judge(r *Row, c *cfi.Row) verdict {
	if c.CFA.Kind != cfi.CFARegOffset || (c.CFA.Reg != amdRSP && c.CFA.Reg != amdRBP) {
		return verdictUnjudged
	}
	var ours Val // the CFI's base register as we know it
	if c.CFA.Reg == amdRSP {
		ours = r.SP
	} else {
		ours = r.FPVal
	}
	wantBase := BaseSP
	if c.CFA.Reg == amdRBP {
		wantBase = BaseFP
	}
	switch {
	case r.Base == wantBase && r.CFAOff != c.CFA.Offset:
		return verdictWrong
	case r.Base != wantBase && !ours.Known:
		return verdictUnjudged
	case r.Base != wantBase && -ours.Off != c.CFA.Offset:
		return verdictWrong
	}
	switch fp := c.Rule(amdRBP); fp.Kind {
	case cfi.Offset:
		// After pop %rbp compilers leave the rule to the slot, which still
		// holds the value: in rbp again, the slot popped, both are right.
		popped := r.FP.Where == InReg && r.SP.Known && r.SP.Off > fp.Offset
		if r.FP != (Saved{Where: OnStack, Off: fp.Offset}) && !popped {
			return verdictWrong
		}
	case cfi.SameValue:
		// clang gives the slot of a callee-saved rbp only after its last
		// push: until then rbp and its slot both hold the value, which
		// the row cannot show.
		if r.FP.Where == OnStack {
			return verdictUnjudged
		}
		if r.FP.Where != InReg {
			return verdictWrong
		}
	default:
		return verdictUnjudged
	}
	if ra := c.Rule(16); ra.Kind != cfi.Offset || ra.Offset != -8 || r.RA != (Saved{Where: OnStack, Off: -8}) {
		return verdictWrong
	}
	return verdictRight
}

func tableAt(ts []cfiTable, pc uint64) *cfiTable {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].end > pc })
	if i < len(ts) && ts[i].start <= pc {
		return &ts[i]
	}
	return nil
}

// insns gives the instruction starts in [lo, hi), decoded one after another.
func insns(im *image, lo, hi uint64) []uint64 {
	w := &walk{code: im.code}
	var out []uint64
	for pc := lo; pc < hi; {
		b := w.bytes(pc)
		if b == nil {
			break
		}
		out = append(out, pc)
		n := 4
		if !isEndbr(b) {
			in, err := isa.AMD64(b)
			if err != nil {
				break
			}
			n = isa.LenAMD64(in, b)
		}
		pc += uint64(n)
	}
	return out
}
