package convert

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/readers"
	"github.com/cfi2sframe/cfi2sframe/sframe"
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
		s, err := sframe.Decode(b, addr)
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
	for _, r := range readers.All {
		o, err := ForReader(r)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Convert("hello", in, o)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		n, fdes := outermost(res.SFrame, res.Addr)
		switch r {
		case readers.Glibc:
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
		if r == readers.Libsframe244 {
			if res.Reader == nil || res.Reader.First() == nil || res.Reader.First().Rule != "pcmask-lookup" {
				t.Errorf("libsframe-2.44: %+v, want the PCMASK lookup miss", res.Reader)
			}
			continue
		}
		if res.Reader == nil || !res.Reader.OK() {
			t.Errorf("%s: output breaks the reader's rules: %+v", r, res.Reader)
		}
	}
	if _, err := ForReader("gdb"); err == nil {
		t.Error("ForReader(gdb) succeeded")
	}
}

func mustConvert(t *testing.T, in []byte, o Options) ([]byte, uint64) {
	t.Helper()
	res, err := Convert("hello", in, o)
	if err != nil {
		t.Fatal(err)
	}
	return res.SFrame, res.Addr
}
