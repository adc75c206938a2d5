package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ociLayout writes an OCI layout holding one image of one uncompressed
// layer with the files given.
func ociLayout(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"bin/a", "bin/b", "etc/c"} {
		data, ok := files[name]
		if !ok {
			continue
		}
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data))})
		tw.Write(data)
	}
	tw.Close()
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), static.NewLayer(buf.Bytes(), types.OCIUncompressedLayer))
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": "t"})); err != nil {
		t.Fatal(err)
	}
}

// TestImageCommand: a JSON record per layer and a summary; a file that
// fails writes nothing (status 1) unless --keep-going (status 3); bad
// references and flags are one-line errors.
func TestImageCommand(t *testing.T) {
	hello, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ociLayout(t, filepath.Join(dir, "good"), map[string][]byte{"bin/a": hello, "etc/c": []byte("x\n")})
	out, stderr, err := runCmd("image", "--json", "oci:"+filepath.Join(dir, "good")+":t", "oci:"+filepath.Join(dir, "out")+":t")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rec struct {
		Layer     int            `json:"layer"`
		NewDigest string         `json:"new_digest"`
		Files     map[string]int `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Layer != 1 || rec.NewDigest == "" || rec.Files["converted"] != 1 || rec.Files["not-elf"] != 1 {
		t.Errorf("record %q: %+v, %v", out, rec, err)
	}
	if !strings.Contains(stderr, "1 images, 1 layers (1 written anew, 0 kept); files: 1 converted, 1 not-elf") {
		t.Errorf("summary: %s", stderr)
	}

	ociLayout(t, filepath.Join(dir, "bad"), map[string][]byte{"bin/a": hello, "bin/b": hello[:300]})
	src, dst := "oci:"+filepath.Join(dir, "bad")+":t", "oci:"+filepath.Join(dir, "bad-out")+":t"
	_, stderr, err = runCmd("image", "-q", src, dst)
	if err == nil || !strings.Contains(err.Error(), "layer 1 (sha256:") || !strings.Contains(err.Error(), "bin/b: ") || strings.Count(err.Error(), "bin/b") != 1 {
		t.Errorf("a failing file: %v\n%s", err, stderr)
	}
	if _, serr := os.Stat(filepath.Join(dir, "bad-out")); serr == nil {
		t.Error("a failed conversion wrote its destination")
	}
	_, stderr, err = runCmd("image", "-q", "--keep-going", src, dst)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitKeptGoing || !strings.Contains(stderr, "passed through unchanged: ") {
		t.Errorf("--keep-going: %v\n%s", err, stderr)
	}
	for _, args := range [][]string{
		{"image", "dir:/x", dst},
		{"image", src},
		{"image", "--dest-compress-format", "lz4", src, dst},
		{"image", "oci:" + filepath.Join(dir, "missing"), dst},
	} {
		if _, _, err := runCmd(args...); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: want a one-line error, got %v", args, err)
		}
	}
}
