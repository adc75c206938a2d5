package judge

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nmFunctions reads `nm -n -S --defined-only` as the kernel harness's awk
// did: the lines of type T, t, W or w, grouped by address (names in nm's
// order, the size of the last one that has a size).
func nmFunctions(t *testing.T, prog string) []function {
	t.Helper()
	out, err := exec.Command("nm", "-n", "-S", "--defined-only", prog).Output()
	if err != nil {
		t.Fatalf("nm %s: %v", prog, err)
	}
	var fs []function
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		var a, s, typ, name string
		switch len(f) {
		case 4:
			a, s, typ, name = f[0], f[1], f[2], f[3]
		case 3:
			a, typ, name = f[0], f[1], f[2]
		default:
			continue
		}
		if !strings.Contains("TtWw", typ) || len(typ) != 1 {
			continue
		}
		addr, _ := strconv.ParseUint(a, 16, 64)
		var size uint64
		if s != "" {
			size, _ = strconv.ParseUint(s, 16, 64)
		}
		if n := len(fs); n > 0 && fs[n-1].addr == addr {
			if s != "" {
				fs[n-1].size = size
			}
			fs[n-1].names = append(fs[n-1].names, name)
			continue
		}
		fs = append(fs, function{addr: addr, size: size, names: []string{name}})
	}
	return fs
}

// The symbol table is what nm lists (T, t, W, w; IFUNC symbols, objects
// and section symbols left out), function by function, for the harness's
// static programs, whose glibc has IFUNCs, weak aliases and symbols
// without size; .plt and the executable segments are readelf's.
func TestSymtabIsNm(t *testing.T) {
	if _, err := exec.LookPath("nm"); err != nil {
		skip(t, "no nm")
	}
	dir := programs(t)
	for _, p := range kernelProgs {
		for _, v := range variants() {
			prog := filepath.Join(dir, p+"."+v)
			st, err := LoadSymtab(prog)
			if err != nil {
				t.Fatal(err)
			}
			want := nmFunctions(t, prog)
			if len(st.funcs) != len(want) {
				t.Errorf("%s: %d functions, nm lists %d", prog, len(st.funcs), len(want))
			}
			for i := range min(len(st.funcs), len(want)) {
				g, w := st.funcs[i], want[i]
				// nm orders the names at one address by strcoll; ours are
				// in byte order.
				slices.Sort(w.names)
				if g.addr != w.addr || g.size != w.size || !slices.Equal(g.names, w.names) {
					t.Errorf("%s: function %d is %#x size %#x %v, nm: %#x size %#x %v", prog, i, g.addr, g.size, g.names, w.addr, w.size, w.names)
					break
				}
			}
			if st.plt == nil || len(st.exec) == 0 {
				t.Errorf("%s: .plt %v, executable segments %v", prog, st.plt, st.exec)
			}
			if p == "plt" {
				// What the awk knew of the IFUNCs: the implementations,
				// not the IFUNC symbols.
				if _, ok := st.byName["strlen"]; ok {
					t.Errorf("%s: the IFUNC strlen is a function", prog)
				}
				if _, ok := st.byName["__strlen_sse2"]; !ok {
					t.Errorf("%s: no __strlen_sse2", prog)
				}
			}
		}
	}
}

// An address resolves to the function holding it: not below the first
// function, not past a sized function's end, not outside the executable
// segments; in .plt to PLT; else "?" and the address.
func TestSymtabFind(t *testing.T) {
	dir := programs(t)
	st, err := LoadSymtab(filepath.Join(dir, "plt.plain"))
	if err != nil {
		t.Fatal(err)
	}
	p2 := st.byName["p2"]
	lo, hi := pltRange(t, filepath.Join(dir, "plt.plain"))
	for _, c := range []struct {
		ip   uint64
		want string
	}{
		{p2, "p2"},
		{p2 + 1, "p2"},
		{lo, "PLT"},
		{hi - 1, "PLT"},
		{0x10, "?10"},
		{0x7ffd12345678, "?7ffd12345678"},
		{st.exec[0].Hi, "?" + strconv.FormatUint(st.exec[0].Hi, 16)},
	} {
		if got := st.Name(c.ip); got != c.want {
			t.Errorf("Name(%#x) = %s, want %s", c.ip, got, c.want)
		}
	}
	// Past a sized function's end: the gap before the next one (padding)
	// is in no function.
	gaps := 0
	for i, f := range st.funcs[:len(st.funcs)-1] {
		if end := f.addr + f.size; f.size != 0 && end < st.funcs[i+1].addr && end > st.exec[0].Lo {
			gaps++
			if g := st.find(end); g != nil {
				t.Errorf("%#x, past %v's end, is in %v", end, f.names, g.names)
			}
		}
	}
	if gaps == 0 {
		t.Error("no gap between functions")
	}
}

// A stripped Go program's functions come from its function table: every
// function nm lists in its unstripped twin (built from the same source
// with the same flags but -s -w) starts where the table puts a function of
// that name, and an address inside it resolves to that name in both. The
// twins' tables are the same, function for function, so gdb's chains of
// the twin are the stripped program's; their code is not byte for byte
// the same (without the symbol table the data after the code lies
// elsewhere, and the displacements that reach it differ).
func TestGoSymtab(t *testing.T) {
	if _, err := exec.LookPath("nm"); err != nil {
		skip(t, "no nm")
	}
	dir := programs(t)
	plain, sym := filepath.Join(dir, "goprog.plain"), filepath.Join(dir, "goprog.sym")
	st, err := LoadSymtab(plain)
	if err != nil {
		t.Fatal(err)
	}
	twin, err := LoadSymtab(sym)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.funcs) < 1000 || len(st.exec) == 0 {
		t.Fatalf("%d functions from the table, executable segments %v", len(st.funcs), st.exec)
	}
	f, err := elf.Open(sym)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fromTable := &Symtab{byName: map[string]uint64{}}
	if err := fromTable.goFuncs(f); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(st.funcs, fromTable.funcs, func(a, b function) bool {
		return a.addr == b.addr && a.size == b.size && slices.Equal(a.names, b.names)
	}) {
		t.Errorf("the twins' function tables differ: %d and %d functions", len(st.funcs), len(fromTable.funcs))
	}
	checked := 0
	for _, w := range nmFunctions(t, sym) {
		g := st.find(w.addr)
		if g == nil || g.addr != w.addr {
			// The linker's own symbols (runtime.text, go:buildid, ...)
			// start no function of the table.
			continue
		}
		checked++
		// nm names an assembly function's ABI0 body NAME.abi0, where the
		// table names it as its wrapper, NAME; and the linker writes the
		// table's middle dots as dots.
		if name := strings.TrimSuffix(w.names[0], ".abi0"); strings.ReplaceAll(g.names[0], "·", ".") != name {
			t.Errorf("%#x: %s in the table, %s in nm", w.addr, g.names[0], w.names[0])
		}
		if want := twin.find(w.addr); want == nil || want.addr != g.addr {
			t.Errorf("%#x: %s in the table, %v from the symbols", w.addr, g.names[0], want)
		}
	}
	for _, name := range []string{"main.main", "main.leaf", "main.a", "main.b", "main.c", "runtime.main", "runtime.goexit"} {
		if _, ok := st.byName[name]; !ok {
			t.Errorf("no %s in the table", name)
		}
	}
	if checked < 1000 {
		t.Errorf("only %d of nm's functions are in the table", checked)
	}
}
