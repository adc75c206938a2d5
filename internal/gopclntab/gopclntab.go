// Package gopclntab reads the function table Go's linker writes into every
// Go binary (.gopclntab, the runtime's pcHeader and what follows it), for
// binaries built by Go 1.16 and later, in either byte order, with 4- or
// 8-byte pointers. Stripped Go binaries (-ldflags='-s -w') have no
// .debug_frame, but this table still holds, for every function, its
// entry, its end and the stack-pointer delta at each PC (the pcsp table):
// internal/gocfi turns that into call-frame information.
//
// Open (OpenBytes for a file in memory) finds the table in an ELF file and
// the address its entries are relative to (TextStart); Parse reads a
// table's bytes when the caller knows that address. A Table is read in
// place: NumFuncs and Func give one function at a time (Funcs iterates
// them), and a Func's PCSP gives its pcsp rows one at a time, so nothing
// is built for the whole table.
//
//	t, err := gopclntab.Open(ef)
//	for f, err := range t.Funcs() {
//		if err != nil { ... }       // one malformed record: skip it
//		it := f.PCSP()
//		for v, ok := it.Next(); ok; v, ok = it.Next() {
//			// SP is v.Value bytes below its value at entry from v.PC up to v.End
//		}
//		if err := it.Err(); err != nil { ... }
//	}
//
// The layout, by magic number (the byte order is the one in which the
// magic reads as one of these):
//
//   - 0xfffffffa (Go 1.16, 1.17): function entries are absolute addresses
//     (pointer-sized); the _func record starts with that address. 1.17
//     added the flag byte after funcID (1.16 has a zero pad byte there).
//   - 0xfffffff0 (Go 1.18, 1.19): entries are 32-bit offsets from the start
//     of the Go text (runtime.text), which the header holds.
//   - 0xfffffff1 (Go 1.20 and later): as 1.18, and _func gains startLine
//     before funcID. From Go 1.26 the header's text start is always 0; the
//     runtime uses its moduledata's text field, which Open reads.
//
// Every count and offset is checked against the table's size before it is
// used; errors are *Error values that say where (an offset in the table,
// in hex) and what is wrong.
package gopclntab

import (
	"encoding/binary"
	"fmt"
	"iter"
	"sort"
)

// Magic numbers of the versions read here.
const (
	magic116 = 0xfffffffa
	magic118 = 0xfffffff0
	magic120 = 0xfffffff1
	magic12  = 0xfffffffb // Go 1.2 to 1.15: recognised to be refused by name
)

// Version is the layout of a table, named by the first Go release that
// wrote it.
type Version uint8

const (
	Go116 Version = iota + 1 // Go 1.16 and 1.17
	Go118                    // Go 1.18 and 1.19
	Go120                    // Go 1.20 and later
)

func (v Version) String() string {
	switch v {
	case Go116:
		return "Go 1.16"
	case Go118:
		return "Go 1.18"
	case Go120:
		return "Go 1.20"
	}
	return fmt.Sprintf("Version(%d)", uint8(v))
}

// Flag is a function's flag byte (Go's abi.FuncFlag), 0 in Go 1.16.
type Flag uint8

const (
	TopFrame Flag = 1 << iota // outermost frame of a stack: unwinding stops here (goexit, mstart, rt0_go)
	SPWrite                   // writes SP other than by a constant: the pcsp table cannot describe its frame
	Asm                       // written in assembly (recent linkers: Go 1.19 sets it, 1.16 has no flags)
)

// Error is a malformed table: what part of it, at which offset in the
// table, and what is wrong.
type Error struct {
	What string // "header", "functab entry 12", "func 12 (main.main) pcsp table"
	Off  int64  // offset in the table
	Msg  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gopclntab: %s at %#x: %s", e.What, e.Off, e.Msg)
}

func errorf(what string, off uint64, format string, args ...any) *Error {
	return &Error{What: what, Off: int64(off), Msg: fmt.Sprintf(format, args...)}
}

// Table is a parsed function table. It keeps the bytes it was given and
// reads them as it is asked: it is not changed after Parse or Open, so
// several goroutines may read it at once.
type Table struct {
	data      []byte
	order     binary.ByteOrder
	version   Version
	quantum   uint8
	ptrSize   uint8
	nfunc     int
	textStart uint64 // Go 1.18 and later: what entry offsets are relative to
	hdrText   uint64 // the header's text start (0 from Go 1.26; unrelocated in some PIEs)
	funcnames uint64 // offset of funcnametab
	pctab     uint64 // offset of pctab
	functab   uint64 // offset of functab (and base of _func offsets)
	field     uint64 // size of a functab field: pointer (1.16) or 4
	funcSize  uint64 // size of the fixed part of _func
	idOff     uint64 // offset of funcID in _func (flag follows it)
}

// Version is the table's layout.
func (t *Table) Version() Version { return t.version }

// ByteOrder is the table's byte order (the target's).
func (t *Table) ByteOrder() binary.ByteOrder { return t.order }

