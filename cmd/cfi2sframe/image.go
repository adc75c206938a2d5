package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cfi2sframe/cfi2sframe/convert"
	"github.com/cfi2sframe/cfi2sframe/internal/image"
)

// exitKeptGoing is the exit status of an image written with files that
// failed and were passed through unchanged (--keep-going).
const exitKeptGoing = 3

type imageFlags struct {
	convertFlags
	keepGoing bool
	tlsVerify bool
	compress  string
	tmpdir    string
}

func newImageCmd() *cobra.Command {
	var fl imageFlags
	cmd := &cobra.Command{
		Use:   "image [flags] SRC DST",
		Short: "Convert the ELF files of a container image (registry, OCI layout, docker archive)",
		Long: `image reads the container image or multi-platform index SRC, converts
every ELF file in its layers as the file command converts files, and writes
the result to DST. References use skopeo's transports:

    docker://HOST/REPO:TAG, docker://HOST/REPO@sha256:...   a registry
    oci:DIR[:TAG]                                          an OCI image layout
    docker-archive:FILE[:REPO:TAG]                         docker save's archive

Registry credentials are found as docker, podman and crane find them:
$DOCKER_CONFIG/config.json, ~/.docker/config.json, $REGISTRY_AUTH_FILE,
containers/auth.json and credential helpers. --tls-verify=false allows
plain HTTP and unverified TLS; without it only a registry on the machine
itself (localhost, 127.0.0.1, ::1) may answer over plain HTTP, as docker
allows.

Layers are read as streams and never unpacked to disk: each entry of a
layer's tar stream passes through, and each regular ELF file is converted
in memory (files over 16 MiB through an unlinked temporary file in
$TMPDIR or --tmpdir). Every tar header is kept: name, owner and group,
mode, times, PAX records (extended attributes such as
security.capability), hard and symbolic links, whiteouts; only the size
and content of converted files change. Files whose content is signed
(IMA/EVM attributes) are left alone. A converted layer is compressed again
as its source was (gzip, zstd or none) unless --dest-compress-format says
otherwise, into an unlinked temporary file; a layer with nothing to
convert is kept as it is, with its digest, so a registry stores no new
blob for it. The config's diff_ids and the manifest are rewritten, one
history entry records the command, and the annotation
dev.cfi2sframe.converted is added to the manifest (and index); labels
and annotations are kept. zstd layers in a Docker schema 2 image make the
manifest OCI, as Docker's schema has no zstd layer type.

Each image of a multi-platform index whose platform is amd64, arm64 or
s390x is converted; others pass through with a note, and attestations of
a converted image are dropped. -j N layers are converted at once; --json
prints one record per layer on stdout. The same input and options give
the same digests.

Nothing is used on the image's word before it is checked: every manifest
and index against the digest it was reached by (from a registry by tag,
against Docker-Content-Digest), the config against the manifest, every
layer that is read against its descriptor's digest and size (to the
blob's end, past the tar's end too) and its tar stream against the
config's diff_id. Manifests, indexes and configs over 4 MiB, more than
1000 layers or manifests, indexes nested more than 8 deep or in a cycle,
an xz dictionary or zstd window over 128 MiB, a layer expanding past
--max-expansion, or more than 1 MiB after a tar's end are refused. A
mismatch or a limit is an error naming the reference and the blob, and
nothing is written; a new oci: layout is written beside its name and
renamed into place whole.

By default an image in which a file fails is not written, and one line
names the layer, the file and the reason (exit status 1). --keep-going
passes such files through unchanged, lists them, writes the image and
exits with status 3. A registry's tag is pushed after every blob, so an
interrupted push leaves it as it was; a docker archive is written to a
temporary name first. Ctrl-C exits with status 130.`,
		Example: `  # Convert an image between two repositories of a registry
  cfi2sframe image docker://registry.example/app:1.2 docker://registry.example/app:1.2-sframe

  # An OCI layout to another, zstd layers, one JSON record per layer
  cfi2sframe image --dest-compress-format zstd --json oci:app:latest oci:app-sframe:latest

  # What docker save wrote, for the kernel's unwinder
  cfi2sframe image --for kernel docker-archive:app.tar docker-archive:app-sframe.tar:app:sframe`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return runImage(cmd, args, &fl) },
	}
	addConversionFlags(cmd, &fl.convertFlags, "layers")
	f := cmd.Flags()
	f.BoolVar(&fl.json, "json", false, "print one JSON record per layer on stdout")
	f.BoolVar(&fl.keepGoing, "keep-going", false, "pass files that fail through unchanged, list them, and write the image (exit status 3)")
	f.BoolVar(&fl.tlsVerify, "tls-verify", true, "require HTTPS and verified certificates for registries")
	f.StringVar(&fl.compress, "dest-compress-format", "", "compress converted layers with `FORMAT` (gzip or zstd) instead of as their source was")
	f.StringVar(&fl.tmpdir, "tmpdir", "", "put converted layers and large files in `DIR` (default $TMPDIR or /tmp), unlinked")
	return cmd
}

