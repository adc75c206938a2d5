package gopclntab

import (
	"debug/gosym"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/pclntest"
)

var layouts = []struct {
	magic   uint32
	version Version
}{
	{pclntest.Magic116, Go116},
	{pclntest.Magic118, Go118},
	{pclntest.Magic120, Go120},
}

// sample is a table of four functions: one with a frame, one whose SP
// goes below entry and back (negative deltas are legal in the encoding),
// one without a pcsp table, one with large deltas (multi-byte varints).
func sample(magic uint32, order binary.ByteOrder, ptr int, quantum uint8) pclntest.Table {
	q := uint64(quantum)
	return pclntest.Table{
		Magic: magic, Order: order, PtrSize: ptr, Quantum: quantum, TextStart: 0x401000,
		Funcs: []pclntest.Func{
			{Name: "main.main", Off: 0, PCSP: pclntest.PCValue(quantum, pclntest.R(0, 4*q), pclntest.R(24, 20*q), pclntest.R(0, 2*q))},
			{Name: "runtime.goexit", Off: 32 * q, FuncID: 8, Flag: uint8(TopFrame), PCSP: pclntest.PCValue(quantum, pclntest.R(0, q), pclntest.R(-8, 3*q), pclntest.R(0, q))},
			{Name: "go:textfipsstart", Off: 40 * q},
			{Name: "runtime.morestack", Off: 40 * q, Flag: uint8(SPWrite | Asm), PCSP: pclntest.PCValue(quantum, pclntest.R(0, 8*q), pclntest.R(70000, 300*q))},
		},
		End: 400 * q,
	}
}

type row struct {
	pc, end uint64
	v       int32
}

func rows(t *testing.T, f *Func) []row {
	t.Helper()
	var rs []row
	it := f.PCSP()
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		rs = append(rs, row{v.PC, v.End, v.Value})
	}
	if err := it.Err(); err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return rs
}

// TestLayouts writes a table in each layout, byte order and pointer size
// and reads it back, the functions compared with debug/gosym's.
func TestLayouts(t *testing.T) {
	for _, l := range layouts {
		for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			for _, ptr := range []int{4, 8} {
				for _, q := range []uint8{1, 4} {
					name := fmt.Sprintf("%v-%v-ptr%d-q%d", l.version, order, ptr, q)
					t.Run(name, func(t *testing.T) {
						spec := sample(l.magic, order, ptr, q)
						data := pclntest.Write(spec)
						tab, err := Parse(data, spec.TextStart)
						if err != nil {
							t.Fatal(err)
						}
						if tab.Version() != l.version || tab.ByteOrder() != order || tab.PtrSize() != ptr || tab.Quantum() != int(q) {
							t.Fatalf("got %v %v ptr %d quantum %d", tab.Version(), tab.ByteOrder(), tab.PtrSize(), tab.Quantum())
						}
						checkGosym(t, tab, data, spec.TextStart)
						checkSample(t, tab, spec)
					})
				}
			}
		}
	}
}

