package main

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestVerifyFromCode converts a file without CFI with --from-code and
// verifies it: its functions are checked against their instructions and
// pass; with the CFA offset of one of their rows changed in the output's
// .sframe, verify fails, naming the function and the PC.
func TestVerifyFromCode(t *testing.T) {
	in := filepath.Join("..", "..", "testdata", "fromcode", "x86_64-nocfi")
	out := filepath.Join(t.TempDir(), "prog")
	if _, stderr, err := runCmd("--from-code", "-o", out, in); err != nil {
		t.Fatalf("convert: %v\n%s", err, stderr)
	}
	stdout, stderr, err := runCmd("verify", out)
	if err != nil || !strings.Contains(stderr, "checked against their instructions (0 rules") {
		t.Fatalf("verify: %v\n%s%s", err, stdout, stderr)
	}
	name, pc := corruptFromCodeFRE(t, out)
	stdout, stderr, err = runCmd("verify", out)
	if err == nil {
		t.Fatalf("verify passed a corrupted row at %#x:\n%s%s", pc, stdout, stderr)
	}
	want := fmt.Sprintf("%s+%#x [%#x,", name, pc-funcStart(t, out, name), pc)
	if !strings.Contains(stdout, want) || !strings.Contains(stdout, "from the instructions") {
		t.Errorf("verify's findings name no %q:\n%s%s", want, stdout, stderr)
	}
}

// corruptFromCodeFRE adds 8 to the CFA offset of the second row of the
// first from-code function (outside .plt) that has one, in the file's
// .sframe, and says which function and at what PC.
func corruptFromCodeFRE(t *testing.T, path string) (string, uint64) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sec, plt := f.Section(".sframe"), f.Section(".plt")
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	syms, _ := f.Symbols()
	f.Close()
	tab, err := sframe.Open(data, sec.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if tab.Header.Version != sframe.Version3 {
		t.Fatalf("version %d", tab.Header.Version)
	}
	var d sframe.FDE
	for i := 0; i < int(tab.Header.NumFDEs); i++ {
		if err := tab.FDE(i, &d); err != nil {
			t.Fatal(err)
		}
		if plt != nil && d.Start >= plt.Addr && d.Start < plt.Addr+plt.Size || len(d.FREs) < 2 || d.Flex {
			continue
		}
		name := ""
		for _, s := range syms {
			if s.Value == d.Start && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				name = s.Name
			}
		}
		if name == "" {
			continue
		}
		// The FREs: after the header, FREOff, the function's 5-byte
		// attribute; each: start (AddrSize bytes), info, words.
		pos := tab.Header.Size() + int(tab.Header.FREOff) + int(d.FREOff) + 5
		f0 := &d.FREs[0]
		pos += int(d.AddrSize) + 1 + int(f0.NumWords)*int(f0.WordSize)
		f1 := &d.FREs[1]
		at := pos + int(d.AddrSize) + 1 // the CFA offset, word 0
		switch f1.WordSize {
		case 1:
			data[at] += 8
		case 2:
			binary.LittleEndian.PutUint16(data[at:], binary.LittleEndian.Uint16(data[at:])+8)
		default:
			binary.LittleEndian.PutUint32(data[at:], binary.LittleEndian.Uint32(data[at:])+8)
		}
		check, err := sframe.Open(data, sec.Addr)
		var d2 sframe.FDE
		if err != nil || check.FDE(i, &d2) != nil || d2.FREs[1].Words[0] != f1.Words[0]+8 {
			t.Fatalf("the corruption did not hit FRE 1 of %s: %v", name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		copy(b[sec.Offset:], data)
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return name, d.Start + uint64(f1.Start)
	}
	t.Fatal("no from-code function with two rows")
	return "", 0
}

func funcStart(t *testing.T, path, name string) uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, _ := f.Symbols()
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("no symbol %s", name)
	return 0
}
