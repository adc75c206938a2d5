package image

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

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
		opts = append(opts, remote.WithTransport(t))
	} else {
		opts = append(opts, remote.WithTransport(httpsOnly{t}))
	}
	if a.Jobs > 0 {
		opts = append(opts, remote.WithJobs(a.Jobs))
	}
	return opts
}

// source is what a reference names: an image or an index.
type source struct {
	img v1.Image
	idx v1.ImageIndex
}

// open reads the reference's manifest (not its layers).
func open(ctx context.Context, r Ref, a Access) (source, error) {
	switch r.Transport {
	case Docker:
		ref, err := name.ParseReference(r.Name, a.nameOpts()...)
		if err != nil {
			return source{}, err
		}
		desc, err := remote.Get(ref, a.remoteOpts(ctx)...)
		if err != nil {
			return source{}, err
		}
		if desc.MediaType.IsIndex() {
			idx, err := desc.ImageIndex()
			return source{idx: idx}, err
		}
		img, err := desc.Image()
		return source{img: img}, err
	case OCI:
		idx, err := layout.ImageIndexFromPath(r.Name)
		if err != nil {
			return source{}, err
		}
		return fromLayout(idx, r.Tag)
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
		return source{img: img}, err
	}
	return source{}, fmt.Errorf("unknown transport %q", r.Transport)
}

const refName = "org.opencontainers.image.ref.name"

// fromLayout picks the manifest tagged tag in a layout's index.json, or
// its only one when tag is "".
func fromLayout(idx v1.ImageIndex, tag string) (source, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return source{}, err
	}
	var found []v1.Descriptor
	for _, d := range im.Manifests {
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
		return source{idx: ii}, err
	}
	img, err := idx.Image(d.Digest)
	return source{img: img}, err
}

// write writes the converted image or index to r. A registry's tag is
// pushed last, after every blob, so an interrupted push leaves it as it
// was; an archive is written to a temporary name and renamed.
func write(ctx context.Context, r Ref, a Access, s source, srcRef Ref) error {
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
		p, err := layout.FromPath(r.Name)
		if err != nil {
			if _, serr := os.Stat(filepath.Join(r.Name, "index.json")); !errors.Is(serr, os.ErrNotExist) {
				return err
			}
			if p, err = layout.Write(r.Name, empty.Index); err != nil {
				return err
			}
		}
		var opts []layout.Option
		matcher := func(v1.Descriptor) bool { return false }
		if r.Tag != "" {
			opts = append(opts, layout.WithAnnotations(map[string]string{refName: r.Tag}))
			matcher = match.Annotation(refName, r.Tag)
		}
		if s.idx != nil {
			return p.ReplaceIndex(s.idx, matcher, opts...)
		}
		return p.ReplaceImage(s.img, matcher, opts...)
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