// PtrSize is the target's pointer size, 4 or 8.
func (t *Table) PtrSize() int { return int(t.ptrSize) }

// Quantum is the PC quantum, the minimum instruction size: 1 on x86, 2 on
// s390x, 4 on the fixed-width RISC architectures. pc-value tables count
// PCs in units of it.
func (t *Table) Quantum() int { return int(t.quantum) }

// TextStart is the address Go 1.18 and later entry offsets are relative
// to (runtime.text), 0 for Go 1.16 tables, whose entries are addresses.
func (t *Table) TextStart() uint64 { return t.textStart }

// Size is the table's size in bytes (up to the end of what holds it when
// Open found it without a section of its own).
func (t *Table) Size() int { return len(t.data) }

// NumFuncs is the number of functions in the table.
func (t *Table) NumFuncs() int { return t.nfunc }

// Parse reads a table's header and checks that its function table lies
// inside data. textStart is the address of runtime.text, which Go 1.18
// and later entries are offsets from: 0 takes the header's (which Go 1.26
// and later leave 0, and which a PIE whose dynamic relocations the linker
// did not apply to the file holds unrelocated); it is not used for Go
// 1.16 tables.
func Parse(data []byte, textStart uint64) (*Table, error) {
	t, err := parseHeader(data)
	if err != nil {
		return nil, err
	}
	if t.version == Go116 {
		return t, nil
	}
	t.textStart = textStart
	if t.textStart == 0 {
		t.textStart = t.hdrText
	}
	if t.textStart == 0 {
		return nil, errorf("header", 8+2*uint64(t.ptrSize), "the text start is 0 (Go 1.26 and later write 0 there): pass runtime.text's address")
	}
	return t, nil
}

// parseHeader reads the header, leaving textStart to the caller.
func parseHeader(data []byte) (*Table, error) {
	if len(data) < 8 {
		return nil, errorf("header", 0, "%d bytes, too short for a header", len(data))
	}
	t := &Table{data: data}
	var m uint32
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		m = o.Uint32(data)
		switch m {
		case magic116:
			t.version = Go116
		case magic118:
			t.version = Go118
		case magic120:
			t.version = Go120
		case magic12:
			return nil, errorf("header", 0, "a Go 1.2 to 1.15 table (magic %#x): not supported", m)
		default:
			continue
		}
		t.order = o
		break
	}
	if t.version == 0 {
		return nil, errorf("header", 0, "magic %#x is not a Go 1.16 or later table's", binary.LittleEndian.Uint32(data))
	}
	t.quantum, t.ptrSize = data[6], data[7]
	if data[4] != 0 || data[5] != 0 {
		return nil, errorf("header", 4, "pad bytes %#x %#x are not zero", data[4], data[5])
	}
	if t.quantum != 1 && t.quantum != 2 && t.quantum != 4 {
		return nil, errorf("header", 6, "PC quantum %d (1, 2 or 4)", t.quantum)
	}
	if t.ptrSize != 4 && t.ptrSize != 8 {
		return nil, errorf("header", 7, "pointer size %d (4 or 8)", t.ptrSize)
	}
	p := uint64(t.ptrSize)
	words := uint64(7) // nfunc, nfiles, [textStart,] funcnametab, cutab, filetab, pctab, functab
	if t.version != Go116 {
		words = 8
	}
	if uint64(len(data)) < 8+words*p {
		return nil, errorf("header", 0, "%d bytes, too short for a %v header (%d)", len(data), t.version, 8+words*p)
	}
	word := func(i uint64) uint64 {
		if p == 4 {
			return uint64(t.order.Uint32(data[8+i*4:]))
		}
		return t.order.Uint64(data[8+i*8:])
	}
	offs := uint64(2) // the word holding funcnametab's offset
	switch t.version {
	case Go116:
		t.field, t.funcSize, t.idOff = p, p+36, p+32
	case Go118:
		t.hdrText, offs = word(2), 3
		t.field, t.funcSize, t.idOff = 4, 40, 36
	case Go120:
		t.hdrText, offs = word(2), 3
		t.field, t.funcSize, t.idOff = 4, 44, 40
	}
	t.funcnames, t.pctab, t.functab = word(offs), word(offs+3), word(offs+4)
	for i, o := range []uint64{t.funcnames, t.pctab, t.functab} {
		if o > uint64(len(data)) {
			name := [...]string{"funcnametab", "pctab", "functab"}[i]
			return nil, errorf("header", 8+(offs+[...]uint64{0, 3, 4}[i])*p, "%s offset %#x is past the table's end (%#x)", name, o, len(data))
		}
	}
	n := word(0)
	// The functab holds nfunc (entry, _func offset) pairs and the end PC.
	room := (uint64(len(data)) - t.functab) / t.field
	if n >= room/2 || 2*n+1 > room {
		return nil, errorf("header", 8, "%d functions: the functab at %#x has room for %d fields, not 2*%d+1", n, t.functab, room, n)
	}
	t.nfunc = int(n)
	return t, nil
}

