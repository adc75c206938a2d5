// Package report measures what SFrame costs and covers next to the CFI
// already in ELF files: section sizes (.eh_frame, .eh_frame_hdr, the
// .sframe cfi2sframe would write in V3 and V2, or the one present), FDE
// and FRE counts, FRE-type and data-word-size histograms, coverage of
// functions and code bytes, and the functions skipped, by reason.
package report

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"github.com/cfi2sframe/cfi2sframe/internal/coverage"
	"io/fs"
	"runtime"
	"sort"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/mapped"
	"github.com/cfi2sframe/cfi2sframe/internal/pltfind"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// File is the report for one ELF file.
type File struct {
	Path    string `json:"path"`
	Machine string `json:"machine"`
	// Section sizes in bytes.
	EHFrame    uint64 `json:"eh_frame"`
	EHFrameHdr uint64 `json:"eh_frame_hdr"`
	DebugFrame uint64 `json:"debug_frame,omitempty"`
	SFrameV3   uint64 `json:"sframe_v3"`
	SFrameV2   uint64 `json:"sframe_v2"`
	Existing   uint64 `json:"sframe_existing,omitempty"` // .sframe already in the file
	// SFrameV3Unshared is the V3 section were every function to have its
	// own FRE block (--shared-blocks=false, the same FRE types):
	// SFrameV3Unshared - SFrameV3 is what sharing saved. Blocks counts
	// the distinct blocks SFrameV3 holds, of Functions.
	SFrameV3Unshared uint64 `json:"sframe_v3_unshared"`
	Blocks           int    `json:"sframe_v3_blocks"`
	// Against is the .sframe of Options.Against (GNU's section for the
	// same program, say), AgainstPath that file.
	Against     uint64 `json:"sframe_against,omitempty"`
	AgainstPath string `json:"against,omitempty"`
	// Counts.
	FDEs      int `json:"cfi_fdes"`
	Functions int `json:"sframe_functions"` // FDEs in our V3 section (PLTs included)
	FREs      int `json:"sframe_fres"`
	// Histograms over our V3 section: FRE start-address width (1, 2, 4
	// bytes) per function, data-word size (1, 2, 4 bytes) per FRE.
	FREType  [3]int `json:"fre_type_addr1_2_4"`
	WordSize [3]int `json:"data_word_1_2_4"`
	// Coverage: functions and code bytes with CFI, and with SFrame (PLT
	// sections, described from their instructions, left out of both).
	CFIFuncs int    `json:"cfi_functions"`
	CFIBytes uint64 `json:"cfi_code_bytes"`
	// Of CFIFuncs and CFIBytes, those described by a Go program's
	// function table and (Options.FromCode) from the instructions.
	GoFuncs       int            `json:"go_table_functions,omitempty"`
	GoBytes       uint64         `json:"go_table_code_bytes,omitempty"`
	FromCodeFuncs int            `json:"from_code_functions,omitempty"`
	FromCodeBytes uint64         `json:"from_code_code_bytes,omitempty"`
	SFrameFuncs   int            `json:"sframe_functions_from_cfi"`
	SFrameBytes   uint64         `json:"sframe_code_bytes_from_cfi"`
	Skipped       map[string]int `json:"skipped,omitempty"`
	CFIErrors     int            `json:"cfi_errors,omitempty"`
	// Coverage of the code itself: bytes of executable sections, and
	// those SFrame describes; functions known from the CFI, Go's
	// function table and the symbol tables, and those SFrame covers. A
	// program whose CFI covers a small part of its code (a Go program's
	// C parts) reads low here, however well the CFI converts.
	CodeBytes       uint64 `json:"code_bytes"`
	SFrameCode      uint64 `json:"sframe_covered_code_bytes"`
	CodeFuncs       int    `json:"code_functions"`
	SFrameCodeFuncs int    `json:"sframe_covered_functions"`
}

// Ratio is the V3 .sframe size over .eh_frame + .eh_frame_hdr.
func (f *File) Ratio() float64 {
	if d := f.EHFrame + f.EHFrameHdr; d > 0 {
		return float64(f.SFrameV3) / float64(d)
	}
	return 0
}

// RatioEH is the V3 .sframe size over .eh_frame alone.
func (f *File) RatioEH() float64 {
	if f.EHFrame > 0 {
		return float64(f.SFrameV3) / float64(f.EHFrame)
	}
	return 0
}

