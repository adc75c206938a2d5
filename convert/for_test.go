package convert

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
)

// TestForReader converts the example program (its _start has an undefined
// return address) for every reader: the output must pass that reader's
// rules, and for glibc _start must be left without an FRE rather than
// described by one without data words.
func TestForReader(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	outermost := func(b []byte, addr uint64) (fres, fdes int) {
		s, err := sfsection.Decode(b, addr)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range s.FDEs {
			for _, f := range d.FREs {
				if f.NumWords == 0 {
					fres++
				}
			}
		}
		return fres, len(s.FDEs)
	}
	_, base := outermost(mustConvert(t, in, Options{}))
	readers := []Reader{Kernel, Glibc, Libsframe, Libsframe244}
	for i, r := range acceptance.All {
		if i >= len(readers) || string(readers[i]) != string(r) {
			t.Fatalf("the readers %v are not acceptance's %v", readers, acceptance.All)
		}
	}
	for _, r := range readers {
		o, err := ForReader(r)
		if err != nil {
			t.Fatal(err)
		}
		res, err := convertMem("hello", in, o)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		n, fdes := outermost(res.SFrame, res.Addr)
		switch r {
		case Glibc:
			if n != 0 || fdes != base-1 {
				t.Errorf("glibc: %d FREs without data words, %d FDEs; want 0 and %d (_start left out)", n, fdes, base-1)
			}
		default:
			if n != 1 || fdes != base {
				t.Errorf("%s: %d FREs without data words, %d FDEs; want 1 and %d", r, n, fdes, base)
			}
		}
		// The example has PLTs (a PCMASK FDE), which libsframe 2.44
		// misses; every other reader takes the output as it is.
		if r == Libsframe244 {
			if res.Violations == 0 || !strings.Contains(res.FirstViolation, ": pcmask-lookup: ") {
				t.Errorf("libsframe-2.44: %d violations, the first %q; want the PCMASK lookup miss", res.Violations, res.FirstViolation)
			}
			continue
		}
		if res.Violations != 0 || res.FirstViolation != "" {
			t.Errorf("%s: output breaks the reader's rules: %d, the first %q", r, res.Violations, res.FirstViolation)
		}
	}
	if _, err := ForReader("gdb"); err == nil {
		t.Error("ForReader(gdb) succeeded")
	}
}

func mustConvert(t *testing.T, in []byte, o Options) ([]byte, uint64) {
	t.Helper()
	res, err := convertMem("hello", in, o)
	if err != nil {
		t.Fatal(err)
	}
	return res.SFrame, res.Addr
}

// TestForReaderRefuses: an output the reader would drop whole is not
// written. The example with its data segment made executable has a second
// executable segment above every function, and the kernel registers the
// section for each: a lookup at that segment's start finds a function of
// the text segment and removes the section.
func TestForReaderRefuses(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	patched := false
	for i, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_W != 0 {
			// Elf64_Phdr: p_type, then p_flags at byte 4.
			off := 64 + i*56 + 4 // e_phoff is 64 in the example
			binary.LittleEndian.PutUint32(in[off:], uint32(p.Flags|elf.PF_X))
			patched = true
			break
		}
	}
	if !patched {
		t.Fatal("no writable PT_LOAD in the example")
	}
	if _, err := convertMem("hello", in, Options{}); err != nil {
		t.Fatalf("without --for: %v", err)
	}
	o, err := ForReader(Kernel)
	if err != nil {
		t.Fatal(err)
	}
	res, err := convertMem("hello", in, o)
	var re *rejectedError
	if !errors.As(err, &re) || !strings.HasPrefix(re.violation, "kernel: ") || !strings.Contains(re.violation, ": segment-start: ") ||
		!errors.Is(err, ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "segment-start") {
		t.Fatalf("For kernel: %v (result %v), want a rejection naming segment-start", err, res)
	}
}
