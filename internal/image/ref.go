package image

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/cfi2sframe/cfi2sframe/internal/elfwrite"
)

// Transport is where an image lives, in skopeo's words.
type Transport string

const (
	Docker        Transport = "docker"         // docker://HOST/REPO:TAG or @sha256:…, a registry
	OCI           Transport = "oci"            // oci:DIR[:TAG], an OCI image layout
	DockerArchive Transport = "docker-archive" // docker-archive:FILE[:REF], as docker save writes
)

// Ref is a parsed image reference.
type Ref struct {
	Transport Transport
	Name      string // registry reference, directory or file
	Tag       string // oci: the ref.name annotation; docker-archive: the image's RepoTag
	raw       string
}

func (r Ref) String() string { return r.raw }

// ParseRef parses a reference in skopeo's transport syntax.
func ParseRef(s string) (Ref, error) {
	t, rest, ok := strings.Cut(s, ":")
	if !ok {
		return Ref{}, fmt.Errorf("%q: want docker://REF, oci:DIR[:TAG] or docker-archive:FILE[:REF]", s)
	}
	r := Ref{Transport: Transport(t), raw: s}
	switch r.Transport {
	case Docker:
		if !strings.HasPrefix(rest, "//") || len(rest) == 2 {
			return Ref{}, fmt.Errorf("%q: want docker://HOST/REPO:TAG", s)
		}
		r.Name = rest[2:]
	case OCI, DockerArchive:
		// The path may hold colons; a tag never holds a slash. An
		// archive's reference may hold both (host:port/repo:tag), so
		// an existing file decides.
		r.Name = rest
		if i := strings.Index(rest, ":"); i >= 0 && r.Transport == DockerArchive {
			r.Name, r.Tag = rest[:i], rest[i+1:]
		} else if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i+1:], "/") {
			r.Name, r.Tag = rest[:i], rest[i+1:]
		}
		if r.Name == "" {
			return Ref{}, fmt.Errorf("%q: no path", s)
		}
	default:
		return Ref{}, fmt.Errorf("%q: unknown transport %q (want docker, oci or docker-archive)", s, t)
	}
	return r, nil
}

// Access is how registries are reached.
type Access struct {
	// Insecure allows plain HTTP and unverified TLS (skopeo's
	// --tls-verify=false).
	Insecure bool
	// Jobs is the number of blobs pushed at once (0: the library's).
	Jobs int
}

func (a Access) nameOpts() []name.Option {
	if a.Insecure {
		return []name.Option{name.Insecure}
	}
	return nil
}

func (a Access) remoteOpts(ctx context.Context) []remote.Option {
	// Credentials as docker, podman and crane find them:
	// $DOCKER_CONFIG/config.json, ~/.docker/config.json,
	// $REGISTRY_AUTH_FILE, containers/auth.json, credential helpers.
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithUserAgent("cfi2sframe")}
	t := remote.DefaultTransport.(*http.Transport).Clone()
	if a.Insecure {
		t.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with --tls-verify=false
		opts = append(opts, remote.WithTransport(checkManifests{t}))
	} else {
		opts = append(opts, remote.WithTransport(checkManifests{httpsOnly{t}}))
	}
	if a.Jobs > 0 {
		opts = append(opts, remote.WithJobs(a.Jobs))
	}
	return opts
}

// source is what a reference names: an image or an index, checked
// (checkImage, checkIndex).
type source struct {
	img *checkedImage
	idx *checkedIndex
}

// open reads the reference's manifest (not its layers) and checks it
// against the digest it was reached by.
func open(ctx context.Context, r Ref, a Access) (source, error) {
	switch r.Transport {
	case Docker:
		ref, err := name.ParseReference(r.Name, a.nameOpts()...)
		if err != nil {
			return source{}, err
		}
		// The transport checked the manifest against the reference's
		// digest or the registry's Docker-Content-Digest (checkManifests).
		desc, err := remote.Get(ref, a.remoteOpts(ctx)...)
		if err != nil {
			return source{}, err
		}
		if desc.MediaType.IsIndex() {
			idx, err := desc.ImageIndex()
			if err != nil {
				return source{}, err
			}
			ci, err := checkIndex(ctx, idx, &desc.Descriptor, []v1.Hash{desc.Digest}, nil)
			return source{idx: ci}, err
		}
		img, err := desc.Image()
		if err != nil {
			return source{}, err
		}
		ci, err := checkImage(ctx, img, &desc.Descriptor, "", nil)
		return source{img: ci}, err
	case OCI:
		// index.json is read whole by the layout's reader: bound it
		// first.
		if st, err := os.Stat(filepath.Join(r.Name, "index.json")); err == nil && st.Size() > MaxDocument {
			return source{}, fmt.Errorf("index.json: %d bytes, over the %d MiB limit on manifests, indexes and configs", st.Size(), MaxDocument>>20)
		}
		idx, err := layout.ImageIndexFromPath(r.Name)
		if err != nil {
			return source{}, err
		}
		root, err := checkIndex(ctx, idx, nil, nil, layoutBlobSize(r.Name))
		if err != nil {
			return source{}, fmt.Errorf("index.json: %w", err)
		}
		return fromLayout(root, r.Tag)
	case DockerArchive:
		var tag *name.Tag
		if r.Tag != "" {
			t, err := name.NewTag(r.Tag)
			if err != nil {
				return source{}, err
			}
			tag = &t
		}
		if st, err := os.Stat(r.Name); err != nil {
			return source{}, err
		} else if !st.Mode().IsRegular() {
			return source{}, errors.New("not a regular file")
		}
		img, err := tarball.ImageFromPath(r.Name, tag)
		if err != nil {
			return source{}, err
		}
		// The archive's manifest is made from its files, so there is
		// no digest to hold it to; its layers are held to the config's
		// diff_ids as they are converted.
		ci, err := checkImage(ctx, img, nil, "", nil)
		return source{img: ci}, err
	}
	return source{}, fmt.Errorf("unknown transport %q", r.Transport)
}

