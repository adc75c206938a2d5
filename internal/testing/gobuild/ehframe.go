package gobuild

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
)

// shareEHFrame rewrites the little-endian ELF64 program at path so that
// .eh_frame describes each Go function of names too: the first FDEs, in
// section order, whose CIE is GCC's ("zR", addresses DW_EH_PE_pcrel |
// DW_EH_PE_sdata4) are given the functions' ranges (their symbols' value
// and size), one each. Their C functions are then described by no FDE;
// the program is for reading, not running.
func shareEHFrame(path string, names []string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	ef, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return err
	}
	if ef.Class != elf.ELFCLASS64 || ef.ByteOrder != binary.LittleEndian {
		return fmt.Errorf("EHFrameOver: a little-endian ELF64 program only")
	}
	eh := ef.Section(".eh_frame")
	if eh == nil || eh.Type == elf.SHT_NOBITS {
		return fmt.Errorf("EHFrameOver: no .eh_frame (a cgo build has one)")
	}
	syms, err := ef.Symbols()
	if err != nil {
		return fmt.Errorf("EHFrameOver: %v (a build with symbols)", err)
	}
	fdes, err := gccFDEs(b[eh.Offset : eh.Offset+eh.Size])
	if err != nil {
		return err
	}
	for i, name := range names {
		fn := goSymbol(syms, name)
		if fn == nil {
			return fmt.Errorf("EHFrameOver: no symbol %s", name)
		}
		if i >= len(fdes) {
			return fmt.Errorf("EHFrameOver: %d FDEs to move, %d functions", len(fdes), len(names))
		}
		field := eh.Offset + uint64(fdes[i]) + 8 // the FDE's initial location
		pc := eh.Addr + uint64(fdes[i]) + 8
		binary.LittleEndian.PutUint32(b[field:], uint32(int32(int64(fn.Value)-int64(pc))))
		binary.LittleEndian.PutUint32(b[field+4:], uint32(fn.Size))
	}
	return os.WriteFile(path, b, 0o755)
}

// gccFDEs returns the section offsets of the FDEs in eh (an .eh_frame)
// whose CIE has augmentation "zR" with FDE addresses DW_EH_PE_pcrel |
// DW_EH_PE_sdata4 (0x1b), as GCC writes them.
func gccFDEs(eh []byte) ([]int, error) {
	le := binary.LittleEndian
	gcc := map[int]bool{} // CIE offsets
	var fdes []int
	for off := 0; off+8 <= len(eh); {
		n := int(le.Uint32(eh[off:]))
		if n == 0 {
			break
		}
		if n == 0xffffffff || off+4+n > len(eh) {
			return nil, fmt.Errorf("EHFrameOver: .eh_frame record at %#x: length %#x", off, n)
		}
		id := int(le.Uint32(eh[off+4:]))
		switch rec := eh[off+8 : off+4+n]; {
		case id == 0:
			// version, "zR\0", code and data alignment and the RA column
			// (one byte each for GCC's values), augmentation length, R.
			gcc[off] = len(rec) >= 9 && bytes.HasPrefix(rec[1:], []byte("zR\x00")) && rec[7] == 1 && rec[8] == 0x1b
		case gcc[off+4-id] && len(rec) >= 8:
			fdes = append(fdes, off)
		}
		off += 4 + n
	}
	return fdes, nil
}

// goSymbol is the function symbol named name, or name.abi0 (a Go
// assembly function's symbol).
func goSymbol(syms []elf.Symbol, name string) *elf.Symbol {
	for i, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && (s.Name == name || s.Name == name+".abi0") && s.Size > 0 {
			return &syms[i]
		}
	}
	return nil
}
