package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// loaded returns the SFrame data of file b as a loader reads it, opened,
// and what the kernel's rules say of it.
func loaded(t *testing.T, b []byte) (*sframe.Table, *acceptance.Result) {
	t.Helper()
	f, err := elfread.NewFileBytes(b, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.LoaderSFrame()
	if err != nil {
		t.Fatal(err)
	}
	tb, err := sframe.Open(s.Data, s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	return tb, acceptance.Check(acceptance.Kernel, acceptance.Input{Section: s.Data, Addr: s.Addr, Exec: acceptance.ExecRanges(f.ELF)})
}

// added returns the rules of the violations of r that base does not have,
// with the FDE each is about.
func added(r, base *acceptance.Result) map[string]uint64 {
	old := map[string]bool{}
	for _, v := range base.Violations {
		old[v.Rule+v.Detail] = true
	}
	m := map[string]uint64{}
	for _, v := range r.Violations {
		if !old[v.Rule+v.Detail] {
			m[v.Rule] = v.PC
		}
	}
	return m
}

// oneFRE returns a function of t with one FRE and at least two bytes.
func oneFRE(t *testing.T, tb *sframe.Table) *sframe.FDE {
	t.Helper()
	for i := range tb.Header.NumFDEs {
		var d sframe.FDE
		if err := tb.FDE(int(i), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.FREs) == 1 && d.Size >= 2 && d.PCType == sframe.PCInc && d.FREs[0].Start == 0 {
			return &d
		}
	}
	t.Fatal("no function with one FRE")
	return nil
}

// TestDamageV3: the lookup damage leaves a section the kernel's
// validation accepts (the one violation it adds is the failed lookup
// below the FRE, which removes the section), with no row at the
// function's start and the row at its last byte; the validate damage one
// that validation refuses (an FRE starting at the function's size).
// Nothing else of the file changes.
func TestDamageV3(t *testing.T) {
	orig, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "sframe", "v3-x86_64-exe"))
	if err != nil {
		t.Fatal(err)
	}
	tb, base := loaded(t, orig)
	d := oneFRE(t, tb)
	want, err := tb.Lookup(d.Start)
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"lookup", "validate"} {
		b := bytes.Clone(orig)
		if _, err := damage(b, "exe", d.Start, mode); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if n := diffBytes(orig, b); n == 0 || n > 4 {
			t.Errorf("%s: %d bytes changed, want the FRE's start field's", mode, n)
		}
		dt, res := loaded(t, b)
		switch mode {
		case "lookup":
			if r := added(res, base); len(r) != 1 || r["first-fre"] != d.Start {
				t.Errorf("lookup: kernel rules broken %v, want only first-fre at %#x", res.Violations, d.Start)
			}
			if _, err := dt.Lookup(d.Start); !errors.Is(err, sframe.ErrNoFRE) {
				t.Errorf("lookup at the start: %v, want ErrNoFRE", err)
			}
			got, err := dt.Lookup(d.Start + uint64(d.Size) - 1)
			if err != nil || got.CFA != want.CFA || got.RA != want.RA || got.FP != want.FP {
				t.Errorf("lookup at the last byte: %+v, %v; want the rules %+v", got, err, want)
			}
		case "validate":
			if r := added(res, base); r["fre-start"] != d.Start+uint64(d.Size) {
				t.Errorf("validate: kernel rules broken %v, want fre-start at %#x", res.Violations, d.Start+uint64(d.Size))
			}
		}
	}
	if _, err := damage(bytes.Clone(orig), "exe", d.Start+1, "lookup"); err == nil {
		t.Error("no function at the address: no error")
	}
}

// TestDamageCFA: cfa+64 adds 64 to the CFA offset of every row of the
// function in a V2 or V3 section, and changes no other function.
func TestDamageCFA(t *testing.T) {
	for _, f := range []string{"v2-x86_64-exe", "v3-x86_64-exe"} {
		t.Run(f, func(t *testing.T) { damageCFA(t, f) })
	}
}

func damageCFA(t *testing.T, file string) {
	orig, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "sframe", file))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := loaded(t, orig)
	var d, other sframe.FDE
	if err := tb.FDE(0, &other); err != nil {
		t.Fatal(err)
	}
	for i := range tb.Header.NumFDEs {
		if err := tb.FDE(int(i), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.FREs) > 1 && d.PCType == sframe.PCInc {
			break
		}
	}
	b := bytes.Clone(orig)
	msg, err := damage(b, "exe", d.Start, "cfa+64")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(msg)
	dt, _ := loaded(t, b)
	for pc := d.Start; pc < d.Start+uint64(d.Size); pc++ {
		was, err1 := tb.Lookup(pc)
		now, err2 := dt.Lookup(pc)
		if err1 != nil || err2 != nil || now.CFA.Offset != was.CFA.Offset+64 || now.RA != was.RA || now.FP != was.FP {
			t.Fatalf("pc %#x: %+v (%v), was %+v (%v)", pc, now, err2, was, err1)
		}
	}
	if was, _ := tb.Lookup(other.Start); other.Start != d.Start {
		if now, _ := dt.Lookup(other.Start); now != was {
			t.Errorf("another function changed: %+v, was %+v", now, was)
		}
	}
	if _, err := damage(bytes.Clone(orig), "exe", d.Start, "lookup"); err == nil && file == "v2-x86_64-exe" {
		t.Error("lookup on a V2 section: no error")
	}
}

// diffBytes counts the bytes in which a and b differ.
func diffBytes(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}
