package verify

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func load(t *testing.T, b []byte) (input, *sfsection.Section) {
	t.Helper()
	f, err := elfread.NewFile(bytes.NewReader(b), "x")
	if err != nil {
		t.Fatal(err)
	}
	es, err := f.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	sec, err := sfsection.Decode(es.Data, es.Addr)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(es.Data, es.Addr)
	if err != nil {
		t.Fatal(err)
	}
	l, err := loadCFI(f)
	if err != nil {
		t.Fatal(err)
	}
	return input{Machine: f.ELF.Machine, SFrame: tb, Tables: l.Tables, Symbol: f.Symbolizer()}, sec
}

// encode opens the section funcs encode to with sec's options.
func encode(t *testing.T, sec *sfsection.Section, funcs []sframe.Function) *sframe.Table {
	t.Helper()
	b, err := sframe.Encode(funcs, sec.Options())
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(b, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func count(r *Result, k Kind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// TestCorruptions converts programs, checks that verify accepts the
// result, then damages the section in the ways a buggy converter would
// and expects findings.
func TestCorruptions(t *testing.T) {
	for _, name := range []string{"../testdata/example/hello", "../testdata/sframe/v3-aarch64-exe", "../testdata/sframe/v3-aarch64be-lib.so", "../testdata/sframe/v3-x86_64-lib-ibt.so", "../testdata/sframe/v3-s390x-lib.so"} {
		in, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		_, out, err := convertBytes(name, in, convert.Options{Force: true})
		if err != nil {
			t.Fatal(err)
		}
		input, sec := load(t, out)
		if r := check(input); !r.Agree || r.Functions == 0 {
			t.Fatalf("%s: clean conversion: %+v", name, r.Findings)
		}
		// Pick the function with the most rows.
		funcs := sec.Functions()
		best := 0
		for i := range funcs {
			if len(funcs[i].Rows) > len(funcs[best].Rows) {
				best = i
			}
		}
		d := &funcs[best]
		if len(d.Rows) < 2 || d.Rows[1].RAUndefined {
			t.Fatalf("%s: no function with two rows", name)
		}
		sp, fp := arch.ForSFrameABI(sec.Header.ABI).SP(), arch.ForSFrameABI(sec.Header.ABI).FP()
		mutations := []struct {
			what string
			do   func()
			undo func()
		}{
			{"CFA offset of an FRE", func() { d.Rows[1].CFA.Offset += 8 }, func() { d.Rows[1].CFA.Offset -= 8 }},
			{"FRE start offset", func() { d.Rows[1].Start++ }, func() { d.Rows[1].Start-- }},
			{"function start address", func() { d.Start += 2 }, func() { d.Start -= 2 }},
			{"CFA base register", func() { d.Rows[1].CFA.Reg ^= sp ^ fp }, func() { d.Rows[1].CFA.Reg ^= sp ^ fp }},
		}
		for _, m := range mutations {
			m.do()
			input.SFrame = encode(t, sec, funcs)
			r := check(input)
			m.undo()
			if r.Agree || count(r, Disagree) == 0 {
				t.Errorf("%s: damaged %s: no disagreement found", name, m.what)
			} else {
				t.Logf("%s: damaged %s: %s", name, m.what, r.Findings[0])
			}
		}
		// Removing a function leaves CFI that .sframe does not describe.
		input.SFrame = encode(t, sec, append(funcs[:best:best], funcs[best+1:]...))
		if r := check(input); count(r, Missing) == 0 {
			t.Errorf("%s: dropped function not reported missing", name)
		}
	}
}

// TestStreamInputMatches: checking a section with CFI executed on demand
// (input.Stream), as the verify command does, finds what checking it
// against every table finds, on GNU's fixtures and on damaged copies of
// their .sframe.
func TestStreamInputMatches(t *testing.T) {
	names, err := filepath.Glob("../testdata/sframe/v[23]-*")
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, name := range append(names, "../testdata/example/hello") {
		if strings.HasSuffix(name, ".objdump") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elfread.NewFile(bytes.NewReader(b), name)
		if err != nil {
			t.Fatal(err)
		}
		es, err := f.SFrame()
		if err != nil {
			continue // no .sframe (the example program)
		}
		l, err := loadCFI(f)
		if err != nil {
			t.Fatal(err)
		}
		ix := l.File
		try := func(what string, data []byte) {
			tb, err := sframe.Open(data, es.Addr)
			if err != nil || tb.Check() != nil {
				return
			}
			want := check(input{Machine: f.ELF.Machine, SFrame: tb, Tables: l.Tables, Symbol: f.Symbolizer()})
			got := check(input{Machine: f.ELF.Machine, SFrame: tb, Stream: ix, Symbol: f.Symbolizer()})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s (-Tables +indexed CFI):\n%s", name, what, diff)
			}
			compared++
		}
		try("as built", es.Data)
		for k := sframe.HeaderSize; k < len(es.Data); k++ {
			c := append([]byte(nil), es.Data...)
			c[k] ^= 0x08
			try(fmt.Sprintf("byte %d changed", k), c)
		}
	}
	if compared < 100 {
		t.Fatalf("only %d sections compared", compared)
	}
}

// TestSignalMarks: a signal frame of the CFI that .sframe marks as one
// (a signal FDE without FREs, as GNU as 2.47 writes for sigtramp_expr in
// its fixture, or with one RA-undefined FRE, as --signal-frames writes)
// is counted apart and passes; the same mark on a function that is not a
// signal frame, or an RA-undefined row without the signal bit, is a
// disagreement.
func TestSignalMarks(t *testing.T) {
	b, err := os.ReadFile("../testdata/sframe/v3-x86_64-exe")
	if err != nil {
		t.Fatal(err)
	}
	input, sec := load(t, b)
	r := check(input)
	if !r.Agree || count(r, SignalMark) != 1 || count(r, Disagree) != 0 {
		t.Fatalf("GNU's FRE-less signal FDE: agree %v, findings %v", r.Agree, r.Findings)
	}
	funcs := sec.Functions()
	sig, plain := -1, -1
	for i := range funcs {
		switch {
		case funcs[i].Signal:
			sig = i
		case plain < 0 && len(funcs[i].Rows) > 1 && !funcs[i].Rows[0].RAUndefined:
			plain = i
		}
	}
	if sig < 0 || plain < 0 {
		t.Fatalf("fixture: signal function %d, ordinary function %d", sig, plain)
	}
	mark := []sframe.Row{{Start: 0, RAUndefined: true}}
	for _, c := range []struct {
		what   string
		edit   func(f []sframe.Function)
		marked bool
	}{
		{"signal FDE with an RA-undefined FRE", func(f []sframe.Function) { f[sig].Rows = mark }, true},
		{"signal bit on a function that is no signal frame", func(f []sframe.Function) { f[plain].Signal, f[plain].Rows = true, mark }, false},
		{"RA undefined without the signal bit", func(f []sframe.Function) { f[sig].Signal, f[sig].Rows = false, mark }, false},
	} {
		edited := sec.Functions()
		c.edit(edited)
		input.SFrame = encode(t, sec, edited)
		r := check(input)
		if c.marked && (!r.Agree || count(r, SignalMark) != 1) {
			t.Errorf("%s: agree %v, findings %v", c.what, r.Agree, r.Findings)
		}
		if !c.marked && (r.Agree || count(r, Disagree) == 0) {
			t.Errorf("%s: agree %v, findings %v; want a disagreement", c.what, r.Agree, r.Findings)
		}
	}
}
