package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// lab is an OCI layout on disk that a test lies about: it edits blobs
// in place (their digests no longer match) or rewrites the documents
// above them with fresh, valid digests (a consistent lie).
type lab struct {
	t   *testing.T
	dir string
}

func newLab(t *testing.T) *lab {
	dir := filepath.Join(t.TempDir(), "src")
	writeTestLayout(t, dir, testImage(t, hello(t), types.OCILayer), "v1")
	return &lab{t, dir}
}

func (l *lab) path(h v1.Hash) string { return filepath.Join(l.dir, "blobs", h.Algorithm, h.Hex) }

func (l *lab) readJSON(name string) map[string]any {
	b, err := os.ReadFile(name)
	if err != nil {
		l.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		l.t.Fatal(err)
	}
	return m
}

// put stores b as a blob and returns its digest.
func (l *lab) put(b []byte) string {
	h := fmt.Sprintf("%x", sha256.Sum256(b))
	if err := os.WriteFile(filepath.Join(l.dir, "blobs", "sha256", h), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
	return "sha256:" + h
}

func (l *lab) index() map[string]any { return l.readJSON(filepath.Join(l.dir, "index.json")) }

// manifestDesc is index.json's descriptor of the image.
func (l *lab) manifestDesc(idx map[string]any) map[string]any {
	return idx["manifests"].([]any)[0].(map[string]any)
}

func (l *lab) manifest() map[string]any {
	h, err := v1.NewHash(l.manifestDesc(l.index())["digest"].(string))
	if err != nil {
		l.t.Fatal(err)
	}
	return l.readJSON(l.path(h))
}

// setManifest stores m and points index.json at it, digest and size
// true.
func (l *lab) setManifest(m map[string]any) {
	b, _ := json.Marshal(m)
	l.setManifestBytes(b, true)
}

// setManifestBytes stores b as the manifest; with honest, index.json's
// descriptor gives its true size.
func (l *lab) setManifestBytes(b []byte, honest bool) {
	idx := l.index()
	d := l.manifestDesc(idx)
	d["digest"] = l.put(b)
	if honest {
		d["size"] = len(b)
	}
	out, _ := json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(l.dir, "index.json"), out, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *lab) layer(m map[string]any, i int) map[string]any {
	return m["layers"].([]any)[i].(map[string]any)
}

// edit changes one byte of the blob at digest d (a string), in place.
func (l *lab) edit(d any, at int) {
	h, err := v1.NewHash(d.(string))
	if err != nil {
		l.t.Fatal(err)
	}
	b, err := os.ReadFile(l.path(h))
	if err != nil {
		l.t.Fatal(err)
	}
	if at < 0 {
		at += len(b)
	}
	b[at] ^= 0x55
	if err := os.WriteFile(l.path(h), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// appendTo adds bytes to the end of the blob at digest d, in place.
func (l *lab) appendTo(d any, extra []byte) {
	h, _ := v1.NewHash(d.(string))
	f, err := os.OpenFile(l.path(h), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(extra); err != nil {
		l.t.Fatal(err)
	}
}

// TestLiesRefused gives Run layouts whose blobs lie about themselves, in
// every way the descriptors allow: each is refused with an error naming
// the blob, and nothing is written.
func TestLiesRefused(t *testing.T) {
	cases := []struct {
		name string
		lie  func(l *lab)
		want string
	}{
		{"layer with an ELF file edited", func(l *lab) { l.edit(l.layer(l.manifest(), 0)["digest"], 40) }, "layer 1 (sha256:"},
		{"layer with nothing to convert edited", func(l *lab) { l.edit(l.layer(l.manifest(), 1)["digest"], 40) }, "layer 2 (sha256:"},
		{"layer edited after the tar's end", func(l *lab) { l.appendTo(l.layer(l.manifest(), 0)["digest"], []byte("trailing")) }, "runs past its descriptor's size"},
		{"config edited", func(l *lab) { l.edit(l.manifest()["config"].(map[string]any)["digest"], 10) }, "config: blob sha256:"},
		{"manifest edited", func(l *lab) { l.edit(l.manifestDesc(l.index())["digest"], 5) }, "manifest: blob sha256:"},
		{"manifest size lies", func(l *lab) {
			b, _ := json.Marshal(l.manifest())
			l.setManifestBytes(b, false)
			idx := l.index()
			l.manifestDesc(idx)["size"] = len(b) - 1
			out, _ := json.Marshal(idx)
			os.WriteFile(filepath.Join(l.dir, "index.json"), out, 0o644)
		}, "descriptor's size"},
		{"layer size bigger", func(l *lab) {
			m := l.manifest()
			l.layer(m, 0)["size"] = l.layer(m, 0)["size"].(float64) + 1
			l.setManifest(m)
		}, "descriptor's size"},
		{"layer size smaller", func(l *lab) {
			m := l.manifest()
			l.layer(m, 1)["size"] = l.layer(m, 1)["size"].(float64) - 1
			l.setManifest(m)
		}, "runs past its descriptor's size"},
		{"layer size negative", func(l *lab) { m := l.manifest(); l.layer(m, 0)["size"] = -5; l.setManifest(m) }, "negative size"},
		{"layer size huge", func(l *lab) { m := l.manifest(); l.layer(m, 1)["size"] = int64(1) << 62; l.setManifest(m) }, "descriptor's size"},
		{"diff_id lies", func(l *lab) {
			m := l.manifest()
			c := m["config"].(map[string]any)
			h, _ := v1.NewHash(c["digest"].(string))
			cfg := l.readJSON(l.path(h))
			ids := cfg["rootfs"].(map[string]any)["diff_ids"].([]any)
			ids[1] = "sha256:" + strings.Repeat("ab", 32)
			b, _ := json.Marshal(cfg)
			c["digest"], c["size"] = l.put(b), len(b)
			l.setManifest(m)
		}, "diff_id sha256:abab"},
		{"too many layers", func(l *lab) {
			m := l.manifest()
			ls := m["layers"].([]any)
			for len(ls) <= MaxLayers {
				ls = append(ls, ls[1])
			}
			m["layers"] = ls
			l.setManifest(m)
		}, "over the limit of 1000"},
		{"manifest over the limit", func(l *lab) {
			m := l.manifest()
			m["annotations"] = map[string]string{"pad": strings.Repeat("x", MaxDocument)}
			l.setManifest(m)
		}, "over the 4 MiB limit"},
		{"manifest stored over the limit, its descriptor small", func(l *lab) {
			m := l.manifest()
			m["annotations"] = map[string]string{"pad": strings.Repeat("x", MaxDocument)}
			b, _ := json.Marshal(m)
			l.setManifestBytes(b, false)
		}, "bytes stored, over the 4 MiB limit"},
		{"config stored larger than its descriptor", func(l *lab) {
			h, _ := v1.NewHash(l.manifest()["config"].(map[string]any)["digest"].(string))
			f, _ := os.OpenFile(l.path(h), os.O_APPEND|os.O_WRONLY, 0)
			f.Write(bytes.Repeat([]byte(" "), MaxDocument))
			f.Close()
		}, "config: blob sha256:"},
		{"index lists itself", func(l *lab) {
			// A blob named by a digest it cannot have: an index that
			// lists its own name.
			idx := l.index()
			self := "sha256:" + strings.Repeat("cd", 32)
			d := l.manifestDesc(idx)
			d["mediaType"], d["digest"] = string(types.OCIImageIndex), self
			b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": []any{map[string]any{"mediaType": types.OCIImageIndex, "digest": self, "size": 100}}})
			d["size"] = len(b)
			os.WriteFile(filepath.Join(l.dir, "blobs", "sha256", strings.Repeat("cd", 32)), b, 0o644)
			out, _ := json.Marshal(idx)
			os.WriteFile(filepath.Join(l.dir, "index.json"), out, 0o644)
		}, "index: blob sha256:cdcd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := newLab(t)
			c.lie(l)
			out := filepath.Join(filepath.Dir(l.dir), "out")
			_, err := Run(context.Background(), ref(t, "oci:"+l.dir+":v1"), ref(t, "oci:"+out+":v1"), Access{}, Options{TempDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			t.Log(err)
			if strings.Count(err.Error(), l.dir) != 1 || strings.Contains(err.Error(), "\n") {
				t.Errorf("want one line naming the reference once: %v", err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(l.dir)); len(ents) != 1 {
				t.Errorf("left beside the source: %v", ents)
			}
		})
	}
}

// TestNestedIndexes: an index of indexes is passed through, each checked
// as it is reached; nesting deeper than MaxDepth is refused, and so is
// an index whose bytes are not its name's.
func TestNestedIndexes(t *testing.T) {
	for _, depth := range []int{2, MaxDepth, MaxDepth + 1, 20} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			l := newLab(t)
			idx := l.index()
			d := l.manifestDesc(idx)
			inner := map[string]any{"mediaType": d["mediaType"], "digest": d["digest"], "size": d["size"],
				"platform": map[string]any{"architecture": "riscv64", "os": "linux"}}
			for i := 0; i < depth; i++ {
				b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": []any{inner}})
				inner = map[string]any{"mediaType": types.OCIImageIndex, "digest": l.put(b), "size": len(b)}
			}
			inner["annotations"] = d["annotations"]
			idx["manifests"] = []any{inner}
			out, _ := json.Marshal(idx)
			os.WriteFile(filepath.Join(l.dir, "index.json"), out, 0o644)
			dst := filepath.Join(filepath.Dir(l.dir), "out")
			_, err := Run(context.Background(), ref(t, "oci:"+l.dir+":v1"), ref(t, "oci:"+dst+":v1"), Access{}, Options{TempDir: t.TempDir()})
			if depth <= MaxDepth {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "nested more than 8 deep") || !strings.HasPrefix(err.Error(), "oci:"+l.dir+":v1: ") {
				t.Fatalf("got %v, want an error naming the source", err)
			}
			if _, serr := os.Stat(dst); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("a failed run left %s", dst)
			}
			if ents, _ := os.ReadDir(filepath.Dir(l.dir)); len(ents) != 1 {
				t.Errorf("left beside the source: %v", ents)
			}
		})
	}
}

// TestExistingLayoutKeptOnFailure: a failure while writing into an
// existing layout removes the blobs it added and leaves index.json.
func TestExistingLayoutKeptOnFailure(t *testing.T) {
	l := newLab(t)
	dst := filepath.Join(filepath.Dir(l.dir), "dst")
	writeTestLayout(t, dst, testImage(t, hello(t), types.OCILayer), "old")
	before := snapshotDir(t, dst)
	// A nested index too deep fails while the image is written.
	idx := l.index()
	d := l.manifestDesc(idx)
	inner := map[string]any{"mediaType": d["mediaType"], "digest": d["digest"], "size": d["size"]}
	for i := 0; i < 12; i++ {
		b, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": types.OCIImageIndex, "manifests": []any{inner}})
		inner = map[string]any{"mediaType": types.OCIImageIndex, "digest": l.put(b), "size": len(b)}
	}
	inner["annotations"] = d["annotations"]
	idx["manifests"] = []any{inner}
	out, _ := json.Marshal(idx)
	os.WriteFile(filepath.Join(l.dir, "index.json"), out, 0o644)
	if _, err := Run(context.Background(), ref(t, "oci:"+l.dir+":v1"), ref(t, "oci:"+dst+":v1"), Access{}, Options{TempDir: t.TempDir()}); err == nil {
		t.Fatal("no error")
	}
	if after := snapshotDir(t, dst); !bytes.Equal(after, before) {
		t.Errorf("the existing layout changed:\n%s\n---\n%s", before, after)
	}
}

func snapshotDir(t *testing.T, dir string) []byte {
	var b bytes.Buffer
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %v %d\n", p, fi.Mode(), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCancelLeavesNothing: a run cancelled before it writes leaves no
// layout and no temporary directory.
func TestCancelLeavesNothing(t *testing.T) {
	l := newLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dst := filepath.Join(filepath.Dir(l.dir), "out")
	if _, err := Run(ctx, ref(t, "oci:"+l.dir+":v1"), ref(t, "oci:"+dst+":v1"), Access{}, Options{TempDir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(l.dir)); len(ents) != 1 {
		t.Errorf("left beside the source: %v", ents)
	}
}

// FuzzLayout runs Run on an OCI layout whose image manifest, or whose
// index.json, is the input (blobs named by their true digests, so that
// the parsers behind the digest checks are reached): no panic, no hang,
// and an error or a written layout.
func FuzzLayout(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"layers":[]}`), false)
	f.Add([]byte(`{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2}]}`), true)
	f.Add([]byte(`{"layers":[{"size":-1}],"config":{"size":1e300}}`), false)
	f.Fuzz(func(t *testing.T, doc []byte, asIndex bool) {
		dir := t.TempDir()
		src := filepath.Join(dir, "src")
		if err := os.MkdirAll(filepath.Join(src, "blobs", "sha256"), 0o755); err != nil {
			t.Fatal(err)
		}
		l := &lab{t, src}
		os.WriteFile(filepath.Join(src, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644)
		l.put([]byte("{}"))
		index := doc
		if !asIndex {
			desc := map[string]any{"mediaType": types.OCIManifestSchema1, "digest": l.put(doc), "size": len(doc)}
			index, _ = json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{desc}})
		}
		os.WriteFile(filepath.Join(src, "index.json"), index, 0o644)
		dst := filepath.Join(dir, "out")
		_, err := Run(context.Background(), Ref{Transport: OCI, Name: src, raw: "oci:" + src}, Ref{Transport: OCI, Name: dst, raw: "oci:" + dst}, Access{}, Options{TempDir: dir, Jobs: 1})
		if _, serr := os.Stat(filepath.Join(dst, "index.json")); (err == nil) != (serr == nil) {
			t.Fatalf("error %v, but the output's index.json: %v", err, serr)
		}
	})
}

// TestCheckManifests: a manifest a registry serves is held to the digest
// it was asked for, or by tag to Docker-Content-Digest, and to
// MaxDocument; blobs and other requests pass untouched.
func TestCheckManifests(t *testing.T) {
	body := []byte(`{"schemaVersion":2}`)
	good := fmt.Sprintf("sha256:%x", sha256.Sum256(body))
	other := "sha256:" + strings.Repeat("ef", 32)
	big := bytes.Repeat([]byte(" "), MaxDocument+1)
	cases := []struct {
		path, header string
		body         []byte
		want         string // "" for no error
	}{
		{"/v2/app/manifests/v1", good, body, ""},
		{"/v2/app/manifests/v1", "", body, ""},
		{"/v2/app/manifests/v1", other, body, "the registry's Docker-Content-Digest is " + other + ", but the body the registry served hashes to " + good},
		{"/v2/app/manifests/" + good, other, body, ""},
		{"/v2/app/manifests/" + other, good, body, "the digest it was asked for is " + other + ", but the body the registry served hashes to " + good},
		{"/v2/app/manifests/v1", "sha256:zz", body, "Docker-Content-Digest \"sha256:zz\""},
		{"/v2/app/manifests/v1", "", big, "over the 4 MiB limit"},
		{"/v2/app/blobs/" + other, good, body, ""},
	}
	for _, c := range cases {
		rt := checkManifests{roundTripFunc(func(r *http.Request) (*http.Response, error) {
			h := http.Header{}
			if c.header != "" {
				h.Set("Docker-Content-Digest", c.header)
			}
			return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
		})}
		req, _ := http.NewRequest(http.MethodGet, "https://registry.example"+c.path, nil)
		resp, err := rt.RoundTrip(req)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (%s): %v", c.path, c.header, err)
		case c.want == "":
			got, _ := io.ReadAll(resp.Body)
			if !bytes.Equal(got, c.body) {
				t.Errorf("%s: body changed", c.path)
			}
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s (%s): got %v, want %q", c.path, c.header, err, c.want)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
