package elfwrite

import (
	"encoding/binary"
	"testing"
)

// note returns one ELF note with a 4-byte name, descsz bytes of
// descriptor, padded to align.
func note(descsz int, align int) []byte {
	b := make([]byte, 12)
	binary.LittleEndian.PutUint32(b, 4)
	binary.LittleEndian.PutUint32(b[4:], uint32(descsz))
	binary.LittleEndian.PutUint32(b[8:], 1)
	b = append(b, "GNU\x00"...)
	b = append(b, make([]byte, descsz)...)
	for len(b)%align != 0 {
		b = append(b, 0)
	}
	return b
}

func TestMergeNotes(t *testing.T) {
	type seg struct {
		notes []int // descriptor sizes
		align int
		gap   int // bytes left before this segment's notes
	}
	tests := []struct {
		name      string
		segs      []seg
		ok        bool
		wantAlign uint64
	}{
		{"GNU ld: 8-aligned property note, then build-id and ABI tag", []seg{{[]int{16}, 8, 0}, {[]int{20, 16}, 4, 0}}, true, 4},
		{"gold: property, then ABI tag and build-id", []seg{{[]int{16}, 8, 0}, {[]int{16, 20}, 4, 0}}, true, 4},
		{"three 4-aligned segments", []seg{{[]int{20}, 4, 0}, {[]int{16}, 4, 0}, {[]int{8}, 4, 0}}, true, 4},
		{"two 8-aligned", []seg{{[]int{16}, 8, 0}, {[]int{32}, 8, 0}}, true, 8},
		{"one segment: nothing to merge", []seg{{[]int{16, 20}, 4, 0}}, false, 0},
		{"not back to back", []seg{{[]int{16}, 8, 0}, {[]int{20}, 4, 8}}, false, 0},
		// An 8-aligned note with a 12-byte descriptor is padded to 8; read
		// with 4-byte alignment the padding becomes a (bad) note.
		{"8-aligned padding a 4-aligned reader misreads", []seg{{[]int{12}, 8, 0}, {[]int{20}, 4, 0}}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const base = 0x200
			in := make([]byte, base)
			var phs []phdr
			phs = append(phs, phdr{typ: ptLoad, filesz: 0x1000, memsz: 0x1000, align: 0x1000})
			for _, s := range tc.segs {
				in = append(in, make([]byte, s.gap)...)
				off := uint64(len(in))
				for _, d := range s.notes {
					in = append(in, note(d, s.align)...)
				}
				size := uint64(len(in)) - off
				phs = append(phs, phdr{typ: ptNote, flags: pfR, off: off, vaddr: 0x400000 + off, filesz: size, memsz: size, align: uint64(s.align)})
			}
			f := &file{in: in, bo: binary.LittleEndian}
			out, ok := f.mergeNotes(phs)
			if ok != tc.ok {
				t.Fatalf("mergeNotes ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if len(out) != 2 || out[1].typ != ptNote {
				t.Fatalf("headers after merging: %+v, want the PT_LOAD and one PT_NOTE", out)
			}
			m := out[1]
			if m.off != base || m.filesz != uint64(len(in)-base) || m.memsz != m.filesz || m.vaddr != 0x400000+base || m.align != tc.wantAlign {
				t.Errorf("merged PT_NOTE %+v, want [%#x,%#x) at %#x aligned %d", m, base, len(in), 0x400000+base, tc.wantAlign)
			}
		})
	}
}
