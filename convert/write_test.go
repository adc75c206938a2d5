package convert

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteResultMatchesOutput: the output ConvertInput leaves unbuilt and
// WriteResult writes from the plan (unchanged bytes copied file to file)
// is Convert's in-memory Output, byte for byte, for a new file and when
// replacing one.
func TestWriteResultMatchesOutput(t *testing.T) {
	files := []string{
		filepath.Join("..", "testdata", "sframe", "v3-x86_64-exe"),
		filepath.Join("..", "testdata", "sframe", "v2-aarch64-lib.so"),
		filepath.Join("..", "testdata", "example", "hello"),
		"/usr/bin/ls",
	}
	dir := t.TempDir()
	n := 0
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			continue // a system file that is not there
		}
		want, err := Convert(name, data, Options{Force: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in, err := OpenInput(name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ConvertInput(in, Options{Force: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Output != nil || res.plan == nil {
			t.Errorf("%s: ConvertInput built the output in memory", name)
		}
		out := filepath.Join(dir, filepath.Base(name))
		for range 2 { // new, then replacing
			if err := WriteResult(context.Background(), out, 0o755, in, res); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Output) {
				t.Errorf("%s: WriteResult wrote %d bytes that differ from Convert's %d", name, len(got), len(want.Output))
			}
		}
		in.Close()
		n++
	}
	if n < 3 {
		t.Fatalf("only %d files converted", n)
	}
}
