package trace

import (
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// Object is one ELF file mapped into the traced process: its SFrame table,
// its function symbols and, for --check dwarf, its DWARF CFI.
type Object struct {
	Path    string
	BuildID string
	// Table is the file's .sframe, nil when it has none (NoSFrame says
	// why).
	Table    *sframe.Table
	NoSFrame string
	Machine  elf.Machine
	loads    []elf.ProgHeader // PT_LOAD headers
	syms     []symbol         // sorted by lo
	secs     []section        // executable sections, for unnamed code
	fdes     []*cfi.FDE       // sorted by Start; only with DWARF loading
	cfiErr   string           // why fdes is empty, when it is
	// goFuncs are the Go functions whose .debug_frame FDE Go's linker
	// wrote (in fdes, beside its FDE from the function table), by start:
	// true for those Go's own unwinder stops at (see goFDEs).
	goFuncs map[uint64]bool
	// Conversion, when set, says that the object has no .sframe and
	// what building one from its CFI cost (Table is that one, unless
	// the conversion failed).
	Conversion *Conversion
}

// Converter builds an SFrame section in memory from the call-frame
// information of the ELF image in r (size bytes, of the file name): the
// section's bytes and the address they are encoded for. Its errors do not
// name the file: the object is named beside them. The command passes one
// that converts with convert.NewFile and File.Convert.
type Converter func(name string, r io.ReaderAt, size int64) (section []byte, addr uint64, err error)

// Conversion is what building one object's SFrame in memory cost.
type Conversion struct {
	Path   string
	Bytes  int           // the section's size
	Time   time.Duration // wall clock
	CPU    time.Duration // CPU time of the whole tracer (translation runs on two goroutines)
	Attach bool          // converted when trace attached, not when the object was first seen later
	Err    string        // why it failed ("" when it did not)
}

type symbol struct {
	lo, hi uint64
	name   string
}

type section struct {
	lo, hi uint64
	name   string
}

// openFile opens a file for reading without blocking on FIFOs or devices
// and accepts only a regular file; it returns the file's size too.
func openFile(name string) (*os.File, int64, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: name, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s: is %s, not a regular file", name, elfread.KindOf(st.Mode()))
	}
	return f, st.Size(), nil
}

// loadObject reads what the sampler needs from the file opened as open
// (a /proc/PID/map_files entry or the path) and names it path. With dwarf
// it also parses the file's call-frame sections; with conv, a file
// without .sframe gets one converted from its CFI.
func loadObject(open, path string, dwarf bool, conv Converter) (*Object, error) {
	fh, size, err := openFile(open)
	if err != nil {
		return nil, err
	}
	defer fh.Close() // everything kept is copied out of the file
	return readObject(fh, size, path, dwarf, conv)
}

// readObject reads an object's ELF image, the size bytes of r. With conv,
// an image without .sframe (none at all: a bad one is reported, not
// replaced) gets one converted from its CFI, before the symbols are read
// (a stripped executable's _start is named from it).
func readObject(r io.ReaderAt, size int64, path string, dwarf bool, conv Converter) (*Object, error) {
	f, err := elfread.NewFile(r, path)
	if err != nil {
		return nil, err
	}
	o := &Object{Path: path, Machine: f.ELF.Machine}
	for _, p := range f.ELF.Progs {
		if p.Type == elf.PT_LOAD {
			o.loads = append(o.loads, p.ProgHeader)
		}
	}
	// NoSFrame is shown after the object's path: it does not name it.
	var bad *sframe.ELFError
	switch t, err := sframe.OpenELF(f.ELF); {
	case err == nil:
		o.Table = t
	case errors.Is(err, sframe.ErrNoSection):
		o.NoSFrame = "no .sframe"
		if conv != nil {
			o.convert(conv, r, size)
		}
	case errors.As(err, &bad) && bad.Section != "":
		o.NoSFrame = fmt.Sprintf("bad .sframe at file offset %#x: %v", bad.Offset, bad.Err)
	case errors.As(err, &bad):
		o.NoSFrame = bad.Err.Error() // the file could not be read
	default:
		o.NoSFrame = err.Error()
	}
	o.BuildID = buildID(f.ELF)
	o.readSymbols(f.ELF)
	if dwarf {
		o.loadCFI(f)
	}
	return o, nil
}

