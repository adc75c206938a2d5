package goprologue

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// survey is what Analyze says of every function of one binary.
type survey struct {
	arch    Arch
	funcs   []goFunc
	results []Result
	errs    []error
}

// analyzeBinary runs Analyze over every function of the Go ELF at path.
func analyzeBinary(t *testing.T, path string) *survey {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := &survey{arch: AMD64}
	if f.Machine == elf.EM_AARCH64 {
		s.arch = ARM64
	}
	s.funcs, err = readGoFuncs(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, g := range s.funcs {
		r, err := Analyze(s.arch, g.code, g.entry, g.sp)
		s.results = append(s.results, r)
		s.errs = append(s.errs, err)
	}
	return s
}

// counts are the functions of each kind, Go and assembly apart, with
// decode errors as a kind of their own.
type counts struct {
	kind    map[string]int // "go described", "asm frameless", "go decode-error", ...
	reasons map[string]int // "go fp-clobbered", ...
	shapes  map[string]int // first instructions of the unrecognized
	example map[string]string
}

func (s *survey) count() counts {
	c := counts{kind: map[string]int{}, reasons: map[string]int{}, shapes: map[string]int{}, example: map[string]string{}}
	for i, g := range s.funcs {
		lang := "go"
		if g.asm {
			lang = "asm"
		}
		r, err := s.results[i], s.errs[i]
		var de *DecodeError
		switch {
		case errors.As(err, &de):
			c.kind[lang+" decode-error"]++
			shape := lang + " decode-error: " + s.shape(g, 4) + fmt.Sprintf(" | at: +%#x", de.PC-g.entry)
			c.shapes[shape]++
			c.example[shape] = g.name
			continue
		case err != nil:
			c.kind[lang+" error"]++
			continue
		}
		c.kind[lang+" "+r.Kind.String()]++
		if r.Kind == Unrecognized {
			c.reasons[lang+" "+r.Reason]++
			shape := lang + " " + r.Reason + ": " + s.shape(g, 4) + " | at: " + numbers.ReplaceAllString(r.Inst, "N")
			c.shapes[shape]++
			c.example[shape] = g.name
		}
	}
	return c
}

var numbers = regexp.MustCompile(`-?(0x[0-9a-f]+|[0-9]+)`)

// shape is the first n instructions of g with their numbers blanked.
func (s *survey) shape(g goFunc, n int) string {
	var parts []string
	for _, in := range arches[s.arch].decode(g.code, g.entry, new(scratch)) {
		if len(parts) == n {
			break
		}
		text := in.text()
		if in.err != nil {
			text = "?"
		}
		parts = append(parts, numbers.ReplaceAllString(text, "N"))
	}
	return strings.Join(parts, "; ")
}

func (c counts) String() string {
	var b strings.Builder
	keys := func(m map[string]int) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Slice(ks, func(i, j int) bool {
			if m[ks[i]] != m[ks[j]] {
				return m[ks[i]] > m[ks[j]]
			}
			return ks[i] < ks[j]
		})
		return ks
	}
	for _, k := range keys(c.kind) {
		fmt.Fprintf(&b, "  %6d %s\n", c.kind[k], k)
	}
	for _, k := range keys(c.reasons) {
		fmt.Fprintf(&b, "  %6d unrecognized: %s\n", c.reasons[k], k)
	}
	for i, k := range keys(c.shapes) {
		if i == 12 {
			break
		}
		fmt.Fprintf(&b, "  %6d shape %s  [%s]\n", c.shapes[k], k, c.example[k])
	}
	return b.String()
}

// TestSurveyBinaries prints the counts for the binaries named in
// GOPROLOGUE_BINARIES (separated by commas), for instance the go command
// and the compiler of the Go that runs the tests.
func TestSurveyBinaries(t *testing.T) {
	list := os.Getenv("GOPROLOGUE_BINARIES")
	if list == "" {
		t.Skip("set GOPROLOGUE_BINARIES to survey binaries")
	}
	for _, path := range strings.Split(list, ",") {
		s := analyzeBinary(t, path)
		t.Logf("%s: %d functions\n%s", path, len(s.funcs), s.count())
	}
}