// layoutBlobSize is the size of a blob of the OCI layout dir, as its file
// says.
func layoutBlobSize(dir string) sizer {
	return func(h v1.Hash) (int64, bool) {
		st, err := os.Lstat(filepath.Join(dir, "blobs", h.Algorithm, h.Hex))
		if err != nil || !st.Mode().IsRegular() {
			return 0, false
		}
		return st.Size(), true
	}
}

const refName = "org.opencontainers.image.ref.name"

// fromLayout picks the manifest tagged tag in a layout's index.json, or
// its only one when tag is "".
func fromLayout(idx *checkedIndex, tag string) (source, error) {
	var found []v1.Descriptor
	for _, d := range idx.im.Manifests {
		if tag == "" || d.Annotations[refName] == tag {
			found = append(found, d)
		}
	}
	switch {
	case len(found) == 0 && tag != "":
		return source{}, fmt.Errorf("no image tagged %q in index.json", tag)
	case len(found) == 0:
		return source{}, errors.New("index.json lists no image")
	case len(found) > 1:
		return source{}, fmt.Errorf("index.json lists %d images; name one with :TAG", len(found))
	}
	d := found[0]
	if d.MediaType.IsIndex() {
		ii, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return source{}, err
		}
		return source{idx: ii.(*checkedIndex)}, nil
	}
	ci, err := idx.checkedImage(d.Digest, "")
	return source{img: ci}, err
}

// output is what is written: the converted image or index.
type output struct {
	img v1.Image
	idx v1.ImageIndex
}

// write writes the converted image or index to r. A registry's tag is
// pushed last, after every blob, so an interrupted push leaves it as it
// was; an archive is written to a temporary name and renamed; a layout
// is written as writeLayout says.
func write(ctx context.Context, r Ref, a Access, s output, srcRef Ref) error {
	switch r.Transport {
	case Docker:
		ref, err := name.ParseReference(r.Name, a.nameOpts()...)
		if err != nil {
			return err
		}
		if s.idx != nil {
			return remote.WriteIndex(ref, s.idx, a.remoteOpts(ctx)...)
		}
		return remote.Write(ref, s.img, a.remoteOpts(ctx)...)
	case OCI:
		return writeLayout(ctx, r, s)
	case DockerArchive:
		if s.idx != nil {
			return errors.New("a docker archive holds one image, and the source is a multi-platform index")
		}
		tag := r.Tag
		if tag == "" && srcRef.Transport == DockerArchive {
			tag = srcRef.Tag
		}
		var ref name.Reference
		if tag != "" {
			t, err := name.NewTag(tag)
			if err != nil {
				return err
			}
			ref = t
		} else {
			h, err := s.img.Digest()
			if err != nil {
				return err
			}
			// An archive without a tag: docker load names it by its ID.
			if ref, err = name.NewDigest("cfi2sframe@" + h.String()); err != nil {
				return err
			}
		}
		return elfwrite.WriteFileAtomic(ctx, r.Name, 0o644, func(f *os.File) error {
			return tarball.Write(ref, s.img, f)
		})
	}
	return fmt.Errorf("unknown transport %q", r.Transport)
}

// httpsOnly refuses plain HTTP but to a loopback host. go-containerregistry
// tries plain HTTP beside HTTPS for private (RFC 1918) addresses too,
// which would send credentials in the clear to whoever answers on a
// network; skopeo and docker do that only when told to (here,
// --tls-verify=false) or for the machine itself.
type httpsOnly struct{ next http.RoundTripper }

func (t httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" && !loopback(r.URL.Hostname()) {
		return nil, fmt.Errorf("%s: plain HTTP refused (--tls-verify=false allows it)", r.URL.Host)
	}
	return t.next.RoundTrip(r)
}

func loopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkManifests holds every manifest a registry serves to the digest
// it was asked for, or to the registry's Docker-Content-Digest when it
// was asked for by tag, and to MaxDocument. go-containerregistry checks
// the first only: a tag's manifest that is not the one the registry
// names would be converted and published under a fresh digest.
type checkManifests struct{ next http.RoundTripper }

func (t checkManifests) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	dir, ref := path.Split(r.URL.Path)
	if err != nil || r.Method != http.MethodGet || resp.StatusCode != http.StatusOK || !strings.HasSuffix(dir, "/manifests/") {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDocument+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(body) > MaxDocument {
		return nil, fmt.Errorf("manifest %s: over the %d MiB limit on manifests, indexes and configs", ref, MaxDocument>>20)
	}
	want := resp.Header.Get("Docker-Content-Digest")
	what := "the registry's Docker-Content-Digest"
	if strings.Contains(ref, ":") {
		want, what = ref, "the digest it was asked for"
	}
	if types.MediaType(resp.Header.Get("Content-Type")) == types.DockerManifestSchema1Signed {
		want = "" // its digest is of the payload without the signatures
	}
	if want != "" {
		h, err := v1.NewHash(want)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %s %q: %w", ref, what, want, err)
		}
		hasher, err := v1.Hasher(h.Algorithm)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %s %q: %w", ref, what, want, err)
		}
		hasher.Write(body)
		if got := sum(hasher, h.Algorithm); got != h {
			return nil, fmt.Errorf("manifest %s: does not match its digest: %s is %s, but the body the registry served hashes to %s", ref, what, h, got)
		}
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}