// convert gives an object without .sframe the section conv builds from
// its CFI, and records what that cost.
func (o *Object) convert(conv Converter, r io.ReaderAt, size int64) {
	t0, c0 := time.Now(), processCPU()
	sec, addr, err := conv(o.Path, r, size)
	if err == nil {
		o.Table, err = sframe.Open(sec, addr)
	}
	c := &Conversion{Path: o.Path, Time: time.Since(t0), CPU: processCPU() - c0}
	if err != nil {
		c.Err = err.Error()
		o.Table, o.NoSFrame = nil, "no .sframe, and converting its CFI failed: "+c.Err
	} else {
		c.Bytes, o.NoSFrame = len(sec), ""
	}
	o.Conversion = c
}

func buildID(f *elf.File) string {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		if id := noteBuildID(s.Open(), s.Size, f.ByteOrder); id != "" {
			return id
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		if id := noteBuildID(p.Open(), p.Filesz, f.ByteOrder); id != "" {
			return id
		}
	}
	return ""
}

// readSymbols keeps the function symbols of .symtab and .dynsym (stripped
// files keep only the latter) and the executable sections.
func (o *Object) readSymbols(f *elf.File) {
	add := func(list []elf.Symbol) {
		for _, s := range list {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Name == "" || s.Section == elf.SHN_UNDEF {
				continue
			}
			o.syms = append(o.syms, symbol{s.Value, s.Value + s.Size, s.Name})
		}
	}
	if l, err := f.Symbols(); err == nil {
		add(l)
	}
	if l, err := f.DynamicSymbols(); err == nil {
		add(l)
	}
	if _, err := f.Symbols(); err != nil {
		o.readGoNames(f)
	}
	sort.SliceStable(o.syms, func(i, j int) bool { return o.syms[i].lo < o.syms[j].lo })
	if f.Type == elf.ET_EXEC || f.Type == elf.ET_DYN {
		o.nameEntry(f.Entry)
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type == elf.SHT_PROGBITS {
			o.secs = append(o.secs, section{s.Addr, s.Addr + s.Size, s.Name})
		}
	}
}

// readGoNames names the functions of a Go program without .symtab
// (-ldflags='-s -w') from its function table, as Go's runtime names
// them in its own tracebacks.
func (o *Object) readGoNames(f *elf.File) {
	if !gopclntab.IsGo(f) {
		return
	}
	t, err := gopclntab.Open(f)
	if err != nil {
		return
	}
	for fn, err := range t.Funcs() {
		if err == nil {
			o.syms = append(o.syms, symbol{fn.Entry, fn.End, fn.Name})
		}
	}
}

// nameEntry names _start, in a stripped executable that has
// no symbol for its entry point, the function SFrame says starts there (as
// _start always does).
func (o *Object) nameEntry(entry uint64) {
	if entry == 0 || o.Table == nil || o.symbolAt(entry) != "" {
		return
	}
	if r, err := o.Table.Lookup(entry); err == nil && r.FuncStart == entry {
		o.syms = append(o.syms, symbol{entry, entry + uint64(r.FuncSize), "_start"})
		sort.SliceStable(o.syms, func(i, j int) bool { return o.syms[i].lo < o.syms[j].lo })
	}
}

// symbolAt returns the function symbol covering addr (a file address), or "".
func (o *Object) symbolAt(addr uint64) string {
	i := sort.Search(len(o.syms), func(i int) bool { return o.syms[i].lo > addr }) - 1
	// Prefer a covering symbol; aliases share a start, sizeless ones cover
	// only their first byte.
	for k := i; k >= 0 && k > i-16; k-- {
		if s := o.syms[k]; addr == s.lo || addr < s.hi {
			return s.name
		}
	}
	return ""
}

// Symbolize names the function holding addr (a file address): its symbol;
// else, in a PLT section, the section in parentheses ("(.plt)"); else the
// file's base name and the start of the SFrame function holding it
// ("libc.so.6+0x1098e1", a function of a stripped file); else the section;
// else "".
func (o *Object) Symbolize(addr uint64) string {
	if n := o.symbolAt(addr); n != "" {
		return n
	}
	sec := ""
	for _, s := range o.secs {
		if addr >= s.lo && addr < s.hi {
			sec = s.name
			break
		}
	}
	if strings.Contains(sec, "plt") {
		return "(" + sec + ")"
	}
	if o.Table != nil {
		if r, err := o.Table.Lookup(addr); err == nil {
			return fmt.Sprintf("%s+%#x", baseName(o.Path), r.FuncStart)
		}
	}
	if sec != "" {
		return "(" + sec + ")"
	}
	return ""
}

// Bias returns the load bias of an executable mapping of the object:
// LoadBias of its PT_LOADs.
func (o *Object) Bias(m *MapEntry) (uint64, bool) { return LoadBias(o.loads, m) }

