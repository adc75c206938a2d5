package cficheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

const snippet = `Contents of the .eh_frame section (loaded from /lib/x.so):


00000000 0000000000000014 00000000 CIE "zR" cf=1 df=-8 ra=16
   LOC           CFA      ra    
0000000000000000 rsp+8    c-8   

00000050 0000000000000014 00000054 FDE cie=00000000 pc=0000000000000010..000000000000001a
   LOC           CFA      rbp   ra    
0000000000000010 rsp+8    u     c-8   
0000000000000013 rsp+8    r12 (r12) c-8   
0000000000000019 rsp+8    u     c-8   

00000068 0000000000000010 0000006c FDE cie=00000000 pc=0000000000000020..0000000000000030

00000080 ZERO terminator
`

func TestParseReadelf(t *testing.T) {
	dumps, err := ParseReadelf(strings.NewReader(snippet))
	if err != nil || len(dumps) != 1 {
		t.Fatalf("%v, %d dumps", err, len(dumps))
	}
	d := dumps[0]
	if c := d.CIEs[0]; c == nil || c.RA != 16 || len(c.Rows) != 1 || c.Rows[0].CFA != "rsp+8" {
		t.Fatalf("CIE %+v", d.CIEs[0])
	}
	f := d.FDEs[0x50]
	if f == nil || f.Lo != 0x10 || f.Hi != 0x1a || len(f.Rows) != 3 || strings.Join(f.Cols, ",") != "rbp,ra" {
		t.Fatalf("FDE %+v", f)
	}
	if got := f.Rows[1].Vals; len(got) != 2 || got[0] != "r12 (r12)" || got[1] != "c-8" {
		t.Errorf("row 1 values %q", got)
	}
	if g := d.FDEs[0x68]; g == nil || len(g.Rows) != 0 {
		t.Errorf("FDE without instructions: %+v", g)
	}
}

// TestFixturesAgreeWithReadelf compares every committed fixture (x86-64,
// AArch64 LE/BE; linked and relocatable) and, when present, libc.
func TestFixturesAgreeWithReadelf(t *testing.T) {
	readelf := toolchain.Tool(t, "sid", "x86_64-readelf")
	files, _ := filepath.Glob("../../../testdata/sframe/v*")
	files = append(files, "/lib/x86_64-linux-gnu/libc.so.6")
	total := NewSummary()
	for _, f := range files {
		if strings.HasSuffix(f, ".objdump") || strings.Contains(f, "s390x") {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			continue
		}
		total.Add(CompareFile(readelf, f))
	}
	t.Log(total)
	if len(total.Differ) > 0 || total.OnlyReadelf > 0 || total.OnlyOurs > 0 || len(total.FileErrors) > 0 || total.FDEs < 300 {
		t.Errorf("disagreement with readelf:\n%s", total)
	}
}
