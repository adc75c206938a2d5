// Package convert is the whole conversion of one linked ELF file: read its
// call-frame information, execute it, translate the rows to SFrame, encode
// the section and write it into a copy of the file.
//
// It only strings the other packages together, in the one direction data
// flows: elfread → cfi → translate → sframe → elfwrite.
package convert

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/elfwrite"
	"github.com/cfi2sframe/cfi2sframe/relobj"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// Options selects the output.
type Options struct {
	Version uint8 // sframe.Version3 (0 means 3) or sframe.Version2
	PCRel   bool  // V2: set SFRAME_F_FDE_FUNC_START_PCREL (V3 always does)
	Force   bool  // replace SFrame data the input already has
	// SignalFrames: V3, a signal trampoline whose CFI cannot be described
	// gets a signal FDE without FREs (translate.Options.SignalOutermost).
	SignalFrames bool
}

// Result is a converted file and what the conversion found.
type Result struct {
	Output    []byte            // the new ELF file
	SFrame    []byte            // the encoded .sframe section
	Addr      uint64            // its address
	Translate *translate.Result // functions, diagnostics, counts
	CFIErrors []error           // malformed CIEs/FDEs, skipped
	FDEs      int               // FDEs read (all sections)
	Members   int               // archives: members converted
}

// Error is a conversion failure of one file.
type Error struct {
	File string
	Err  error
}

func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrHasSFrame is wrapped by the error for an input that already has
// SFrame data when Options.Force is not set.
var ErrHasSFrame = errors.New("already has SFrame data (.sframe or PT_GNU_SFRAME); use --force to replace it")

// ErrNoCFI is wrapped by the error for an input without call-frame
// information.
var ErrNoCFI = errors.New("no call-frame information (.eh_frame or .debug_frame) to convert")

// Convert converts the ELF file in (named name in errors).
func Convert(name string, in []byte, o Options) (*Result, error) {
	fail := func(err error) (*Result, error) { return nil, &Error{File: name, Err: err} }
	if o.Version == 0 {
		o.Version = sframe.Version3
	}
	if o.Version != sframe.Version2 && o.Version != sframe.Version3 {
		return fail(fmt.Errorf("SFrame version %d cannot be written (2 or 3)", o.Version))
	}
	if o.PCRel && o.Version != sframe.Version2 {
		return fail(errors.New("--pcrel applies to SFrame version 2 only (version 3 start addresses are always PC-relative)"))
	}
	if bytes.HasPrefix(in, []byte(relobj.ArchiveMagic)) || bytes.HasPrefix(in, []byte("!<thin>\n")) {
		return convertArchive(name, in, o)
	}
	f, err := elfread.NewFile(bytes.NewReader(in), name)
	if err != nil {
		return nil, err // elfread's errors name the file
	}
	ef := f.ELF
	switch ef.Machine {
	case elf.EM_X86_64, elf.EM_AARCH64:
	default:
		return fail(fmt.Errorf("unsupported machine %v (x86-64 and AArch64 are supported)", ef.Machine))
	}
	if ef.Class != elf.ELFCLASS64 {
		return fail(fmt.Errorf("unsupported class %v (ELF64 only)", ef.Class))
	}
	switch ef.Type {
	case elf.ET_EXEC, elf.ET_DYN:
	case elf.ET_REL:
		return convertRelocatable(name, in, f, o)
	default:
		return fail(fmt.Errorf("unsupported ELF type %v (executables and shared libraries)", ef.Type))
	}
	if !o.Force {
		if _, err := f.SFrame(); err == nil {
			return fail(ErrHasSFrame)
		}
	}

	loaded, err := cfi.Load(f)
	if err != nil {
		return fail(err)
	}
	if loaded.Sections == 0 {
		return fail(ErrNoCFI)
	}
	res := &Result{CFIErrors: loaded.Errors, FDEs: loaded.FDEs}
	tables := loaded.Tables

	tin := translate.Input{
		Machine: ef.Machine,
		Order:   ef.ByteOrder,
		Tables:  tables,
		PLTs:    PLTSections(ef),
		Symbol:  f.Symbolizer(),
	}
	tr, err := translate.Translate(tin, translate.Options{Version: o.Version, SignalOutermost: o.SignalFrames})
	if err != nil {
		return fail(err)
	}
	res.Translate = tr

	encOpts := sframe.Options{
		Version:    o.Version,
		ABI:        tr.ABI,
		Order:      ef.ByteOrder,
		PCRel:      o.Version == sframe.Version3 || o.PCRel,
		Sort:       true,
		CFAFixedFP: tr.CFAFixedFP,
		CFAFixedRA: tr.CFAFixedRA,
	}
	out, err := elfwrite.Insert(in, elfwrite.Options{Replace: o.Force}, func(addr uint64) ([]byte, error) {
		encOpts.Addr = addr
		b, err := sframe.Encode(tr.Funcs, encOpts)
		if err == nil {
			res.SFrame, res.Addr = b, addr
		}
		return b, err
	})
	if err != nil {
		var hs *elfwrite.HasSFrameError
		if errors.As(err, &hs) {
			return fail(ErrHasSFrame)
		}
		return fail(err)
	}
	res.Output = out
	return res, nil
}

// PLTSections returns the PLT sections the translator describes from their
// instructions.
func PLTSections(ef *elf.File) []translate.PLT {
	var out []translate.PLT
	for _, s := range ef.Sections {
		switch s.Name {
		case ".plt", ".plt.sec", ".plt.got":
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
