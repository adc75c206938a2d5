package judge

import (
	"debug/elf"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	sftrace "github.com/cfi2sframe/cfi2sframe/internal/trace" // judge's tests have a trace of their own
)

// A function is the code symbols at one address: the names nm -n lists
// there (its first, in byte order, names the function in reports) and
// the size of the last of them with a size (0: unbounded, it runs up to
// the next function).
type function struct {
	addr, size uint64
	names      []string
	obj        int // the object it is in: an index into Symtab.objs
}

// Symtab resolves the addresses of a program's call chains to its
// functions, as `nm -n -S --defined-only` and `readelf -lSW` show them: the
// defined symbols nm types T, t, W or w (an IFUNC symbol, type i, is not
// one), the .plt section as one function named PLT (its stubs have no
// symbol; lld's .iplt, a static executable's IRELATIVE stubs, too), and the executable PT_LOAD segments, outside which no address
// is in a function. A Go program without such symbols (linked with
// -ldflags=-s) has its functions from its function table instead, as Go's
// own tracebacks name them.
type Symtab struct {
	funcs  []function
	plt    []*function // .plt, and lld's .iplt
	exec   []objRange
	byName map[string]uint64
	// objs names the objects the functions and ranges are in: the
	// program first ("" when it was loaded alone, by LoadSymtab), then
	// those of a run's mappings (AddMapping): a library by its file name,
	// the vDSO as "[vdso]".
	objs []string
}

// objRange is an executable range of an object, and the object's load
// bias there (its addresses less those in its file; 0 where unknown).
type objRange struct {
	acceptance.Range
	obj  int
	bias uint64
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
	case (f.Machine == elf.EM_AARCH64 || f.Machine == elf.EM_ARM) && armMappingSymbol(s.Name):
		return false
	case bind == elf.STB_WEAK:
		return typ != elf.STT_OBJECT
	case bind == stbGNUUnique, s.Section == elf.SHN_ABS, int(s.Section) >= len(f.Sections):
		return false
	}
	return f.Sections[s.Section].Flags&elf.SHF_EXECINSTR != 0
}

// armMappingSymbol reports whether name is an Arm ELF mapping symbol
// ($x, $d, $a, $t, $c, alone or followed by a dot and more), which mark
// code and data in a section and which nm leaves out unless asked for
// --special-syms.
func armMappingSymbol(name string) bool {
	return len(name) >= 2 && name[0] == '$' && strings.ContainsRune("xdatc", rune(name[1])) && (len(name) == 2 || name[2] == '.')
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
	st := &Symtab{byName: map[string]uint64{}, objs: []string{""}}
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
	for _, r := range acceptance.ExecRanges(f) {
		st.exec = append(st.exec, objRange{r, 0, 0})
	}
	for _, name := range []string{".plt", ".iplt"} {
		if s := f.Section(name); s != nil && s.Type == elf.SHT_PROGBITS {
			st.plt = append(st.plt, &function{addr: s.Addr, size: s.Size, names: []string{"PLT"}})
		}
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
	for _, p := range st.plt {
		if ip >= p.addr && ip < p.addr+p.size {
			return p
		}
	}
	obj := st.objAt(ip)
	if obj < 0 {
		return nil
	}
	i := sort.Search(len(st.funcs), func(i int) bool { return st.funcs[i].addr > ip }) - 1
	if i < 0 {
		return nil
	}
	f := &st.funcs[i]
	if f.obj != obj || f.size != 0 && ip >= f.addr+f.size {
		return nil
	}
	return f
}

// objAt is the object whose executable range holds ip, or -1.
func (st *Symtab) objAt(ip uint64) int {
	for _, x := range st.exec {
		if ip >= x.Lo && ip < x.Hi {
			return x.obj
		}
	}
	return -1
}

// Name is the function holding ip, or "?" and ip in hex: in an object
// other than the program (AddMapping), "OBJ:?" and ip's address in the
// object's file.
func (st *Symtab) Name(ip uint64) string {
	if f := st.find(ip); f != nil {
		return f.names[0]
	}
	for _, x := range st.exec {
		if x.obj > 0 && ip >= x.Lo && ip < x.Hi {
			return fmt.Sprintf("%s:?%x", st.objs[x.obj], ip-x.bias)
		}
	}
	return fmt.Sprintf("?%x", ip)
}

// match reports whether ip is in the frame a true chain names: one of
// the alternatives of "A|B"; "@OBJ" (and "@OBJ+", a run of such frames,
// of which ip is one) is any address in an executable mapping of the
// object OBJ ("@libc.so.6", "@[vdso]": see AddMapping), function or not;
// else as is says.
func (st *Symtab) match(ip uint64, want string) bool {
	for _, w := range strings.Split(want, "|") {
		if o, ok := strings.CutPrefix(w, "@"); ok {
			o = strings.TrimSuffix(o, "+")
			if i := st.objAt(ip); i >= 0 && st.objs[i] == o {
				return true
			}
			continue
		}
		if st.is(st.find(ip), w) {
			return true
		}
	}
	return false
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
		return slices.Contains(st.plt, f)
	}
	a, ok := st.byName[want]
	return ok && f.addr == a
}

