package relobj

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

func TestConvertArchive(t *testing.T) {
	// Symbol table: two symbols in the second and third members.
	longNames := []byte("a_very_long_member_name.o/\n")
	members := [][]byte{hostile.ArMember("//", longNames), hostile.ArMember("/0", []byte("first member, grows")), hostile.ArMember("b.o/", []byte("bb"))}
	symtabSize := 4 + 2*4 + len("f1\x00f2\x00")
	off := len(ArchiveMagic) + 60 + symtabSize + symtabSize%2
	offs := []int{off}
	for _, m := range members {
		offs = append(offs, offs[len(offs)-1]+len(m))
	}
	sym := binary.BigEndian.AppendUint32(nil, 2)
	sym = binary.BigEndian.AppendUint32(sym, uint32(offs[1]))
	sym = binary.BigEndian.AppendUint32(sym, uint32(offs[2]))
	sym = append(sym, "f1\x00f2\x00"...)
	in := []byte(ArchiveMagic)
	in = append(in, hostile.ArMember("/", sym)...)
	for _, m := range members {
		in = append(in, m...)
	}
	var names []string
	out, err := ConvertArchive(in, func(m *Member) ([]byte, error) {
		names = append(names, m.Name)
		if m.Name == "a_very_long_member_name.o" {
			return append(append([]byte{}, m.Data...), " and grew"...), nil
		}
		return m.Data, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "a_very_long_member_name.o,b.o" {
		t.Errorf("members seen: %v", names)
	}
	// The symbol table must now point at the moved third member.
	st := out[len(ArchiveMagic)+60:]
	second := int(binary.BigEndian.Uint32(st[8:]))
	if string(out[second:second+4]) != "b.o/" {
		t.Errorf("symbol table points at %q", out[second:second+16])
	}
	if !bytes.Contains(out, []byte("first member, grows and grew")) {
		t.Error("converted data missing")
	}
	for _, bad := range [][]byte{[]byte("!<thin>\n"), []byte("garbage"), append([]byte(ArchiveMagic), "short"...), in[:len(in)-3]} {
		if _, err := ConvertArchive(bad, func(m *Member) ([]byte, error) { return m.Data, nil }); err == nil {
			t.Errorf("%q...: no error", bad[:min(len(bad), 12)])
		}
	}
}

func TestAppendAndTargets(t *testing.T) {
	in, err := os.ReadFile("../../testdata/sframe/v3-x86_64-O2-ffs.o")
	if err != nil {
		t.Fatal(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	targets, err := FDETargets(ef)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 5 {
		t.Fatalf("%d targets, want 5 (one per function section)", len(targets))
	}
	for _, tg := range targets {
		if !strings.HasPrefix(ef.Sections[tg.Section].Name, ".text.") || tg.Offset != 0 {
			t.Errorf("target %+v in %s", tg, ef.Sections[tg.Section].Name)
		}
	}
	// The fixture already has .sframe: Append refuses a duplicate name.
	if _, err := Append(in, Section{Name: ".sframe", Type: 0x6ffffff4, Data: []byte{1}}); err == nil {
		t.Error("duplicate .sframe accepted")
	}
	out, err := Append(in, Section{Name: ".note.test", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Align: 8, Data: []byte("hello"),
		Relocs: []Reloc{{Off: 0, Sym: 2, Type: uint32(elf.R_X86_64_PC32), Addend: 4}}})
	if err != nil {
		t.Fatal(err)
	}
	of, err := elf.NewFile(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	n := len(ef.Sections)
	if len(of.Sections) != n+2 || of.Sections[n].Name != ".note.test" || of.Sections[n+1].Name != ".rela.note.test" {
		t.Fatalf("sections: %d, last %q", len(of.Sections), of.Sections[len(of.Sections)-1].Name)
	}
	for i := 1; i < n; i++ {
		a, _ := ef.Sections[i].Data()
		b, _ := of.Sections[i].Data()
		if ef.Sections[i].Name == ".shstrtab" {
			if !bytes.HasPrefix(b, a) {
				t.Errorf(".shstrtab does not extend the old table")
			}
			continue
		}
		if ef.Sections[i].Name != of.Sections[i].Name || (ef.Sections[i].Type != elf.SHT_NOBITS && !bytes.Equal(a, b)) {
			t.Errorf("section %d (%s) changed", i, ef.Sections[i].Name)
		}
	}
	if d, _ := of.Sections[n].Data(); string(d) != "hello" {
		t.Errorf("data %q", d)
	}
	rs := of.Sections[n+1]
	if rs.Info != uint32(n) || of.Sections[rs.Link].Type != elf.SHT_SYMTAB || rs.Entsize != 24 {
		t.Errorf("rela header %+v", rs.SectionHeader)
	}
}

// FuzzConvertArchive parses arbitrary bytes as an archive (members kept as
// they are): no panics, and a valid result parses again identically.
func FuzzConvertArchive(f *testing.F) {
	f.Add([]byte(ArchiveMagic + "b.o/            0           0     0     644     2         `\nbb"))
	f.Add([]byte(ArchiveMagic))
	f.Fuzz(func(t *testing.T, in []byte) {
		id := func(m *Member) ([]byte, error) { return m.Data, nil }
		out, err := ConvertArchive(in, id)
		if err != nil {
			return
		}
		again, err := ConvertArchive(out, id)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not stable: %v", err)
		}
	})
}

// FuzzFDETargets reads relocations of arbitrary ELF input.
func FuzzFDETargets(f *testing.F) {
	for _, n := range []string{"../../testdata/sframe/v3-x86_64-O2.o", "../../testdata/sframe/v3-aarch64be-O2-pacb.o"} {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ef, err := elf.NewFile(bytes.NewReader(in))
		if err != nil {
			return
		}
		FDETargets(ef)
		Append(in, Section{Name: ".x", Type: elf.SHT_PROGBITS, Data: []byte{1, 2}, Relocs: []Reloc{{Sym: 1}}})
	})
}

// TestArchiveSymtabCount: a GNU symbol table (32- and 64-bit) that claims
// one entry more than its bytes hold is an error, not an index panic.
func TestArchiveSymtabCount(t *testing.T) {
	for _, wide := range []bool{false, true} {
		w, name := 4, "/"
		if wide {
			w, name = 8, "/SYM64/"
		}
		put := func(b []byte, v uint64) []byte {
			if wide {
				return binary.BigEndian.AppendUint64(b, v)
			}
			return binary.BigEndian.AppendUint32(b, uint32(v))
		}
		for _, tt := range []struct {
			claim, hold int
			ok          bool
		}{{1, 1, true}, {2, 1, false}, {1, 0, false}, {3, 2, false}} {
			t.Run(fmt.Sprintf("%s/%d-of-%d", name, tt.claim, tt.hold), func(t *testing.T) {
				symtabSize := w * (1 + tt.hold)
				memberOff := len(ArchiveMagic) + 60 + symtabSize + symtabSize%2
				sym := put(nil, uint64(tt.claim))
				for i := 0; i < tt.hold; i++ {
					sym = put(sym, uint64(memberOff))
				}
				in := []byte(ArchiveMagic)
				in = append(in, hostile.ArMember(name, sym)...)
				in = append(in, hostile.ArMember("a.o/", []byte("aa"))...)
				_, err := ConvertArchive(in, func(m *Member) ([]byte, error) { return m.Data, nil })
				if tt.ok != (err == nil) {
					t.Fatalf("err = %v, want ok=%v", err, tt.ok)
				}
				if err != nil && !strings.Contains(err.Error(), "symbol table claims") {
					t.Errorf("error %q does not say what is wrong", err)
				}
			})
		}
	}
}