func checkGosym(t *testing.T, tab *Table, data []byte, text uint64) {
	t.Helper()
	st, err := gosym.NewTable(nil, gosym.NewLineTable(data, text))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Funcs) != tab.NumFuncs() {
		t.Fatalf("%d functions, debug/gosym %d", tab.NumFuncs(), len(st.Funcs))
	}
	bad := 0
	for f, err := range tab.Funcs() {
		if err != nil {
			t.Fatal(err)
		}
		g := st.Funcs[f.Index]
		if f.Name != g.Name || f.Entry != g.Entry || f.End != g.End {
			if bad++; bad <= 5 {
				t.Errorf("func %d: %s [%#x, %#x), debug/gosym %s [%#x, %#x)", f.Index, f.Name, f.Entry, f.End, g.Name, g.Entry, g.End)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d functions differ from debug/gosym's", bad, len(st.Funcs))
	}
}

func checkSample(t *testing.T, tab *Table, spec pclntest.Table) {
	t.Helper()
	q := uint64(spec.Quantum)
	base := spec.TextStart
	for i, sf := range spec.Funcs {
		f, err := tab.Func(i)
		if err != nil {
			t.Fatal(err)
		}
		flag := Flag(sf.Flag)
		if f.FuncID != sf.FuncID || f.Flag != flag || f.HasPCSP() != (sf.PCSP != nil) {
			t.Errorf("%s: funcID %d flag %d pcsp %v, want %d %d %v", f.Name, f.FuncID, f.Flag, f.HasPCSP(), sf.FuncID, flag, sf.PCSP != nil)
		}
	}
	want := map[string][]row{
		"main.main":         {{base, base + 4*q, 0}, {base + 4*q, base + 24*q, 24}, {base + 24*q, base + 26*q, 0}},
		"runtime.goexit":    {{base + 32*q, base + 33*q, 0}, {base + 33*q, base + 36*q, -8}, {base + 36*q, base + 37*q, 0}},
		"go:textfipsstart":  nil,
		"runtime.morestack": {{base + 40*q, base + 48*q, 0}, {base + 48*q, base + 348*q, 70000}},
	}
	for f, err := range tab.Funcs() {
		if err != nil {
			t.Fatal(err)
		}
		if got := rows(t, &f); fmt.Sprint(got) != fmt.Sprint(want[f.Name]) {
			t.Errorf("%s: pcsp rows %v, want %v", f.Name, got, want[f.Name])
		}
	}
}

// TestTextStart: 1.18 and later take the caller's text start, else the
// header's, and refuse a table with neither; 1.16 entries are addresses.
func TestTextStart(t *testing.T) {
	spec := sample(pclntest.Magic120, binary.LittleEndian, 8, 1)
	data := pclntest.Write(spec)
	for _, c := range []struct{ arg, want uint64 }{{0, spec.TextStart}, {0x500000, 0x500000}} {
		tab, err := Parse(data, c.arg)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := tab.Func(1)
		if tab.TextStart() != c.want || f.Entry != c.want+32 {
			t.Errorf("Parse(%#x): text start %#x, entry %#x; want %#x", c.arg, tab.TextStart(), f.Entry, c.want)
		}
	}
	spec.TextStart = 0
	_, err := Parse(pclntest.Write(spec), 0)
	checkErr(t, err, "gopclntab: header at 0x18: the text start is 0")

	spec = sample(pclntest.Magic116, binary.LittleEndian, 8, 1)
	tab, err := Parse(pclntest.Write(spec), 0x999000)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := tab.Func(1); tab.TextStart() != 0 || f.Entry != spec.TextStart+32 {
		t.Errorf("Go 1.16: text start %#x, entry %#x; want 0, %#x", tab.TextStart(), f.Entry, spec.TextStart+32)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an *Error %q", err, err, want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestHeaderErrors: each malformed header is refused with where and what.
func TestHeaderErrors(t *testing.T) {
	good := pclntest.Write(sample(pclntest.Magic120, binary.LittleEndian, 8, 1))
	set := func(off int, b ...byte) []byte {
		d := append([]byte(nil), good...)
		copy(d[off:], b)
		return d
	}
	word := func(off int, v uint64) []byte {
		d := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(d[off:], v)
		return d
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "header at 0x0: 0 bytes, too short"},
		{"magic", set(0, 0xfe), "header at 0x0: magic 0xfffffffe is not"},
		{"go1.2", set(0, 0xfb), "a Go 1.2 to 1.15 table (magic 0xfffffffb): not supported"},
		{"pad", set(5, 1), "header at 0x4: pad bytes 0x0 0x1 are not zero"},
		{"quantum", set(6, 3), "header at 0x6: PC quantum 3"},
		{"ptrsize", set(7, 2), "header at 0x7: pointer size 2"},
		{"short", good[:40], "too short for a Go 1.20 header (72)"},
		{"functab offset", word(8+7*8, 1<<40), "header at 0x40: functab offset 0x10000000000 is past the table's end"},
		{"pctab offset", word(8+6*8, uint64(len(good)+1)), "header at 0x38: pctab offset"},
		{"nfunc", word(8, 1<<62), "header at 0x8: 4611686018427387904 functions: the functab at"},
		{"nfunc just too many", word(8, 5+uint64(len(good))/8), "functions: the functab at"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data, 0x1000)
			checkErr(t, err, c.want)
		})
	}
}

