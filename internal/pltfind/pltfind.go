// Package pltfind finds a linked file's PLT sections, which translate
// describes from their instructions (internal/pltsim simulates them), for
// the conversion (convert), the check against the CFI (verify) and the
// report alike. It is not in translate, whose API takes the sections
// (translate.PLT) and not a debug/elf file.
package pltfind

import (
	"debug/elf"

	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Sections returns the PLT sections the translator describes from their
// instructions.
func Sections(ef *elf.File) []translate.PLT {
	var out []translate.PLT
	for _, s := range ef.Sections {
		switch s.Name {
		case ".plt", ".plt.sec", ".plt.got":
		case ".iplt": // lld's IRELATIVE stubs in a static executable
			if ef.Machine != elf.EM_AARCH64 {
				continue
			}
		default:
			continue
		}
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_EXECINSTR == 0 || s.Size == 0 {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		out = append(out, translate.PLT{Name: s.Name, Addr: s.Addr, Data: data, EntSize: s.Entsize})
	}
	return out
}
