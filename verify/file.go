package verify

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/plt"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// CheckFile checks the named ELF file: its .sframe against its CFI at
// every PC (the .sframe a loader reads, through PT_GNU_SFRAME, when it can
// be found; the section otherwise), every CFI function for being in
// .sframe, and a linked file's layout (Result.Layout). An empty or
// SHT_NOBITS .sframe describes nothing: every CFI function is checked
// for being missing. The file is mapped, and its CFI executed one FDE at
// a time as the check reaches its code, so memory grows with the FDE
// list, not with every row of the file. The first 10 missing
// and skipped functions are listed in Result.Findings; all are counted.
// An error names the file once.
func CheckFile(name string) (*Result, error) {
	in, err := mapped.Open(name)
	if err != nil {
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", name, err)
		}
		return nil, err // names the file
	}
	defer in.Close()
	f, err := elfread.NewFileBytes(in.Data, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// The bytes a loader reads, as sframe.OpenELF finds them: through
	// PT_GNU_SFRAME when it can be followed, the section otherwise; the
	// layout check reports where the two disagree. No bytes (an empty or
	// SHT_NOBITS .sframe): no function is described, and every CFI
	// function is checked for being missing.
	layout := checkLayout(f.ELF, in.Data)
	var sec *sframe.Table
	es, err := f.LoaderSFrame()
	switch {
	case err != nil && !(es == nil && noSFrameData(f.ELF)):
		return nil, fmt.Errorf("%s: %w", name, err)
	case err == nil && len(es.Data) > 0:
		if sec, err = sframe.Open(es.Data, es.Addr); err == nil {
			err = sec.Check()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, es.Where(), err)
		}
	}
	// The CFI is executed one FDE at a time as the check reaches its code.
	st, err := cfi.OpenBytes(in.Data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Symbols are read only when a finding needs a name.
	var sym func(uint64) string
	symbol := func(addr uint64) string {
		if sym == nil {
			sym = gopclntab.Symbolizer(f)
		}
		return sym(addr)
	}
	res := check(input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, SFrame: sec, Stream: st, Symbol: symbol,
		PLTs: plt.Sections(f.ELF)})
	res.Layout = layout
	res.Agree = res.Agree && len(layout) == 0
	return res, nil
}

// noSFrameData says whether the file's .sframe section holds no bytes:
// SHT_NOBITS (objcopy --only-keep-debug makes allocated sections so) or
// empty.
func noSFrameData(ef *elf.File) bool {
	for _, s := range ef.Sections {
		if s.Name == ".sframe" || s.Type == shtGNUSFrame {
			return s.Type == elf.SHT_NOBITS || s.Size == 0
		}
	}
	return false
}