// TestFuncErrors: a malformed record is reported by Func, naming the
// entry, and the others still read.
func TestFuncErrors(t *testing.T) {
	spec := sample(pclntest.Magic118, binary.BigEndian, 8, 1)
	good := pclntest.Write(spec)
	tab, _ := Parse(good, spec.TextStart)
	functab := int(tab.functab)
	recOff := func(i int) int { return functab + int(binary.BigEndian.Uint32(good[functab+8*i+4:])) }
	mut := func(off int, v uint32) []byte {
		d := append([]byte(nil), good...)
		binary.BigEndian.PutUint32(d[off:], v)
		return d
	}
	for _, c := range []struct {
		name string
		data []byte
		fn   int
		want string
	}{
		{"func offset", mut(functab+8*1+4, 1<<30), 1, fmt.Sprintf("functab entry 1 at %#x: _func offset 0x40000000: the record (40 bytes) is not inside", functab+12)},
		{"func offset at end", mut(functab+8*1+4, uint32(len(good)-functab-39)), 1, "the record (40 bytes) is not inside"},
		{"entry mismatch", mut(recOff(2), 7), 2, fmt.Sprintf("_func 2 at %#x: entry 0x7 differs from the functab's 0x28", recOff(2))},
		{"end before entry", mut(functab+8*2, 0x10), 1, fmt.Sprintf("functab entry 1 at %#x: function ends at 0x401010, before its entry 0x401020", functab+8)},
		{"negative name", mut(recOff(0)+4, 0xffffffff), 0, "name offset -1 is negative"},
		{"name past end", mut(recOff(0)+4, 1<<30), 0, "name offset 0x40000000 is past the table's end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab, err := Parse(c.data, spec.TextStart)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tab.Func(c.fn)
			checkErr(t, err, c.want)
			n := 0
			for _, err := range tab.Funcs() {
				if err == nil {
					n++
				}
			}
			if n != tab.NumFuncs()-1 && !(c.name == "end before entry") {
				t.Errorf("%d functions read, want all but one", n)
			}
		})
	}
	// A name without its NUL: the last bytes of the table are a name.
	d := append([]byte(nil), good...)
	tab, _ = Parse(d, spec.TextStart)
	binary.BigEndian.PutUint32(d[recOff(0)+4:], uint32(len(d)-1-int(tab.funcnames)))
	d[len(d)-1] = 'x'
	_, err := tab.Func(0)
	checkErr(t, err, "has no terminating NUL")
	if _, err := tab.Func(4); err == nil {
		t.Error("Func(4) of 4 functions: no error")
	}
}

// TestPCValueErrors: a pcsp table that runs past the table or the
// function, or holds a varint wider than 32 bits, stops with an error
// naming the function.
func TestPCValueErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		pcsp []byte
		want string
	}{
		{"past function", pclntest.PCValue(1, pclntest.R(0, 8), pclntest.R(8, 100)), "func 0 (f) pcsp table at 0x"},
		{"varint too long", []byte{0x80, 0x80, 0x80, 0x80, 0x10}, "varint longer than 32 bits"},
		{"unterminated", []byte{0x02, 0x84}, "varint runs past the table's end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := pclntest.Table{Magic: pclntest.Magic120, Order: binary.LittleEndian, PtrSize: 8, Quantum: 1, TextStart: 0x1000,
				Funcs: []pclntest.Func{{Name: "f", PCSP: c.pcsp}}, End: 64}
			data := pclntest.Write(spec)
			if c.name == "unterminated" {
				// Put the table last: cut the table after it.
				tab, _ := Parse(data, 0)
				data = data[:tab.pctab+1+uint64(len(c.pcsp))]
				tab = &Table{data: data, order: tab.order, quantum: 1, pctab: tab.pctab}
				f := Func{Name: "f", Entry: 0x1000, End: 0x1040, t: tab, pcsp: 1}
				it := f.PCSP()
				for _, ok := it.Next(); ok; _, ok = it.Next() {
				}
				checkErr(t, it.Err(), c.want)
				return
			}
			tab, err := Parse(data, 0)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := tab.Func(0)
			it := f.PCSP()
			n := 0
			for _, ok := it.Next(); ok; _, ok = it.Next() {
				n++
			}
			checkErr(t, it.Err(), c.want)
			if _, ok := it.Next(); ok {
				t.Error("Next after an error gave a row")
			}
		})
	}
}
