package convert

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/cfi"
	"github.com/cfi2sframe/cfi2sframe/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/translate"
)

// TestStreamingMatchesTables: Convert executes one FDE at a time; the
// section and the diagnostics must be those of translating every table
// of the file at once (cfi.Load), byte for byte.
func TestStreamingMatchesTables(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "sframe", "v3-*"))
	files = append(files, filepath.Join("..", "testdata", "example", "hello"), "/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6")
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, ".objdump") || strings.HasSuffix(name, ".o") {
			continue
		}
		in, err := os.ReadFile(name)
		if err != nil {
			continue // a system file that is not there
		}
		for _, v := range []uint8{sframe.Version3, sframe.Version2} {
			res, err := Convert(name, in, Options{Version: v, Force: true})
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			f, err := elfread.NewFile(bytes.NewReader(in), name)
			if err != nil {
				t.Fatal(err)
			}
			l, err := cfi.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			ef := f.ELF
			tr, err := translate.Translate(translate.Input{Machine: ef.Machine, Order: ef.ByteOrder, Tables: l.Tables, PLTs: PLTSections(ef), Symbol: f.Symbolizer()},
				translate.Options{Version: v})
			if err != nil {
				t.Fatal(err)
			}
			b, err := sframe.Encode(tr.Funcs, sframe.Options{Version: v, ABI: tr.ABI, Order: ef.ByteOrder, PCRel: v == sframe.Version3, Sort: true,
				CFAFixedFP: tr.CFAFixedFP, CFAFixedRA: tr.CFAFixedRA, Addr: res.Addr})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, res.SFrame) {
				t.Errorf("%s v%d: streamed .sframe (%d bytes) differs from the all-tables one (%d bytes)", name, v, len(res.SFrame), len(b))
			}
			if d := cmp.Diff(tr.Diags, res.Translate.Diags); d != "" {
				t.Errorf("%s v%d: diagnostics differ (-tables +streamed):\n%s", name, v, d)
			}
			if len(l.Errors) != len(res.CFIErrors) || tr.Converted != res.Translate.Converted || tr.Empty != res.Translate.Empty || tr.Skipped != res.Translate.Skipped {
				t.Errorf("%s v%d: counts differ", name, v)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("only %d conversions compared", n)
	}
}

// TestTruncatedWhileMapped: a file another process truncates after it was
// mapped gives an error, not a crash (SIGBUS on the mapping).
func TestTruncatedWhileMapped(t *testing.T) {
	name := filepath.Join(t.TempDir(), "hello")
	b, err := os.ReadFile(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := OpenInput(name)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if !in.mapped {
		t.Skip("file system cannot map")
	}
	if err := os.Truncate(name, 0); err != nil {
		t.Fatal(err)
	}
	_, err = ConvertInput(in, Options{})
	if !errors.Is(err, ErrChanged) || !strings.HasPrefix(err.Error(), name) {
		t.Errorf("error %v, want one naming the file and wrapping ErrChanged", err)
	}
}
