package translate

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// directAgrees checks one FDE: when the direct path takes it, executing
// and translating it must succeed and give the same rows, without a
// diagnostic or a flexible FDE. It says whether the direct path took it.
func directAgrees(t *testing.T, a *abi, c *directCIE, f *cfi.FDE) bool {
	t.Helper()
	got, ok := a.directRows(f, c, nil)
	if !ok {
		return false
	}
	var ctx cfi.Context
	tab := &cfi.Table{}
	err := ctx.Execute(f, tab)
	if err != nil {
		t.Fatalf("FDE at %#x: taken by the direct path, but executing it fails: %v", f.Offset, err)
	}
	b := *a
	b.rows = nil
	want, d := b.function(tab)
	if d != nil || want.Flex {
		t.Fatalf("FDE at %#x: taken by the direct path, but translating it gives %+v (flex %v)", f.Offset, d, want.Flex)
	}
	if diff := cmp.Diff(want.Rows, got); diff != "" {
		t.Fatalf("FDE at %#x (program % x): rows (-executed +direct)\n%s", f.Offset, f.Program, diff)
	}
	return true
}

// TestDirectMatches: over every FDE of the x86-64 fixtures, two system
// files and any files named in CFI2SFRAME_DIRECT_FILES (space-separated),
// the direct path gives what executing and translating give wherever it
// takes an FDE, and it takes most of them.
func TestDirectMatches(t *testing.T) {
	paths, err := filepath.Glob("../testdata/sframe/v*-x86_64-*")
	if err != nil {
		t.Fatal(err)
	}
	paths = slices.DeleteFunc(paths, func(p string) bool { return strings.HasSuffix(p, ".objdump") })
	for _, p := range []string{"/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	// This test's own binary: a Go program, whose functions' FDEs come
	// from its function table in Go's linker's encoding (internal/gocfi).
	if self, err := os.Executable(); err == nil {
		paths = append(paths, self)
	}
	paths = append(paths, strings.Fields(os.Getenv("CFI2SFRAME_DIRECT_FILES"))...)
	for _, v := range []uint8{sframe.Version2, sframe.Version3} {
		a, err := newABI(elf.EM_X86_64, binary.LittleEndian, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			f, err := elfread.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			st := openCFI(t, f)
			ctx := st.Context(st.Entries())
			var c directCIE
			taken, n := 0, 0
			for {
				fde, err := ctx.Next()
				if err != nil {
					break
				}
				n++
				if directAgrees(t, &a, &c, fde) {
					taken++
				}
			}
			f.Close()
			t.Logf("V%d %s: %d of %d FDEs taken by the direct path", v, p, taken, n)
			if n != len(st.Entries()) || n >= 100 && taken*2 < n {
				t.Errorf("%s: the direct path took %d of %d FDEs (of %d)", p, taken, n, len(st.Entries()))
			}
		}
	}
}

// FuzzDirect runs arbitrary CIE initial instructions and FDE programs
// through the direct path and through executing and translating: where
// the direct path takes one, the two must agree (directAgrees). The
// first bytes choose the code and data alignment, the function's size
// and where the CIE's instructions end.
func FuzzDirect(f *testing.F) {
	cie := []byte{0x0c, 0x07, 0x08, 0x90, 0x01} // CFA = rsp+8, rip at CFA-8
	for _, prog := range [][]byte{
		{0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x4a, 0x0c, 0x07, 0x08},
		{0x0a, 0x42, 0x0e, 0x18, 0x41, 0x0b, 0x0e, 0x08, 0x44},
		{0x02, 0x80, 0x0e, 0x20, 0x03, 0x00, 0x01, 0xc6, 0x04, 0x10, 0x00, 0x00, 0x00, 0x0e, 0x08},
		{0x41, 0x83, 0x03, 0x41, 0x2e, 0x10, 0x41, 0x08, 0x06, 0x41},
	} {
		f.Add(byte(0), byte(0xf8), byte(40), byte(len(cie)), append(slices.Clone(cie), prog...))
	}
	// Go's linker's CIE (CFA = rsp+8, rip at CFA-8 by offset_extended,
	// data alignment -4) and a program of internal/gocfi's ops: the CFA
	// by def_cfa_offset_sf, rbp saved by offset_extended_sf and back in
	// its register by same_value.
	goCIE := []byte{0x0c, 0x07, 0x08, 0x05, 0x10, 0x02, 0x00, 0x00}
	goProg := []byte{0x13, 0x7e, 0x41, 0x13, 0x7c, 0x41, 0x11, 0x06, 0x04, 0x45, 0x08, 0x06, 0x13, 0x7e, 0x41, 0x13, 0x7c, 0x48, 0x07, 0x06}
	f.Add(byte(0), byte(0xfc), byte(40), byte(len(goCIE)), append(slices.Clone(goCIE), goProg...))
	a, err := newABI(elf.EM_X86_64, binary.LittleEndian, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, code, data, size, split byte, b []byte) {
		k := min(int(split), len(b))
		fde := &cfi.FDE{
			CIE: &cfi.CIE{CodeAlign: uint64(code%4 + 1), DataAlign: int64(int8(data)), RAColumn: 16,
				Initial: b[:k:k]},
			Start: 0x1000, Size: uint64(size) + 1, Program: b[k:],
		}
		var c directCIE
		directAgrees(t, &a, &c, fde)
	})
}
