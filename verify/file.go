package verify

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/internal/codeentry"
	"github.com/cfi2sframe/cfi2sframe/internal/codeflow"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/gopclntab"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
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
	layout := checkLayout(f.ELF, in.Data)
	sec, problem, err := loaderTable(f, len(layout) > 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if problem != nil {
		layout = append(layout, *problem)
	}
	if sec != nil {
		layout = append(layout, blockProblems(sec)...)
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
	// The code is loaded only when a function no CFI covers is met.
	var code *codeflow.Code
	loaded := false
	loadCode := func() *codeflow.Code {
		if !loaded {
			loaded = true
			code, _, _ = codeentry.Load(f, codeentry.Options{}) // nil on error: those functions stay NoCFI
			if code != nil {
				code = codeflow.InferNoReturn(code) // where the analysis ended its paths
			}
		}
		return code
	}
	res := check(input{Machine: f.ELF.Machine, Order: f.ELF.ByteOrder, SFrame: sec, Stream: st, Symbol: symbol,
		PLTs: pltfind.Sections(f.ELF), Code: loadCode})
	res.Layout = layout
	res.Agree = res.Agree && len(layout) == 0
	return res, nil
}

// loaderTable opens and checks the SFrame data a loader reads, as
// sframe.OpenELF finds them: through PT_GNU_SFRAME when it can be
// followed, the section otherwise (checkLayout reports why, and where the
// two disagree). No bytes (an empty or SHT_NOBITS .sframe, or, when
// laidOut says that checkLayout reported a problem, a PT_GNU_SFRAME a
// loader cannot follow and nothing to read instead): nil, no function is
// described, and every CFI function is checked for being missing. When
// PT_GNU_SFRAME's bytes are no sound SFrame section and the .sframe
// section's are, the section is checked and problem says so. Errors do not
// name the file.
func loaderTable(f *elfread.File, laidOut bool) (sec *sframe.Table, problem *LayoutProblem, err error) {
	es, err := f.LoaderSFrame()
	switch {
	case err != nil && es == nil && noSFrameData(f.ELF),
		errors.Is(err, elfread.ErrNoLoaderSFrame) && laidOut:
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	case len(es.Data) == 0:
		return nil, nil, nil
	}
	if sec, err = checkedTable(es); err == nil || !es.Segment {
		if err != nil {
			err = fmt.Errorf("%s: %w", es.Where(), err)
		}
		return sec, nil, err
	}
	// The kernel would refuse what PT_GNU_SFRAME holds: the layout check
	// has said how it differs from the section, which may still be sound.
	s, serr := f.SFrame()
	if serr == nil && len(s.Data) > 0 {
		if sec, serr = checkedTable(s); serr == nil {
			return sec, &LayoutProblem{What: "sframe-segment", Detail: fmt.Sprintf("%s: %v; checked section %s instead", es.Where(), err, s.Name)}, nil
		}
	}
	return nil, nil, fmt.Errorf("%s: %w", es.Where(), err)
}

// checkedTable opens and checks all of s.
func checkedTable(s *elfread.Section) (*sframe.Table, error) {
	t, err := sframe.Open(s.Data, s.Addr)
	if err == nil {
		err = t.Check()
	}
	if err != nil {
		return nil, err
	}
	return t, nil
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
