package acceptance_test

import (
	"debug/elf"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/acceptance"
)

// FuzzCheck applies every reader's rules to arbitrary bytes (seeded with
// the sections GNU ld wrote): no panic, and the counts reported stay
// consistent with the violations kept.
func FuzzCheck(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/sframe/v[23]-*")
	for _, name := range files {
		if strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".o") {
			continue
		}
		ef, err := elf.Open(name)
		if err != nil {
			f.Fatal(err)
		}
		if s := ef.Section(".sframe"); s != nil {
			if b, err := s.Data(); err == nil {
				f.Add(b, s.Addr)
			}
		}
		ef.Close()
	}
	f.Add([]byte{0xe2, 0xde, 2, 1, 3, 0, 0xf8, 0}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, addr uint64) {
		for _, r := range acceptance.All {
			// Every other function ends with a call (the kernel's
			// return-at-end limit); from must lie in the function.
			calls := func(lo, hi, from uint64) bool {
				if from < lo || from >= hi {
					t.Fatalf("CallEnds(%#x, %#x, %#x): from outside the function", lo, hi, from)
				}
				return lo&1 == 0
			}
			res := acceptance.Check(r, acceptance.Input{Section: b, Addr: addr, Exec: []acceptance.Range{{Lo: addr, Hi: addr + 0x10000}}, CallEnds: calls})
			n := 0
			for _, c := range res.LimitKinds {
				n += c.Rules
			}
			if n != res.TotalLimits {
				t.Fatalf("%s: limits by kind %d, total %d", r, n, res.TotalLimits)
			}
			if res.Total < len(res.Violations) || res.Rejects > res.Total || len(res.Violations) > acceptance.MaxViolations {
				t.Fatalf("%s: total %d, rejects %d, kept %d", r, res.Total, res.Rejects, len(res.Violations))
			}
			if res.OK() != (res.Total == 0) {
				t.Fatalf("%s: OK() disagrees with Total", r)
			}
		}
	})
}
