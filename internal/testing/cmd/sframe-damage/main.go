// Command sframe-damage damages one function's rows in the SFrame data of
// a converted ELF file, for the acceptance scripts' controls
// (scripts/kernel-acceptance.sh, scripts/glibc-acceptance.sh): the data is
// found through PT_GNU_SFRAME, as a loader finds it, the function by its
// start address.
//
//	go run ./internal/testing/cmd/sframe-damage FILE ADDR MODE
//
// ADDR is hexadecimal (as nm prints it). MODE (the file is rewritten in
// place):
//
//	lookup    V3, the function's one FRE: its start becomes func_size-1,
//	          which the kernel's validation accepts but which leaves the
//	          PCs below without an FRE, so a lookup there fails;
//	validate  V3, the function's one FRE: its start becomes func_size,
//	          which the kernel's validation refuses;
//	cfa+64    V2 or V3: 64 is added to the CFA offset of every FRE of
//	          the function (but an RA-undefined one), so a walk reads its
//	          return address from the wrong stack slot.
//
// The section is decoded and encoded again with the function changed:
// the tool refuses a section that does not encode again to its own bytes,
// or a change that would change the section's size.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: sframe-damage FILE ADDR lookup|validate|cfa+64")
		os.Exit(2)
	}
	addr, err := strconv.ParseUint(strings.TrimPrefix(os.Args[2], "0x"), 16, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sframe-damage: address %q: %v\n", os.Args[2], err)
		os.Exit(2)
	}
	msg, err := damageFile(os.Args[1], addr, os.Args[3])
	if err != nil {
		fmt.Fprintf(os.Stderr, "sframe-damage: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(msg)
}

// damageFile damages the function at addr in the named file (see damage)
// and rewrites the file.
func damageFile(name string, addr uint64, mode string) (string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return "", err
	}
	msg, err := damage(data, name, addr, mode)
	if err != nil {
		return "", err
	}
	return msg, os.WriteFile(name, data, 0o755)
}

// damage changes, in data (the ELF file's bytes), the rows of the
// function that starts at addr in the SFrame data PT_GNU_SFRAME maps, as
// mode says, and returns what it did.
func damage(data []byte, name string, addr uint64, mode string) (string, error) {
	f, err := elfread.NewFileBytes(data, name)
	if err != nil {
		return "", err
	}
	es, err := f.LoaderSFrame()
	if err != nil {
		return "", err
	}
	if !es.Segment {
		return "", fmt.Errorf("%s: no PT_GNU_SFRAME", name)
	}
	sec, err := sfsection.Decode(es.Data, es.Addr)
	if err != nil {
		return "", fmt.Errorf("%s: PT_GNU_SFRAME at file offset %#x: %w", name, es.Offset, err)
	}
	funcs, o := sec.Functions(), sec.Options()
	// The section, which PT_GNU_SFRAME may map with zeros after it.
	again, err := sframe.Encode(funcs, o)
	if err != nil || len(again) > len(es.Data) || !bytes.Equal(again, es.Data[:len(again)]) {
		return "", fmt.Errorf("%s: the SFrame data does not encode again to its own bytes (%v)", name, err)
	}
	h := &sec.Header
	var msg string
	switch mode {
	case "lookup", "validate":
		if h.Version != sframe.Version3 || h.Flags&sframe.FlagFDEFuncStartPCRel == 0 {
			return "", fmt.Errorf("%s: not SFrame V3 with PC-relative starts", name)
		}
		fn, i := function(sec, funcs, addr)
		if fn == nil {
			return "", fmt.Errorf("%s: no FDE at %#x", name, addr)
		}
		if len(fn.Rows) != 1 {
			return "", fmt.Errorf("%s: %d FREs in the FDE at %#x, want 1", name, len(fn.Rows), addr)
		}
		start := fn.Size
		if mode == "lookup" {
			start--
		}
		fn.Rows[0].Start = start
		msg = fmt.Sprintf("damaged: %s FRE of FDE %d (%#x, %d bytes) now starts at +%d", mode, i, addr, fn.Size, start)
	case "cfa+64":
		if h.Version != sframe.Version2 && h.Version != sframe.Version3 {
			return "", fmt.Errorf("%s: not SFrame V2 or V3", name)
		}
		n := 0
		for k := range funcs {
			if funcs[k].Start != addr {
				continue
			}
			for j := range funcs[k].Rows {
				if r := &funcs[k].Rows[j]; !r.RAUndefined {
					r.CFA.Offset += 64
					n++
				}
			}
		}
		if n == 0 {
			return "", fmt.Errorf("%s: no FDE at %#x", name, addr)
		}
		msg = fmt.Sprintf("damaged %d FREs", n)
	default:
		return "", fmt.Errorf("unknown mode %q (lookup, validate or cfa+64)", mode)
	}
	b, err := sframe.Encode(funcs, o)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if len(b) != len(again) {
		return "", fmt.Errorf("%s: the damaged section takes %d bytes, not %d (a start or offset that needs a wider field)", name, len(b), len(again))
	}
	copy(es.Data, b) // es.Data is a slice of data
	return msg, nil
}

// function returns the function of funcs that starts at addr (the first
// FDE in index order that does) and that FDE's index, or nil.
func function(sec *sfsection.Section, funcs []sframe.Function, addr uint64) (*sframe.Function, int) {
	for i := range sec.FDEs {
		if sec.FDEs[i].Start != addr {
			continue
		}
		for k := range funcs {
			if funcs[k].Start == addr {
				return &funcs[k], i
			}
		}
	}
	return nil, -1
}
