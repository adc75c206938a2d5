package gopclntab

import "fmt"

// PCValue is one row of a pc-value table: Value holds from PC up to End.
type PCValue struct {
	PC, End uint64
	Value   int32
}

// PCIter pulls the rows of one pc-value table, one at a time.
//
// The encoding: the value starts at -1 and the PC at the function's entry;
// each row is a value delta (a varint, zigzag-signed) then a PC delta (a
// varint, in units of the quantum). A zero value delta anywhere but in the
// first row ends the table.
type PCIter struct {
	t     *Table
	fn    int // for errors: the function's index and name
	name  string
	off   uint64 // next byte to read
	pc    uint64
	limit uint64 // no row may end past it (the next function's entry)
	val   int32
	first bool
	done  bool
	err   error
}

// PCSP returns an iterator over f's pcsp table: the stack pointer's
// distance below its value at entry (where, on x86, the return address has
// just been pushed; on LR machines nothing has been pushed), by PC. A
// function without a pcsp table gives no rows.
func (f *Func) PCSP() PCIter {
	it := PCIter{t: f.t, fn: f.Index, name: f.Name, pc: f.Entry, limit: f.End, val: -1, first: true, done: f.pcsp == 0}
	if f.t == nil {
		it.done = true
		return it
	}
	it.off = f.t.pctab + uint64(f.pcsp)
	return it
}

// HasPCSP says whether f has a pcsp table.
func (f *Func) HasPCSP() bool { return f.pcsp != 0 }

// Next returns the next row, or false after the last one or on an error
// (Err).
func (it *PCIter) Next() (PCValue, bool) {
	if it.done {
		return PCValue{}, false
	}
	at := it.off
	d, ok := it.varint()
	if !ok {
		return PCValue{}, false
	}
	if d == 0 && !it.first {
		it.done = true
		return PCValue{}, false
	}
	it.first = false
	// Zigzag: the low bit is the sign.
	if d&1 != 0 {
		it.val += int32(^(d >> 1))
	} else {
		it.val += int32(d >> 1)
	}
	n, ok := it.varint()
	if !ok {
		return PCValue{}, false
	}
	step := uint64(n) * uint64(it.t.quantum)
	if step > it.limit-it.pc {
		it.fail(at, "row of value %d from %#x runs %#x bytes, past the function's end %#x", it.val, it.pc, step, it.limit)
		return PCValue{}, false
	}
	v := PCValue{PC: it.pc, End: it.pc + step, Value: it.val}
	it.pc = v.End
	return v, true
}

// Err returns the error that stopped the iteration, if any.
func (it *PCIter) Err() error { return it.err }

// varint reads an unsigned LEB128 number of at most 32 bits.
func (it *PCIter) varint() (uint32, bool) {
	var v uint32
	start := it.off
	for shift := uint(0); ; shift += 7 {
		if it.off >= uint64(len(it.t.data)) {
			it.fail(start, "varint runs past the table's end (%#x)", len(it.t.data))
			return 0, false
		}
		b := it.t.data[it.off]
		it.off++
		if shift == 28 && b > 0x0f {
			it.fail(start, "varint longer than 32 bits")
			return 0, false
		}
		v |= uint32(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, true
		}
	}
}

func (it *PCIter) fail(off uint64, format string, args ...any) {
	it.done = true
	it.err = &Error{What: fmt.Sprintf("func %d (%s) pcsp table", it.fn, it.name), Off: int64(off), Msg: fmt.Sprintf(format, args...)}
}
