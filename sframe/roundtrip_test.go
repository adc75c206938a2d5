package sframe_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/internal/sfsection"
	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// fixtures returns every ELF fixture with an objdump golden: the shared
// ones in ../testdata/sframe and this package's own in testdata/gas.
func fixtures(t *testing.T) []string {
	t.Helper()
	var m []string
	for _, pat := range []string{"../testdata/sframe/*.objdump", "testdata/gas/*.objdump"} {
		g, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		m = append(m, g...)
	}
	if len(m) == 0 {
		t.Skip("no fixtures in ../testdata/sframe")
	}
	for i := range m {
		m[i] = strings.TrimSuffix(m[i], ".objdump")
	}
	return m
}

func loadFixture(t *testing.T, path string) *elfread.Section {
	t.Helper()
	f, err := elfread.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := f.SFrame()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTripFixtures(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			es := loadFixture(t, path)
			sec, err := sfsection.Decode(es.Data, es.Addr)
			if err != nil {
				t.Fatal(err)
			}
			if sec.Header.Version == sframe.Version1 {
				t.Skip("V1 is read-only")
			}
			out, err := sframe.Encode(sec.Functions(), sec.Options())
			if err != nil {
				t.Fatal(err)
			}
			// GNU as pads some sections (s390x) to their alignment after
			// the FRE sub-section; the padding is not SFrame data.
			want := es.Data
			if end := sec.Header.Size() + int(sec.Header.FREOff) + int(sec.Header.FRELen); end < len(want) {
				if pad := want[end:]; len(pad) >= 8 || !bytes.Equal(pad, make([]byte, len(pad))) {
					t.Fatalf("%d unexpected bytes after the FRE sub-section", len(pad))
				}
				want = want[:end]
			}
			if !bytes.Equal(out, want) {
				n := 0
				for n < len(out) && n < len(want) && out[n] == want[n] {
					n++
				}
				t.Errorf("re-encoded section differs from GNU's: lengths %d vs %d, first difference at byte %#x", len(out), len(want), n)
			}
		})
	}
}
