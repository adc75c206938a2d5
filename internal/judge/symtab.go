package judge

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
)

// A function is the code symbols at one address: the names nm -n lists
// there (its first, in byte order, names the function in reports) and
// the size of the last of them with a size (0: unbounded, it runs up to
// the next function).
type function struct {
	addr, size uint64
	names      []string
}

// Symtab resolves the addresses of a program's call chains to its
// functions, as `nm -n -S --defined-only` and `readelf -lSW` show them: the
// defined symbols nm types T, t, W or w (an IFUNC symbol, type i, is not
// one), the .plt section as one function named PLT (its stubs have no
// symbol), and the executable PT_LOAD segments, outside which no address
// is in a function. A Go program without such symbols (linked with
// -ldflags=-s) has its functions from its function table instead, as Go's
// own tracebacks name them.
type Symtab struct {
	funcs  []function
	plt    *function
	exec   []acceptance.Range
	byName map[string]uint64
}

// nmText reports whether nm would list s with type T, t, W or w, deciding
// as binutils' bfd_decode_symclass does: not undefined or common, not an
// IFUNC (i), weak and not an object (W, wherever it is), else not
// GNU_UNIQUE (u) or absolute (A), and in an executable section (T). Section
// and file symbols are debugging symbols nm does not list.
func nmText(f *elf.File, s elf.Symbol) bool {
	typ, bind := elf.ST_TYPE(s.Info), elf.ST_BIND(s.Info)
	switch {
	case s.Section == elf.SHN_UNDEF || s.Section == elf.SHN_COMMON:
		return false
	case typ == elf.STT_SECTION || typ == elf.STT_FILE || typ == elf.STT_GNU_IFUNC:
		return false
	case bind == elf.STB_WEAK:
		return typ != elf.STT_OBJECT
	case bind == stbGNUUnique, s.Section == elf.SHN_ABS, int(s.Section) >= len(f.Sections):
		return false
	}
	return f.Sections[s.Section].Flags&elf.SHF_EXECINSTR != 0
}

// LoadSymtab reads the symbol table, the executable segments and the
// .plt section of the ELF file at path.
func LoadSymtab(path string) (*Symtab, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var text []elf.Symbol
	for _, s := range syms {
		if s.Name != "" && nmText(f, s) {
			text = append(text, s)
		}
	}
	// nm -n: by address, then by name.
	sort.SliceStable(text, func(i, j int) bool {
		if text[i].Value != text[j].Value {
			return text[i].Value < text[j].Value
		}
		return text[i].Name < text[j].Name
	})
	st := &Symtab{byName: map[string]uint64{}}
	for _, s := range text {
		if _, ok := st.byName[s.Name]; !ok {
			st.byName[s.Name] = s.Value
		}
		if n := len(st.funcs); n > 0 && st.funcs[n-1].addr == s.Value {
			g := &st.funcs[n-1]
			if s.Size != 0 {
				g.size = s.Size
			}
			g.names = append(g.names, s.Name)
			continue
		}
		st.funcs = append(st.funcs, function{addr: s.Value, size: s.Size, names: []string{s.Name}})
	}
	if len(text) == 0 && gopclntab.IsGo(f) {
		if err := st.goFuncs(f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	st.exec = acceptance.ExecRanges(f)
	if s := f.Section(".plt"); s != nil && s.Type == elf.SHT_PROGBITS {
		st.plt = &function{addr: s.Addr, size: s.Size, names: []string{"PLT"}}
	}
	return st, nil
}

// goFuncs fills st from the function table (.gopclntab) of the Go
// program f: each function from its entry up to the next one's (the
// padding after it included, which no return address points into), named
// as the runtime names it ("main.main", "runtime.goexit"). A stripped Go
// program keeps the table, which its runtime reads for tracebacks; its
// addresses are the program's, so chains of the stripped binary resolve
// without the unstripped build.
func (st *Symtab) goFuncs(f *elf.File) error {
	t, err := gopclntab.Open(f)
	if err != nil {
		return err
	}
	for fn, err := range t.Funcs() {
		if err != nil {
			return err
		}
		if _, ok := st.byName[fn.Name]; !ok {
			st.byName[fn.Name] = fn.Entry
		}
		st.funcs = append(st.funcs, function{addr: fn.Entry, size: fn.End - fn.Entry, names: []string{fn.Name}})
	}
	sort.SliceStable(st.funcs, func(i, j int) bool { return st.funcs[i].addr < st.funcs[j].addr })
	return nil
}

// find returns the function holding ip, or nil: the .plt first; then,
// inside an executable segment, the last function starting at or below
// ip, unless it has a size and ends at or below ip.
func (st *Symtab) find(ip uint64) *function {
	if p := st.plt; p != nil && ip >= p.addr && ip < p.addr+p.size {
		return p
	}
	inx := false
	for _, x := range st.exec {
		if ip >= x.Lo && ip < x.Hi {
			inx = true
		}
	}
	if !inx {
		return nil
	}
	i := sort.Search(len(st.funcs), func(i int) bool { return st.funcs[i].addr > ip }) - 1
	if i < 0 {
		return nil
	}
	f := &st.funcs[i]
	if f.size != 0 && ip >= f.addr+f.size {
		return nil
	}
	return f
}

// Name is the function holding ip, or "?" and ip in hex.
func (st *Symtab) Name(ip uint64) string {
	if f := st.find(ip); f != nil {
		return f.names[0]
	}
	return fmt.Sprintf("?%x", ip)
}

// is reports whether f is the frame a true chain names: "PLT" is the .plt
// section; "NAME*" any function one of whose names starts with NAME;
// another name the function at that symbol's address (the first symbol of
// that name nm lists).
func (st *Symtab) is(f *function, want string) bool {
	if f == nil {
		return false
	}
	if p, ok := strings.CutSuffix(want, "*"); ok {
		for _, n := range f.names {
			if strings.HasPrefix(n, p) {
				return true
			}
		}
		return false
	}
	if want == "PLT" {
		return f == st.plt
	}
	a, ok := st.byName[want]
	return ok && f.addr == a
}

// stbGNUUnique is STB_GNU_UNIQUE, which debug/elf does not name.
const stbGNUUnique elf.SymBind = 10
