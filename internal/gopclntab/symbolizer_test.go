package gopclntab

import (
	"os"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
)

// TestFuncAt: every function is found at its entry and at its last byte
// (the padding up to the next one included), no function before the
// first or at the end of the last.
func TestFuncAt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	tab := openFile(t, gobuild.Build(t, t.TempDir(), gobuild.Config{GOARCH: "amd64", Strip: true}))
	var first, last Func
	for f, err := range tab.Funcs() {
		if err != nil {
			t.Fatal(err)
		}
		if f.Index == 0 {
			first = f
		}
		last = f
		for _, pc := range []uint64{f.Entry, max(f.End, f.Entry+1) - 1} {
			if g, ok := tab.FuncAt(pc); !ok || g.Index != f.Index {
				t.Fatalf("FuncAt(%#x): %s %v; want %s [%#x,%#x)", pc, g.Name, ok, f.Name, f.Entry, f.End)
			}
		}
	}
	for _, pc := range []uint64{first.Entry - 1, last.End, 0} {
		if g, ok := tab.FuncAt(pc); ok {
			t.Errorf("FuncAt(%#x): %s [%#x,%#x); want none", pc, g.Name, g.Entry, g.End)
		}
	}
}

// TestSymbolizer: the Go functions of a program are named by the table,
// as the runtime names them, stripped or not (the symbol table's
// runtime.morestack.abi0 is runtime.morestack); in a cgo program the C
// functions the table does not hold by the symbol table.
func TestSymbolizer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		cfg  gobuild.Config
		want []string // names the symbolizer must give (at their table or symbol address)
	}{
		{gobuild.Config{GOARCH: "amd64"}, []string{"main.main", "runtime.morestack", "runtime.goexit"}},
		{gobuild.Config{GOARCH: "amd64", Strip: true}, []string{"main.main", "runtime.morestack"}},
		{gobuild.Config{GOARCH: "amd64", Cgo: true}, []string{"main.main", "runtime.morestack", "x_cgo_setenv"}},
	} {
		t.Run(c.cfg.String(), func(t *testing.T) {
			p := gobuild.Build(t, dir, c.cfg)
			tab := openFile(t, p)
			addr := map[string]uint64{}
			for f, err := range tab.Funcs() {
				if err != nil {
					t.Fatal(err)
				}
				addr[f.Name] = f.Entry
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elfread.NewFileBytes(b, p)
			if err != nil {
				t.Fatal(err)
			}
			sym := Symbolizer(f)
			for _, name := range c.want {
				a, ok := addr[name]
				if !ok {
					a = symbolValue(t, p, name) // a C function
				}
				if got := sym(a); got != name {
					t.Errorf("%#x: %q, want %q", a, got, name)
				}
			}
		})
	}
}
