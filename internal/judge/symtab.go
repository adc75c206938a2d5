package judge

import (
	"debug/elf"
	"errors"
	"fmt"
	"path/filepath"
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
	owner      *Symtab // the object the function is in
}

// Symtab resolves the addresses of a program's call chains to its
// functions, as `nm -n -S --defined-only` and `readelf -lSW` show them: the
// defined symbols nm types T, t, W or w (an IFUNC symbol, type i, is not
// one), the .plt section as one function named PLT (its stubs have no
// symbol), and the executable PT_LOAD segments, outside which no address
// is in a function. A Go program without such symbols (linked with
// -ldflags=-s) has its functions from its function table instead, as Go's
// own tracebacks name them.
//
// A Symtab made by LoadMapped stands for a whole process instead: the
// objects mapped into it, each with its own Symtab and load bias.
type Symtab struct {
	funcs  []function
	plt    *function
	exec   []acceptance.Range
	byName map[string]uint64
	name   string // the file's base name

	objs []mappedObject // a process: its objects' executable mappings
}

// A mappedObject is one executable mapping of an object in a process: the
// addresses [lo, hi) are the object's plus bias.
type mappedObject struct {
	lo, hi, bias uint64
	st           *Symtab
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
	if len(syms) == 0 {
		// A stripped shared object (Debian's libc.so.6): its dynamic
		// symbols, the functions it exports, name what they can.
		syms, err = f.DynamicSymbols()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
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
	st := &Symtab{byName: map[string]uint64{}, name: filepath.Base(path)}
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
	for i := range st.funcs {
		st.funcs[i].owner = st
	}
	if st.plt != nil {
		st.plt.owner = st
	}
	return st, nil
}

// LoadMapped returns the Symtab of a process from its executable file
// mappings (the reader's M lines), each file read from root joined with
// its path in the guest. An object's load bias is where its mapping
// starts less the page of the executable PT_LOAD segment whose file
// offset the mapping has. Functions are then named as in their object,
// with the object's file name before them for objects other than the
// program (the first mapping's).
func LoadMapped(root string, maps []Mapping) (*Symtab, error) {
	if len(maps) == 0 {
		return nil, errors.New("no mappings")
	}
	loaded := map[string]*Symtab{}
	var biases = map[string]uint64{}
	p := &Symtab{byName: map[string]uint64{}}
	for _, m := range maps {
		st := loaded[m.Path]
		if st == nil {
			var err error
			st, err = LoadSymtab(filepath.Join(root, m.Path))
			if err != nil {
				return nil, err
			}
			loaded[m.Path] = st
		}
		bias, err := mappingBias(filepath.Join(root, m.Path), m)
		if err != nil {
			return nil, err
		}
		if b, ok := biases[m.Path]; ok && b != bias {
			return nil, fmt.Errorf("%s mapped with two load biases (%#x, %#x)", m.Path, b, bias)
		}
		biases[m.Path] = bias
		p.objs = append(p.objs, mappedObject{lo: m.Lo, hi: m.Hi, bias: bias, st: st})
	}
	p.name = p.objs[0].st.name
	return p, nil
}

// mappingBias finds the executable PT_LOAD of the file at path whose
// file offset, in pages, is the mapping's, and returns the mapping's
// start less that segment's address, in pages.
func mappingBias(path string, m Mapping) (uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	const page = 4096
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Off&^(page-1) == m.Off {
			return m.Lo - p.Vaddr&^(page-1), nil
		}
	}
	return 0, fmt.Errorf("%s: no executable PT_LOAD at file offset %#x (mapped at %#x)", path, m.Off, m.Lo)
}

// object returns the mapped object holding ip, or nil.
func (st *Symtab) object(ip uint64) *mappedObject {
	for i := range st.objs {
		if o := &st.objs[i]; ip >= o.lo && ip < o.hi {
			return o
		}
	}
	return nil
}

// inObject reports whether ip lies in an executable mapping of the
// object whose file is named name (a process's Symtab only).
func (st *Symtab) inObject(ip uint64, name string) bool {
	o := st.object(ip)
	return o != nil && o.st.name == name
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
	if st.objs != nil {
		if o := st.object(ip); o != nil {
			return o.st.find(ip - o.bias)
		}
		return nil
	}
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
		if st.objs != nil && f.owner != st.objs[0].st {
			return f.owner.name + ":" + f.names[0]
		}
		return f.names[0]
	}
	if st.objs != nil {
		if o := st.object(ip); o != nil {
			return fmt.Sprintf("%s:?%x", o.st.name, ip-o.bias)
		}
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
		return f == f.owner.plt
	}
	a, ok := f.owner.byName[want]
	return ok && f.addr == a
}

// endOf reports whether ip is the end of the function a true chain names
// want (the return address of a call that is that function's last
// instruction): the function holding ip-1 is want, has a size and ends
// at ip.
func (st *Symtab) endOf(ip uint64, want string) bool {
	if ip == 0 {
		return false
	}
	f := st.find(ip - 1)
	return f != nil && f.size != 0 && f.addr+f.size == ip && st.is(f, want)
}

// End is the end of the function named name in a program's symbols (not
// a process's), and whether it has one: the symbol's address plus the
// size of its function.
func (st *Symtab) End(name string) (uint64, bool) {
	if st.objs != nil {
		return 0, false
	}
	a, ok := st.byName[name]
	if !ok {
		return 0, false
	}
	f := st.find(a)
	if f == nil || f.addr != a || f.size == 0 {
		return 0, false
	}
	return a + f.size, true
}

// stbGNUUnique is STB_GNU_UNIQUE, which debug/elf does not name.
const stbGNUUnique elf.SymBind = 10