// LoadBias returns the load bias of an executable mapping m of a file
// whose PT_LOAD headers are loads: the address of file offset m.Offset
// minus its address in the executable PT_LOAD (the only one, if there is
// one) that holds it. It holds for a mapping of part of a segment too, and
// is 0 for a file linked at a fixed address.
func LoadBias(loads []elf.ProgHeader, m *MapEntry) (uint64, bool) {
	const page = 1 << 12
	for _, p := range loads {
		if p.Flags&elf.PF_X == 0 && len(loads) > 1 {
			continue
		}
		lo := p.Off &^ (page - 1)
		if m.Offset < lo || m.Offset >= p.Off+p.Filesz {
			continue
		}
		return m.Lo - m.Offset - (p.Vaddr - p.Off), true
	}
	return 0, false
}

// loadCFI parses .eh_frame and .debug_frame; .eh_frame FDEs come first
// among FDEs with the same start. A Go program's function table is read
// as cfi reads it (a section of its own), but only for goFDEs: the FDEs
// checked against are the file's own, and a Go function's is then the
// one Go's linker wrote into .debug_frame; its FDE from the table is
// kept only where .debug_frame has none (a stripped program).
func (o *Object) loadCFI(f *elfread.File) {
	cf, err := cfi.Open(f.ELF)
	if err != nil {
		o.cfiErr = err.Error()
		return
	}
	var fromTable []*cfi.FDE
	for _, s := range cf.Sections() {
		fdes, _ := cfi.Parse(s)
		for _, d := range fdes {
			switch {
			case d.Size == 0:
			case s.Name() == ".gopclntab":
				fromTable = append(fromTable, d)
			default:
				o.fdes = append(o.fdes, d)
			}
		}
	}
	sort.SliceStable(o.fdes, func(i, j int) bool { return o.fdes[i].Start < o.fdes[j].Start })
	o.goFDEs(fromTable)
	if len(o.fdes) == 0 && o.cfiErr == "" {
		o.cfiErr = "no CFI"
	}
}

// goFDEs records which FDEs of fdes Go's linker wrote for the functions
// of its table (fromTable: cfi's FDEs from it), and adds the table's FDE
// of each function .debug_frame does not describe. Go's linker writes a
// Go function's CFA and return address, as the table has them, and
// nothing else: no rule for the frame pointer, which the check then
// leaves out, and no end of the walk where the runtime's own unwinder
// stops (TopFrame and SPWrite functions, goexit, mstart: cfi's FDE from
// the table has the return address undefined there), which the check
// then takes from the table.
func (o *Object) goFDEs(fromTable []*cfi.FDE) {
	if len(fromTable) == 0 {
		return
	}
	o.goFuncs = map[uint64]bool{}
	var ctx cfi.Context
	var tab cfi.Table
	for _, d := range fromTable {
		if own := o.findFDE(d.Start); own == nil || own.Start != d.Start {
			o.fdes = append(o.fdes, d)
			continue
		}
		outermost := false
		if ctx.Execute(d, &tab) == nil && len(tab.Rows) > 0 {
			outermost = tab.Rows[0].Rule(d.CIE.RAColumn).Kind == cfi.Undefined
		}
		o.goFuncs[d.Start] = outermost
	}
	sort.SliceStable(o.fdes, func(i, j int) bool { return o.fdes[i].Start < o.fdes[j].Start })
}

// findFDE returns the DWARF FDE covering addr (a file address), or nil.
func (o *Object) findFDE(addr uint64) *cfi.FDE {
	i := sort.Search(len(o.fdes), func(i int) bool { return o.fdes[i].Start > addr }) - 1
	for k := i; k >= 0 && k > i-8; k-- {
		if d := o.fdes[k]; addr >= d.Start && addr < d.End() {
			return d
		}
	}
	return nil
}

// noteBuildID returns the GNU build ID in a note section or segment.
func noteBuildID(r interface{ Read([]byte) (int, error) }, size uint64, order interface {
	Uint32([]byte) uint32
}) string {
	const maxNotes = 1 << 16
	if size > maxNotes {
		return ""
	}
	b := make([]byte, size)
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			break
		}
	}
	b = b[:n]
	for len(b) >= 12 {
		nsz, dsz, typ := order.Uint32(b), order.Uint32(b[4:]), order.Uint32(b[8:])
		b = b[12:]
		an, ad := align4(uint64(nsz)), align4(uint64(dsz))
		if an > uint64(len(b)) || ad > uint64(len(b))-an {
			return ""
		}
		name := strings.TrimRight(string(b[:nsz]), "\x00")
		if name == "GNU" && typ == 3 { // NT_GNU_BUILD_ID
			return hex.EncodeToString(b[an : an+uint64(dsz)])
		}
		b = b[an+ad:]
	}
	return ""
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }
