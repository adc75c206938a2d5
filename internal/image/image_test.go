package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"

	"github.com/cfi2sframe/cfi2sframe/internal/layer"
)

func hello(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tarLayer makes a layer of files (name → content; a name ending in
// "->" + target is a symbolic link).
func tarLayer(t *testing.T, files map[string][]byte, mt types.MediaType) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range sortedKeys(files) {
		h := &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeReg, Size: int64(len(files[name])), Uid: 7, Uname: "seven",
			PAXRecords: map[string]string{"SCHILY.xattr.user.note": "kept"}, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(files[name])
	}
	tw.Close()
	data := buf.Bytes()
	comp, _ := compressionOf(mt)
	if comp == None {
		return static.NewLayer(data, mt)
	}
	c := compression.GZip
	if comp == Zstd {
		c = compression.ZStd
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(mt), tarball.WithCompression(c))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func sortedKeys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func testImage(t *testing.T, elfData []byte, mt types.MediaType) v1.Image {
	return testImageFor(t, elfData, mt, "amd64")
}

func testImageFor(t *testing.T, elfData []byte, mt types.MediaType, arch string) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image,
		tarLayer(t, map[string][]byte{"usr/bin/hello": elfData, "etc/motd": []byte("hi\n")}, mt),
		tarLayer(t, map[string][]byte{"etc/app.conf": []byte("x=1\n")}, mt))
	if err != nil {
		t.Fatal(err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img = mutate.Annotations(img, map[string]string{"org.example": "kept"}).(v1.Image)
	cfg, _ := img.ConfigFile()
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = arch, "linux"
	cfg.Config.Labels = map[string]string{"label": "kept"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeTestLayout(t *testing.T, dir string, img v1.Image, tag string) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{refName: tag})); err != nil {
		t.Fatal(err)
	}
}

func readLayout(t *testing.T, dir, tag string) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	root, err := checkIndex(context.Background(), idx, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fromLayout(root, tag)
	if err != nil || s.img == nil {
		t.Fatalf("%s:%s: %v", dir, tag, err)
	}
	img, err := s.img.image()
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func ref(t *testing.T, s string) Ref {
	r, err := ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// layerFiles reads a layer's files.
func layerFiles(t *testing.T, l v1.Layer) map[string]*tar.Header {
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "usr/bin/hello" {
			data, _ := io.ReadAll(tr)
			ef, err := elf.NewFile(bytes.NewReader(data))
			if err != nil || ef.Section(".sframe") == nil {
				t.Errorf("usr/bin/hello: no .sframe in the converted layer (%v)", err)
			}
		}
		out[h.Name] = h
	}
}

func TestOCIRoundTrip(t *testing.T) {
	for _, mt := range []types.MediaType{types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer} {
		t.Run(string(mt), func(t *testing.T) {
			dir := t.TempDir()
			src := testImage(t, hello(t), mt)
			writeTestLayout(t, filepath.Join(dir, "src"), src, "v1")
			o := Options{CreatedBy: "cfi2sframe image (test)", TempDir: dir}
			var recs []LayerRecord
			o.Layer = func(r LayerRecord, _, _ int) { recs = append(recs, r) }
			st, err := Run(context.Background(), ref(t, "oci:"+dir+"/src:v1"), ref(t, "oci:"+dir+"/out:v2"), Access{}, o)
			if err != nil {
				t.Fatal(err)
			}
			if st.Layers != 2 || st.NewLayers != 1 || st.Files["converted"] != 1 || len(recs) != 2 {
				t.Errorf("stats %+v, records %+v", st, recs)
			}
			got := readLayout(t, filepath.Join(dir, "out"), "v2")
			// validate reads layers as gzip: check their digests here.
			if err := validate.Image(got, validate.Fast); err != nil {
				t.Fatalf("the converted image is not consistent: %v", err)
			}
			checkLayers(t, got)
			sl, _ := src.Layers()
			gl, _ := got.Layers()
			d0, _ := sl[0].Digest()
			g0, _ := gl[0].Digest()
			d1, _ := sl[1].Digest()
			g1, _ := gl[1].Digest()
			if d0 == g0 || d1 != g1 {
				t.Errorf("layer digests: %v→%v (must change), %v→%v (must stay)", d0, g0, d1, g1)
			}
			if gmt, _ := gl[0].MediaType(); gmt != mt {
				t.Errorf("media type %s, want %s as the source", gmt, mt)
			}
			hs := layerFiles(t, gl[0])
			if h := hs["usr/bin/hello"]; h == nil || h.Uname != "seven" || h.PAXRecords["SCHILY.xattr.user.note"] != "kept" {
				t.Errorf("header not kept: %+v", h)
			}
			m, _ := got.Manifest()
			cfg, _ := got.ConfigFile()
			if m.Annotations["org.example"] != "kept" || m.Annotations[Annotation] == "" || cfg.Config.Labels["label"] != "kept" {
				t.Errorf("annotations %v, labels %v", m.Annotations, cfg.Config.Labels)
			}
			if h := cfg.History[len(cfg.History)-1]; h.CreatedBy != o.CreatedBy || !h.EmptyLayer {
				t.Errorf("history %+v", cfg.History)
			}
			// The same input gives the same digest, through another
			// transport too.
			if _, err := Run(context.Background(), ref(t, "oci:"+dir+"/src:v1"), ref(t, "docker-archive:"+dir+"/out.tar:example/app:1"), Access{}, o); err != nil {
				t.Fatal(err)
			}
			again, err := tarball.ImageFromPath(dir+"/out.tar", nil)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := again.ConfigName()
			b, _ := got.ConfigName()
			if a != b {
				t.Errorf("config digest %v through docker-archive, %v through oci", a, b)
			}
			_, err = Run(context.Background(), ref(t, "oci:"+dir+"/src:v1"), ref(t, "oci:"+dir+"/out:v3"), Access{}, o)
			if err != nil {
				t.Fatal(err)
			}
			h2, _ := readLayout(t, filepath.Join(dir, "out"), "v3").Digest()
			h1, _ := got.Digest()
			if h1 != h2 {
				t.Errorf("two runs: %v and %v", h1, h2)
			}
		})
	}
}

func TestFailureWritesNothing(t *testing.T) {
	dir := t.TempDir()
	bad := hello(t)[:300]
	writeTestLayout(t, filepath.Join(dir, "src"), testImage(t, bad, types.OCILayer), "v1")
	_, err := Run(context.Background(), ref(t, "oci:"+dir+"/src:v1"), ref(t, "oci:"+dir+"/out:v1"), Access{}, Options{TempDir: dir})
	var le *layer.Error
	if !errors.As(err, &le) || le.File != "usr/bin/hello" || !strings.Contains(err.Error(), "layer 1 (sha256:") {
		t.Fatalf("want an error naming layer 1 and usr/bin/hello, got %v", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "out")); !os.IsNotExist(serr) {
		t.Errorf("a failed conversion wrote %s", filepath.Join(dir, "out"))
	}
	st, err := Run(context.Background(), ref(t, "oci:"+dir+"/src:v1"), ref(t, "oci:"+dir+"/out:v1"), Access{}, Options{TempDir: dir, KeepGoing: true})
	if err != nil || len(st.Failed) != 1 || st.NewLayers != 0 {
		t.Fatalf("keep going: %v, %+v", err, st)
	}
}

func TestIndexPassesOtherPlatforms(t *testing.T) {
	dir := t.TempDir()
	amd := testImage(t, hello(t), types.OCILayer)
	riscv := testImageFor(t, hello(t), types.OCILayer, "riscv64")
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: riscv, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "riscv64"}}})
	p, err := layout.Write(filepath.Join(dir, "src"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{refName: "multi"})); err != nil {
		t.Fatal(err)
	}
	st, err := Run(context.Background(), ref(t, "oci:"+dir+"/src:multi"), ref(t, "oci:"+dir+"/out:multi"), Access{}, Options{TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st.Images != 1 || len(st.Passed) != 1 || !strings.Contains(st.Passed[0], "riscv64") {
		t.Errorf("stats %+v", st)
	}
	outIdx, _ := layout.ImageIndexFromPath(filepath.Join(dir, "out"))
	root, err := checkIndex(context.Background(), outIdx, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fromLayout(root, "multi")
	if err != nil || s.idx == nil {
		t.Fatal(err)
	}
	if err := validate.Index(s.idx); err != nil {
		t.Fatal(err)
	}
	im, _ := s.idx.IndexManifest()
	rd, _ := riscv.Digest()
	ad, _ := amd.Digest()
	if len(im.Manifests) != 2 || im.Manifests[1].Digest != rd || im.Manifests[0].Digest == ad || im.Manifests[0].Platform.Architecture != "amd64" {
		t.Errorf("index %+v", im.Manifests)
	}
}

func TestParseRef(t *testing.T) {
	for _, c := range []struct {
		in        string
		tr        Transport
		name, tag string
	}{
		{"docker://localhost:5000/a/b:t", Docker, "localhost:5000/a/b:t", ""},
		{"oci:/tmp/lay:latest", OCI, "/tmp/lay", "latest"},
		{"oci:/tmp/lay", OCI, "/tmp/lay", ""},
		{"oci:/tmp/a:b/lay", OCI, "/tmp/a:b/lay", ""},
		{"docker-archive:x.tar:host:5000/app:1", DockerArchive, "x.tar", "host:5000/app:1"},
	} {
		r, err := ParseRef(c.in)
		if err != nil || r.Transport != c.tr || r.Name != c.name || r.Tag != c.tag {
			t.Errorf("%s: %+v, %v", c.in, r, err)
		}
	}
	for _, bad := range []string{"foo", "docker:x", "docker://", "oci:", "dir:/x"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// checkLayers checks each layer's digest, size and diff_id against its
// bytes, whatever its compression.
func checkLayers(t *testing.T, img v1.Image) {
	t.Helper()
	m, _ := img.Manifest()
	cfg, _ := img.ConfigFile()
	for i, d := range m.Layers {
		l, err := img.LayerByDigest(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := l.Compressed()
		h, n, _ := v1.SHA256(rc)
		rc.Close()
		uc, _ := l.Uncompressed()
		u, _, _ := v1.SHA256(uc)
		uc.Close()
		if h != d.Digest || n != d.Size || u != cfg.RootFS.DiffIDs[i] {
			t.Errorf("layer %d: digest %v size %d diff_id %v; manifest says %v %d, config %v", i+1, h, n, u, d.Digest, d.Size, cfg.RootFS.DiffIDs[i])
		}
	}
}

// TestHTTPSOnly: without Insecure, plain HTTP goes only to loopback
// hosts.
func TestHTTPSOnly(t *testing.T) {
	for host, ok := range map[string]bool{"localhost": true, "127.0.0.1": true, "127.0.0.9": true, "[::1]": true, "reg.localhost": true, "10.0.0.5": false, "192.168.1.2": false, "registry.example": false} {
		req, _ := http.NewRequest("GET", "http://"+host+":5000/v2/", nil)
		_, err := httpsOnly{failing{}}.RoundTrip(req)
		if refused := strings.Contains(fmt.Sprint(err), "plain HTTP refused"); refused == ok {
			t.Errorf("%s: %v", host, err)
		}
	}
}

type failing struct{}

func (failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("sent") }