// matchEnd reports whether ip is the end of a function a true chain's
// frame want names (one of the alternatives of "A|B", "@OBJ" aside): see
// endOf.
func (st *Symtab) matchEnd(ip uint64, want string) bool {
	for _, w := range strings.Split(want, "|") {
		if !strings.HasPrefix(w, "@") && st.endOf(ip, w) {
			return true
		}
	}
	return false
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

// End is the end of the program's function named name (not a library's),
// and whether it has one: the symbol's address plus the size of its
// function, where the run had it (a static program's own address, which
// verify --for kernel names).
func (st *Symtab) End(name string) (uint64, bool) {
	a, ok := st.byName[name]
	if !ok {
		return 0, false
	}
	f := st.find(a)
	if f == nil || f.obj != 0 || f.addr != a || f.size == 0 {
		return 0, false
	}
	return a + f.size, true
}

// stbGNUUnique is STB_GNU_UNIQUE, which debug/elf does not name.
const stbGNUUnique elf.SymBind = 10

// A Mapping is one executable mapping of a run's program, as the reader
// wrote it ("M LO HI OFFSET PATH", from /proc/PID/maps): where a PIE
// program, its libraries and the vDSO lay.
type Mapping struct {
	Lo, Hi, Off uint64
	Path        string
}

// loadBias is the difference between the addresses of m and those f's
// executable PT_LOAD at m's file offset has in the file (0 for a program
// linked at a fixed address), as cfi2sframe trace takes it.
func loadBias(f *elf.File, m Mapping) (uint64, error) {
	var loads []elf.ProgHeader
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p.ProgHeader)
		}
	}
	if b, ok := sftrace.LoadBias(loads, &sftrace.MapEntry{Lo: m.Lo, Hi: m.Hi, Offset: m.Off, Path: m.Path}); ok {
		return b, nil
	}
	return 0, fmt.Errorf("no executable PT_LOAD at offset %#x for the mapping %#x-%#x of %s", m.Off, m.Lo, m.Hi, m.Path)
}

// RelocateProgram moves the program's functions, ranges and .plt to where
// the mapping m of the program file at path put them (a PIE's load
// address; nothing moves for a program linked at a fixed address).
func (st *Symtab) RelocateProgram(path string, m Mapping) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bias, err := loadBias(f, m)
	if err != nil || bias == 0 {
		return err
	}
	for i := range st.funcs {
		if st.funcs[i].obj == 0 {
			st.funcs[i].addr += bias
		}
	}
	for i := range st.exec {
		if st.exec[i].obj == 0 {
			st.exec[i].Lo += bias
			st.exec[i].Hi += bias
		}
	}
	for _, p := range st.plt {
		p.addr += bias
	}
	for n, a := range st.byName {
		st.byName[n] = a + bias
	}
	sort.SliceStable(st.funcs, func(i, j int) bool { return st.funcs[i].addr < st.funcs[j].addr })
	return nil
}

// AddMapping adds an object the program had mapped, named by its file
// name ("libc.so.6", "[vdso]"): the mapping's range, and the functions of
// the file at path (its symbol table, else its dynamic symbols: a
// distribution's stripped library names its exported functions only; an
// address in between is the exported function below it) where path is
// not "" and m maps one of its executable PT_LOADs, else one function
// named as the object over the whole range.
// Names the program has keep the program's address.
func (st *Symtab) AddMapping(m Mapping, path string) error {
	name := m.Path[strings.LastIndex(m.Path, "/")+1:]
	obj := len(st.objs)
	st.objs = append(st.objs, name)
	st.exec = append(st.exec, objRange{acceptance.Range{Lo: m.Lo, Hi: m.Hi}, obj, 0})
	if path == "" {
		st.funcs = append(st.funcs, function{addr: m.Lo, size: m.Hi - m.Lo, names: []string{name}, obj: obj})
		sort.SliceStable(st.funcs, func(i, j int) bool { return st.funcs[i].addr < st.funcs[j].addr })
		return nil
	}
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bias, err := loadBias(f, m)
	if err != nil {
		// Not a code segment of the file (the reader saw the object
		// while ld.so was still mapping it): its range alone.
		st.funcs = append(st.funcs, function{addr: m.Lo, size: m.Hi - m.Lo, names: []string{name}, obj: obj})
		sort.SliceStable(st.funcs, func(i, j int) bool { return st.funcs[i].addr < st.funcs[j].addr })
		return nil
	}
	st.exec[len(st.exec)-1].bias = bias
	syms, err := f.Symbols()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(syms) == 0 {
		if syms, err = f.DynamicSymbols(); err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	byAddr := map[uint64]int{}
	for _, s := range syms {
		a := s.Value + bias
		if s.Name == "" || !nmText(f, s) || a < m.Lo || a >= m.Hi {
			continue
		}
		if _, ok := st.byName[s.Name]; !ok {
			st.byName[s.Name] = a
		}
		if i, ok := byAddr[a]; ok {
			g := &st.funcs[i]
			if s.Size != 0 {
				g.size = s.Size
			}
			if !slices.Contains(g.names, s.Name) {
				g.names = append(g.names, s.Name)
				sort.Strings(g.names)
			}
			continue
		}
		byAddr[a] = len(st.funcs)
		st.funcs = append(st.funcs, function{addr: a, size: s.Size, names: []string{s.Name}, obj: obj})
	}
	sort.SliceStable(st.funcs, func(i, j int) bool { return st.funcs[i].addr < st.funcs[j].addr })
	return nil
}
