package gopclntab

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/gobuild"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// pairs are the builds of TestBinaries, each made with and without
// -ldflags='-s -w': Go's internal linker and cgo's external one, AArch64,
// and with the Go running the tests 32-bit x86, big-endian s390x and a
// cgo PIE linked by lld, which leaves the moduledata's words 0 in the
// file (its text start is then in the RELA relocations); with an older
// Go, PIEs, which Go 1.16 to 1.19 place in .data.rel.ro.gopclntab when
// they link them and merge into .data.rel.ro, without a section of their
// own, when cgo's linker does.
func pairs(goCmd string, old bool) []gobuild.Config {
	cs := []gobuild.Config{
		{GOARCH: "amd64"},
		{GOARCH: "amd64", Cgo: true},
		{GOARCH: "arm64"},
	}
	if old {
		cs = append(cs, gobuild.Config{GOARCH: "amd64", PIE: true}, gobuild.Config{GOARCH: "amd64", Cgo: true, PIE: true})
	} else {
		cs = append(cs, gobuild.Config{GOARCH: "arm64", Cgo: true}, gobuild.Config{GOARCH: "386"}, gobuild.Config{GOARCH: "s390x"})
		if _, err := exec.LookPath("ld.lld"); err == nil || toolchain.Required() {
			cs = append(cs, gobuild.Config{GOARCH: "amd64", Cgo: true, PIE: true, LDFlags: []string{"-extldflags=-fuse-ld=lld"}})
		}
	}
	for i := range cs {
		cs[i].Go = goCmd
	}
	return cs
}

// TestBinaries builds the test program in many ways, with the Go running
// the tests and with the older ones installed (Debian's golang-1.N-go),
// and requires Open to find, in both the stripped and the unstripped
// build, runtime.text (from the unstripped one's .symtab) as the text
// start and the functions debug/gosym lists (name, entry, end), and pcsp
// tables that cover each function from its entry without a gap.
// Go 1.19's AArch64 debugCallV2 and asyncPreempt end with a row of value
// -16 (their epilogue pops more than the frame the table knew of).
func TestBinaries(t *testing.T) {
	gos := gobuild.AllGos(t)
	dir := t.TempDir()
	for i, goCmd := range gos {
		version := gobuild.Version(goCmd)
		for _, c := range pairs(goCmd, i > 0) {
			t.Run(c.String(), func(t *testing.T) {
				t.Parallel() // the builds are mostly single-threaded links
				t.Logf("%s", version)
				full := gobuild.Build(t, dir, c)
				c.Strip = true
				stripped := gobuild.Build(t, dir, c)
				text := symbolValue(t, full, "runtime.text")
				for _, p := range []string{full, stripped} {
					tab := openFile(t, p)
					if tab.Version() != Go116 && tab.TextStart() != text {
						t.Errorf("%s: text start %#x, runtime.text is %#x", filepath.Base(p), tab.TextStart(), text)
					}
					checkGosym(t, tab, tab.data, text)
					checkPCSP(t, tab)
					checkFlags(t, tab, strings.Contains(version, "go1.16"))
				}
			})
		}
	}
}

func openFile(t *testing.T, path string) *Table {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	tab, err := Open(ef)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return tab
}

func symbolValue(t *testing.T, path, name string) uint64 {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("%s: no symbol %s", filepath.Base(path), name)
	return 0
}

// checkPCSP requires every pcsp table to start at its function's entry,
// have no gap and end inside the function (before the next one's entry).
func checkPCSP(t *testing.T, tab *Table) {
	t.Helper()
	n, bad := 0, 0
	for f, err := range tab.Funcs() {
		if err != nil {
			t.Fatal(err)
		}
		if !f.HasPCSP() {
			continue
		}
		n++
		pc := f.Entry
		it := f.PCSP()
		for v, ok := it.Next(); ok; v, ok = it.Next() {
			if v.PC != pc || v.End <= v.PC || v.End > f.End {
				if bad++; bad <= 5 {
					t.Errorf("%s [%#x, %#x): row [%#x, %#x) value %d after %#x", f.Name, f.Entry, f.End, v.PC, v.End, v.Value, pc)
				}
			}
			pc = v.End
		}
		if err := it.Err(); err != nil {
			t.Errorf("%s: %v", f.Name, err)
		}
	}
	if n < 1000 {
		t.Errorf("only %d functions with a pcsp table", n)
	}
}

// checkFlags: the runtime's outermost frames are TopFrame, its stack
// switchers SPWrite, from Go 1.17 (1.16 has no flag byte), and main.main
// neither; funcIDs mark those runtime functions but not main.main.
func checkFlags(t *testing.T, tab *Table, go116 bool) {
	t.Helper()
	want := map[string]Flag{"runtime.goexit": TopFrame, "runtime.mstart": TopFrame, "runtime.rt0_go": TopFrame, "runtime.morestack": SPWrite, "runtime.systemstack": SPWrite, "main.main": 0}
	seen := 0
	for f, err := range tab.Funcs() {
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[f.Name]
		if !ok {
			continue
		}
		seen++
		if go116 {
			w = 0
		}
		if f.Flag&w != w || w == 0 && f.Flag != 0 {
			t.Errorf("%s: flag %#x, want %#x", f.Name, f.Flag, w)
		}
		if (f.FuncID != 0) != (f.Name != "main.main") {
			t.Errorf("%s: funcID %d", f.Name, f.FuncID)
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of %d functions %v", seen, len(want), want)
	}
}

// TestNoSectionHeaders: with the section headers gone (sstrip), the table
// is found in the loaded segments and the text start in the moduledata.
func TestNoSectionHeaders(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Go programs")
	}
	dir := t.TempDir()
	for _, c := range []gobuild.Config{{GOARCH: "amd64", Strip: true}, {GOARCH: "arm64", Cgo: true, Strip: true}} {
		t.Run(c.String(), func(t *testing.T) {
			p := gobuild.Build(t, dir, c)
			want := openFile(t, p)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			// e_shoff, e_shnum, e_shstrndx of an ELF64 header.
			clear(b[0x28:0x30])
			clear(b[0x3c:0x40])
			got, err := OpenBytes(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.TextStart() != want.TextStart() || got.NumFuncs() != want.NumFuncs() {
				t.Fatalf("text start %#x, %d functions; with section headers %#x, %d", got.TextStart(), got.NumFuncs(), want.TextStart(), want.NumFuncs())
			}
			for i := range got.NumFuncs() {
				g, err1 := got.Func(i)
				w, err2 := want.Func(i)
				if err1 != nil || err2 != nil || g.Name != w.Name || g.Entry != w.Entry || g.End != w.End {
					t.Fatalf("func %d: %s %#x %#x %v; with section headers %s %#x %#x %v", i, g.Name, g.Entry, g.End, err1, w.Name, w.Entry, w.End, err2)
				}
			}
		})
	}
}

// TestNotGo: a C program has no table.
func TestNotGo(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		gobuild.Skip(t, "no gcc")
	}
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "c.c"), filepath.Join(dir, "c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenBytes(b)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
}