// Options are how Analyze converts a file.
type Options struct {
	// Against names a file whose .sframe section's size the report gives
	// next to ours (File.Against): the same program built with GNU as
	// --gsframe, say.
	Against string
	// FromCode: describe the code without CFI from its instructions
	// (convert.Options.FromCode); the CFI figures then count those
	// functions too, and FromCodeFuncs/FromCodeBytes say how many.
	FromCode  bool
	DebugDirs []string
}

// ErrSkip is returned for files the report leaves out (not ELF, no CFI,
// unsupported machine or type).
var ErrSkip = errors.New("skipped")

// Analyze reports on one file. Its errors name the file once.
func Analyze(path string, o Options) (*File, error) {
	in, err := mapped.Open(path)
	if err != nil {
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return nil, err // names the file
	}
	defer in.Close()
	if !bytes.HasPrefix(in.Data, []byte("\x7fELF")) {
		return nil, ErrSkip
	}
	r, err := analyze(path, in, o)
	var ce *convert.Error
	switch {
	case errors.As(err, &ce):
		return nil, err // names the file
	case err != nil && err != ErrSkip:
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, err
}

// analyze is Analyze on the mapped file; its errors do not name it, but
// convert's (a *convert.Error).
func analyze(path string, in *mapped.File, o Options) (*File, error) {
	data := in.Data
	f, err := elfread.NewFileBytes(data, path)
	if err != nil {
		return nil, err
	}
	ef := f.ELF
	if arch.ForMachine(ef.Machine) == nil || ef.Class != elf.ELFCLASS64 || (ef.Type != elf.ET_EXEC && ef.Type != elf.ET_DYN) {
		return nil, ErrSkip
	}
	r := &File{Path: path, Machine: ef.Machine.String(), Skipped: map[string]int{}}
	size := func(name string) uint64 {
		if s := ef.Section(name); s != nil && s.Type != elf.SHT_NOBITS {
			return s.Size
		}
		return 0
	}
	r.EHFrame, r.EHFrameHdr, r.DebugFrame = size(".eh_frame"), size(".eh_frame_hdr"), size(".debug_frame")
	if s, err := f.SFrame(); err == nil {
		r.Existing = uint64(len(s.Data))
	}
	if o.Against != "" {
		if r.Against, err = sframeSize(o.Against); err != nil {
			return nil, err
		}
		r.AgainstPath = o.Against
	}
	// One FDE at a time (cfi.Context), as convert does: a first pass
	// counts what executes, each translation executes again.
	st, err := cfi.OpenBytesWith(data, cfi.Options{FromCode: o.FromCode, DebugDirs: o.DebugDirs})
	if err != nil {
		return nil, err
	}
	if len(st.Sections()) == 0 {
		return nil, ErrSkip
	}
	plts := pltfind.Sections(ef)
	ctx := st.Context(nil)
	exec := coverage.Exec(ef)
	var cfiStarts []uint64
	var fde cfi.FDE
	var tab cfi.Table
	cfiErrs := len(st.Errors())
	for _, e := range st.Entries() {
		err := ctx.ParseEntry(e, &fde)
		if err == nil {
			err = ctx.Execute(&fde, &tab)
		}
		if err != nil {
			cfiErrs++ // counted either way
			continue
		}
		// PLT stubs are described from their instructions, not from
		// their CFI: they are left out of the coverage on both sides.
		if e.Size > 0 && e.Start != 0 && !inPLT(e.Start, plts) {
			r.CFIFuncs++
			r.CFIBytes += e.Size
			cfiStarts = append(cfiStarts, e.Start)
			switch st.SectionOf(e).Name() {
			case ".gopclntab":
				r.GoFuncs++
				r.GoBytes += e.Size
			case ".text":
				r.FromCodeFuncs++
				r.FromCodeBytes += e.Size
			}
		}
	}
	r.FDEs, r.CFIErrors = st.Parsed(), cfiErrs
	if st.Parsed() == 0 {
		// cfi2sframe writes no SFrame for it (convert refuses a file
		// whose CFI holds no FDE), but its code counts, uncovered.
		r.Skipped = nil
		r.setCover(coverage.Measure(exec, nil, coverage.FuncStarts(ef, exec, nil, nil)))
		return r, nil
	}
	cf, err := convert.NewFile(path, in.File(), in.Size)
	if err != nil {
		return nil, err
	}
	defer cf.Close()
	for _, v := range []uint8{sframe.Version3, sframe.Version2} {
		if in.Size > bigFile {
			// What the pass above and the last conversion allocated
			// (an index and an FRE arena, each sized from the CFI's
			// bytes) is garbage now. Under the command's GOGC=800 it
			// would pile up to the 200 MiB soft limit before the next
			// collection: three conversions' worth for one large file
			// (a hostile one of 30 MB reached 190 MB). Collect it first.
			runtime.GC()
		}
		e, err := convertV(cf, plts, v, o)
		if err != nil {
			return nil, err
		}
		if v == sframe.Version2 {
			r.SFrameV2 = e.size
			continue
		}
		r.SFrameV3, r.SFrameV3Unshared, r.Blocks = e.size, e.unshared, e.blocks
		r.Skipped = e.skipped
		r.SFrameFuncs = e.converted
		r.SFrameBytes = e.codeBytes
		r.Functions, r.FREs = e.funcs, e.fres
		r.FREType, r.WordSize = e.freType, e.wordSize
		r.setCover(coverage.Measure(exec, e.spans, coverage.FuncStarts(ef, exec, cfiStarts, nil)))
	}
	if len(r.Skipped) == 0 {
		r.Skipped = nil
	}
	return r, nil
}

// sframeSize is the size of the .sframe section of the ELF file at path.
func sframeSize(path string) (uint64, error) {
	f, err := elfread.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s, err := f.SFrame()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return uint64(len(s.Data)), nil
}

func (r *File) setCover(c coverage.Cover) {
	r.CodeBytes, r.SFrameCode, r.CodeFuncs, r.SFrameCodeFuncs = c.CodeBytes, c.CoveredBytes, c.Funcs, c.CoveredFuncs
}

// bigFile is the size from which a file's conversions collect the
// garbage of the one before (analyze).
const bigFile = 16 << 20

func inPLT(addr uint64, plts []translate.PLT) bool {
	for _, p := range plts {
		if addr >= p.Addr && addr < p.Addr+uint64(len(p.Data)) {
			return true
		}
	}
	return false
}

// Total sums files.
func Total(files []*File) *File {
	t := &File{Path: "TOTAL", Skipped: map[string]int{}}
	for _, f := range files {
		t.EHFrame += f.EHFrame
		t.EHFrameHdr += f.EHFrameHdr
		t.DebugFrame += f.DebugFrame
		t.SFrameV3 += f.SFrameV3
		t.SFrameV2 += f.SFrameV2
		t.SFrameV3Unshared += f.SFrameV3Unshared
		t.Blocks += f.Blocks
		t.Against += f.Against
		t.Existing += f.Existing
		t.FDEs += f.FDEs
		t.Functions += f.Functions
		t.FREs += f.FREs
		for i := 0; i < 3; i++ {
			t.FREType[i] += f.FREType[i]
			t.WordSize[i] += f.WordSize[i]
		}
		t.CFIFuncs += f.CFIFuncs
		t.CFIBytes += f.CFIBytes
		t.GoFuncs += f.GoFuncs
		t.GoBytes += f.GoBytes
		t.FromCodeFuncs += f.FromCodeFuncs
		t.FromCodeBytes += f.FromCodeBytes
		t.SFrameFuncs += f.SFrameFuncs
		t.SFrameBytes += f.SFrameBytes
		t.CFIErrors += f.CFIErrors
		t.CodeBytes += f.CodeBytes
		t.SFrameCode += f.SFrameCode
		t.CodeFuncs += f.CodeFuncs
		t.SFrameCodeFuncs += f.SFrameCodeFuncs
		for k, v := range f.Skipped {
			t.Skipped[k] += v
		}
	}
	return t
}

// SkipReasons lists the reasons in a total, most frequent first.
func SkipReasons(t *File) []string {
	var k []string
	for r := range t.Skipped {
		k = append(k, r)
	}
	sort.Slice(k, func(i, j int) bool {
		if t.Skipped[k[i]] != t.Skipped[k[j]] {
			return t.Skipped[k[i]] > t.Skipped[k[j]]
		}
		return k[i] < k[j]
	})
	return k
}
