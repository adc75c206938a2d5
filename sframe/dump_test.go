package sframe_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

var spaceRun = regexp.MustCompile(` +`)

// sectionPart returns objdump's output from the "  Header :" line on, with
// runs of spaces collapsed and line ends trimmed.
func sectionPart(s string) string {
	if i := strings.Index(s, "  Header :"); i >= 0 {
		s = s[i:]
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(spaceRun.ReplaceAllString(l, " "), " ")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

func TestDumpGoldens(t *testing.T) {
	for _, path := range fixtures(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if strings.HasPrefix(filepath.Base(path), "v1-") {
				t.Skip("V1 goldens come from binutils 2.40, which neither relocates nor prints the fixed RA offset")
			}
			want, err := os.ReadFile(path + ".objdump")
			if err != nil {
				t.Fatal(err)
			}
			es := loadFixture(t, path)
			tb, err := sframe.Open(es.Data, es.Addr)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := tb.Dump(&b); err != nil {
				t.Fatal(err)
			}
			if got, w := sectionPart(b.String()), sectionPart(string(want)); got != w {
				t.Errorf("dump differs\n--- got\n%s\n--- want\n%s", got, w)
			}
		})
	}
}
