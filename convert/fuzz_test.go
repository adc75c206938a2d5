package convert

import (
	"bytes"
	"os"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// FuzzArchive converts arbitrary archives the way convert does (every
// ELF member through the relocatable-object path, symbol table remapped).
// Nothing may panic, and a converted archive must convert again (members
// already holding .sframe are then an error, but not a crash) and parse as
// an archive.
func FuzzArchive(f *testing.F) {
	// An object GNU as wrote (with .sframe: refused, error path) and one
	// without named sections.
	if obj, err := os.ReadFile("../testdata/sframe/v3-x86_64-O2.o"); err == nil {
		f.Add(append([]byte(relobj.ArchiveMagic), hostile.ArMember("a.o/", obj)...))
	}
	f.Add(append([]byte(relobj.ArchiveMagic), hostile.ArMember("b.o/", hostile.NoShstrtab())...))
	f.Add(hostile.Archive(false))
	f.Add(hostile.Archive(true))
	f.Add([]byte(relobj.ArchiveMagic))
	f.Fuzz(func(t *testing.T, in []byte) {
		if !bytes.HasPrefix(in, []byte(relobj.ArchiveMagic)) {
			in = append([]byte(relobj.ArchiveMagic), in...)
		}
		res, err := convertMem("in.a", in, Options{})
		if err != nil {
			return
		}
		if _, err := relobj.ConvertArchive(res.output, func(m *relobj.Member) ([]byte, error) { return m.Data, nil }); err != nil {
			t.Fatalf("converted archive does not parse: %v", err)
		}
	})
}