// uint reads an n-byte field (4 or 8) at off, already checked in range.
func (t *Table) uint(off, n uint64) uint64 {
	if n == 4 {
		return uint64(t.order.Uint32(t.data[off:]))
	}
	return t.order.Uint64(t.data[off:])
}

// entry is functab entry i's PC (i == NumFuncs: the end of the last
// function).
func (t *Table) entry(i int) uint64 {
	v := t.uint(t.functab+2*uint64(i)*t.field, t.field)
	if t.version == Go116 {
		return v
	}
	return t.textStart + v
}

// Func is one function of a Table.
type Func struct {
	Index int    // its place in the table
	Name  string // as the runtime names it: "main.main", "runtime.goexit", "type:.eq.[2]string"
	Entry uint64 // first PC
	// End is the next function's entry (for the last one, the end of the
	// Go text): it includes the alignment padding after the function, as
	// debug/gosym's End does. The pcsp table's last row ends at the
	// function's own end (its symbol's size), up to which Go's linker
	// writes the function's FDE.
	End uint64
	// FuncID is the raw funcID byte. Its numbering differs between Go
	// versions (funcID_wrapper, funcID_asmcgocall, ... were renumbered):
	// decide by Name, not by value.
	FuncID uint8
	Flag   Flag

	t    *Table
	pcsp uint32 // offset of the pcsp table in pctab, 0 for none
}

// Func returns function i (0 <= i < NumFuncs), or an *Error when its
// functab entry or _func record is malformed.
func (t *Table) Func(i int) (Func, error) {
	if i < 0 || i >= t.nfunc {
		return Func{}, errorf("functab", t.functab, "function %d out of range [0, %d)", i, t.nfunc)
	}
	// Error names, made only for an error: a name per function would
	// cost a tenth of a conversion.
	entryWhat := func() string { return fmt.Sprintf("functab entry %d", i) }
	funcWhat := func() string { return fmt.Sprintf("_func %d", i) }
	at := t.functab + 2*uint64(i)*t.field
	f := Func{Index: i, t: t, Entry: t.entry(i), End: t.entry(i + 1)}
	if f.End < f.Entry {
		return Func{}, errorf(entryWhat(), at, "function ends at %#x, before its entry %#x", f.End, f.Entry)
	}
	foff := t.uint(at+t.field, t.field)
	rec := t.functab + foff
	if size := uint64(len(t.data)); foff > size || t.funcSize > size || rec > size-t.funcSize {
		return Func{}, errorf(entryWhat(), at+t.field, "_func offset %#x: the record (%d bytes) is not inside the table (%#x bytes)", foff, t.funcSize, len(t.data))
	}
	p := uint64(t.ptrSize)
	if t.version != Go116 {
		p = 4
	}
	if e := t.uint(rec, p); e != t.uint(at, t.field) {
		return Func{}, errorf(funcWhat(), rec, "entry %#x differs from the functab's %#x", e, t.uint(at, t.field))
	}
	nameOff := int32(t.order.Uint32(t.data[rec+p:]))
	name, err := t.name(nameOff)
	if err != nil {
		return Func{}, errorf(funcWhat(), rec+p, "%s", err)
	}
	f.Name = name
	f.pcsp = t.order.Uint32(t.data[rec+p+12:])
	f.FuncID = t.data[rec+t.idOff]
	f.Flag = Flag(t.data[rec+t.idOff+1])
	return f, nil
}

// FuncAt returns the function whose [Entry, End) holds pc, found by a
// binary search of the functab (sorted by entry, as linkers write it);
// false when none does or its record is malformed.
func (t *Table) FuncAt(pc uint64) (Func, bool) {
	i := sort.Search(t.nfunc, func(i int) bool { return t.entry(i) > pc }) - 1
	if i < 0 {
		return Func{}, false
	}
	f, err := t.Func(i)
	if err != nil || pc < f.Entry || pc >= f.End {
		return Func{}, false
	}
	return f, true
}

// name reads the NUL-terminated name at off in funcnametab.
func (t *Table) name(off int32) (string, error) {
	if off < 0 {
		return "", fmt.Errorf("name offset %d is negative", off)
	}
	start := t.funcnames + uint64(off)
	if start >= uint64(len(t.data)) {
		return "", fmt.Errorf("name offset %#x is past the table's end", off)
	}
	for i, c := range t.data[start:] {
		if c == 0 {
			return string(t.data[start : start+uint64(i)]), nil
		}
	}
	return "", fmt.Errorf("name at %#x has no terminating NUL", start)
}

// Funcs iterates over the functions in table order (by entry), giving
// each malformed record's error in its place.
func (t *Table) Funcs() iter.Seq2[Func, error] {
	return func(yield func(Func, error) bool) {
		for i := range t.nfunc {
			if !yield(t.Func(i)) {
				return
			}
		}
	}
}