func runImage(cmd *cobra.Command, args []string, fl *imageFlags) error {
	// A stream of many files, each garbage once written: collect as
	// Go does by default, not as the file command does (main.tuneGC),
	// which let the heap grow to its 200 MiB limit here.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(100)
	}
	opts, err := conversionOptions(cmd, &fl.convertFlags)
	if err != nil {
		return err
	}
	src, err := image.ParseRef(args[0])
	if err != nil {
		return err
	}
	dst, err := image.ParseRef(args[1])
	if err != nil {
		return err
	}
	iopts := image.Options{Convert: opts, KeepGoing: fl.keepGoing, Jobs: fl.jobs, TempDir: fl.tmpdir, Bounds: fl.bounds()}
	switch fl.compress {
	case "":
	case "gzip", "zstd":
		iopts.Compression = image.Compression(fl.compress)
	default:
		return fmt.Errorf("--dest-compress-format %q: want gzip or zstd", fl.compress)
	}
	iopts.CreatedBy = createdBy(fl, opts, iopts.Compression)
	stderr, stdout := cmd.ErrOrStderr(), cmd.OutOrStdout()
	enc := json.NewEncoder(stdout)
	tty := false
	if f, ok := stderr.(*os.File); ok && isTerminal(f) && !fl.quiet {
		tty = true
	}
	iopts.Layer = func(r image.LayerRecord, done, total int) {
		if fl.json {
			_ = enc.Encode(r)
		}
		if tty {
			const w = 30
			fmt.Fprintf(stderr, "\r\033[K[%-*s] %d/%d layers", w, bars(w*done/max(total, 1)), done, total)
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := image.Run(ctx, src, dst, image.Access{Insecure: !fl.tlsVerify}, iopts)
	if tty {
		fmt.Fprint(stderr, "\r\033[K")
	}
	if ctx.Err() != nil {
		return &exitError{130, fmt.Sprintf("%s: interrupted; %s left as it was", src, dst)}
	}
	if err != nil {
		return err
	}
	for _, f := range st.Failed {
		fmt.Fprintf(stderr, "cfi2sframe: passed through unchanged: %s\n", f.Error)
	}
	if !fl.quiet {
		for _, p := range st.Passed {
			fmt.Fprintf(stderr, "cfi2sframe: %s\n", p)
		}
		fmt.Fprintf(stderr, "%s: %d images, %d layers (%d written anew, %d kept); files: %s\n", dst, st.Images, st.Layers, st.NewLayers, st.Layers-st.NewLayers, countsText(st.Files))
	}
	if len(st.Failed) > 0 {
		return &exitError{exitKeptGoing, fmt.Sprintf("%s written, with %d files that failed passed through unchanged", dst, len(st.Failed))}
	}
	return nil
}

// createdBy is what the history entry and the annotation record: the
// options that decide the output, in effect (defaults included), and the
// tool's version; not the references, which may name a registry's host.
func createdBy(fl *imageFlags, opts convert.Options, comp image.Compression) string {
	parts := []string{"cfi2sframe image"}
	if fl.forReader != "" {
		parts = append(parts, "--for="+fl.forReader)
	}
	v := opts.Version
	if v == 0 {
		v = 3 // convert.Options: 0 means 3
	}
	parts = append(parts, fmt.Sprintf("--sframe-version=%d", v))
	for _, o := range []struct {
		on   bool
		flag string
	}{{opts.PCRel, "--pcrel"}, {opts.NoSignalFrames, "--signal-frames=false"}, {opts.Force, "--force"}, {opts.FragileLayout, "--fragile-layout"}, {opts.PlainLayout, "--shared-blocks=false"}, {opts.FromCode, "--from-code"}, {fl.keepGoing, "--keep-going"}} {
		if o.on {
			parts = append(parts, o.flag)
		}
	}
	if comp != "" {
		parts = append(parts, "--dest-compress-format="+string(comp))
	}
	return strings.Join(parts, " ") + " (" + strings.TrimSpace(firstLine(versionString())) + ")"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// countsText prints counts by outcome, in the tree's order.
func countsText(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
