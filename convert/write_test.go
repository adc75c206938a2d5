package convert

import (
	"bytes"
	"context"
	"errors"
	"github.com/cfi2sframe/cfi2sframe/translate"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/cfi2sframe/cfi2sframe/sframe"
)

// TestWriteFileMatchesConvert: WriteFile (the unchanged bytes
// copied while translating, the functions translated on two goroutines
// where there are enough) writes the file Convert builds in memory, with
// the same diagnostics and CFI errors, for the GNU fixtures, the example
// and two system files, in both versions and both layouts' options.
func TestWriteFileMatchesConvert(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "sframe", "v3-*"))
	files = append(files, filepath.Join("..", "testdata", "example", "hello"), "/usr/bin/ls", "/usr/lib/x86_64-linux-gnu/libc.so.6")
	dir := t.TempDir()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, ".objdump") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			continue // a system file that is not there
		}
		for _, o := range []Options{{Force: true}, {Version: sframe.Version2, PCRel: true, Force: true}, {Force: true, FragileLayout: true, NoSignalFrames: true}} {
			want, werr := convertMem(name, data, o)
			in, err := Open(name)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(dir, "out")
			os.Remove(dst)
			got, gerr := in.WriteFile(context.Background(), o, dst, 0o755)
			in.Close()
			if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
				t.Errorf("%s %+v: Convert: %v; WriteFile: %v", name, o, werr, gerr)
				continue
			}
			if werr != nil {
				continue
			}
			if (want.Unchanged == "") != (got.Unchanged == "") {
				t.Errorf("%s: unchanged %q; WriteFile's %q", name, want.Unchanged, got.Unchanged)
			}
			out, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, want.output) {
				t.Errorf("%s %+v: WriteFile wrote %d bytes, unlike Convert's %d", name, o, len(out), len(want.output))
			}
			if d := cmp.Diff(want.Translate, got.Translate, cmp.AllowUnexported(translate.Result{})); d != "" {
				t.Errorf("%s %+v: translation differs (-Convert +WriteFile)\n%s", name, o, d)
			}
			if len(want.CFIErrors) != len(got.CFIErrors) || !bytes.Equal(want.SFrame, got.SFrame) || want.Addr != got.Addr || want.Warning != got.Warning {
				t.Errorf("%s %+v: results differ", name, o)
			}
			n++
		}
	}
	if n < 10 {
		t.Errorf("only %d conversions compared", n)
	}
}

// TestWriteFileFailureLeavesNothing: a linked file that cannot be
// converted (here: it already has SFrame, without Force) fails as
// Convert does, and a cancelled conversion writes nothing: no
// temporary file is left.
func TestWriteFileFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	n := 0
	for _, name := range linkedInputs() {
		in, err := Open(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = in.WriteFile(context.Background(), Options{}, filepath.Join(dir, "out"), 0o755)
		in.Close()
		if !errors.Is(err, ErrHasSFrame) {
			continue
		}
		n++
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("refused inputs left behind: %v", left)
	}
	// Cancelled: converted, but not written.
	in, err := Open(filepath.Join("..", "testdata", "example", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = in.WriteFile(ctx, Options{}, filepath.Join(dir, "out"), 0o755)
	in.Close()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 || n == 0 {
		t.Errorf("%d inputs with SFrame refused; left behind: %v", n, left)
	}
}
