package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/treediff"
)

// The registry's one user, and the tag every test image has.
const (
	imageUser = "e2e"
	imagePass = "secret-e2e"
	imageTag  = "v1"
)

// imageAppScripts are run in a chroot of the amd64 image before and after
// conversion, besides rootfsScripts: the program and library of layer 2
// through each of their names, what layer 2's whiteouts removed and
// layer 3's text; as nobody, the setuid program of another owner.
var imageAppScripts = []struct {
	user   string
	script string
}{
	{"", `stat -c '%A %u %g %h %N' /opt/app/bin/prog /opt/app/bin/prog-link /opt/app/bin/prog-setuid /opt/app/lib/libimg.so /usr/local/bin/prog
/opt/app/bin/prog x
/opt/app/bin/prog-link x y
/usr/local/bin/prog
if [ -e /usr/bin/ssh-add ]; then echo "ssh-add: present"; else echo "ssh-add: whited out"; fi
ls -A /usr/share/doc/bash
cat /etc/app.conf
echo ok`},
	{"65534:65534", `/opt/app/bin/prog-setuid x
echo ok`},
}

// TestImage converts container images through a registry, as users
// will: an image index of an amd64 image (layer 1 the Debian root file
// system of scripts/rootfs.sh, layer 2 a program and a library of its own
// with a hard link, a symbolic link, a setuid file of another owner, a
// whiteout and an opaque directory, layer 3 text only), arm64 and s390x
// ones (the same program with the cross libc, then the same text layer;
// arm64's manifest without a mediaType field, as umoci writes them) and
// a riscv64 one (text only), written as an OCI layout by hand with gzip
// layers, is pushed with skopeo into Debian's registry (docker-registry,
// basic auth, plain HTTP) and converted with
//
//	DOCKER_CONFIG=DIR cfi2sframe image --tls-verify=false --json docker://HOST/test/src:v1 docker://HOST/test/dst:v1
//
// The result, copied back with skopeo and unpacked with umoci as the
// source is, must have every entry of the source with the same metadata
// (internal/testing/treediff: type, mode, owner, extended attributes, links,
// hard-link groups, times; ELF files' bytes may differ), every ELF file
// with an FDE converted and passing cfi2sframe verify and verify --for
// kernel (every other one byte-identical), programs printing the same in
// a chroot (amd64) or under qemu-user (arm64, s390x), the text layer's
// digest kept, the riscv64 image passed through, gzip layers whose
// diff_ids are right, one --json record per layer, and the same index
// digest as cfi2sframe image from the OCI layout to another, twice (-j 1
// the second time). An image with a truncated ELF file fails with one
// line naming the layer and the file, and no tag written; with
// --keep-going it is written with the file unchanged, exit status 3.
// About a minute here, half of it gzip and umoci.
func TestImage(t *testing.T) {
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skip("builds and runs x86-64 Linux images")
	}
	if os.Geteuid() != 0 {
		if toolchain.Required() {
			t.Fatal("needs root: unpacking owners, devices and capabilities, chroot")
		}
		t.Skip("needs root: unpacking owners, devices and capabilities, chroot")
	}
	tarball := rootfsTarball(t)
	registryBin := need(t, "docker-registry")
	htpasswd := need(t, "htpasswd")
	skopeo := need(t, "skopeo")
	umoci := need(t, "umoci")
	gcc := need(t, "gcc")
	need(t, "chroot")
	for _, x := range imageCross {
		need(t, crossArchs[x.arch].cc)
		need(t, crossArchs[x.arch].qemu)
	}

	t0 := time.Now()
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)

	// The source layout.
	amdApp := buildImageApp(t, gcc, filepath.Join(tmp, "app-amd64"))
	fixed := time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC)
	dir := func(name string) tarFile {
		return tarFile{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: fixed}}
	}
	file := func(name string, mode int64, body []byte) tarFile {
		return tarFile{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, ModTime: fixed}, body: body}
	}
	appFiles := func(app imageApp) []tarFile {
		setuid := file("opt/app/bin/prog-setuid", 0o4755, app.prog)
		setuid.hdr.Uid, setuid.hdr.Gid = 1000, 1000
		return []tarFile{
			dir("opt/"), dir("opt/app/"), dir("opt/app/bin/"), dir("opt/app/lib/"),
			file("opt/app/lib/libimg.so", 0o644, app.lib),
			file("opt/app/bin/prog", 0o755, app.prog),
			{hdr: tar.Header{Typeflag: tar.TypeLink, Name: "opt/app/bin/prog-link", Linkname: "opt/app/bin/prog", ModTime: fixed}},
			setuid,
		}
	}
	symlink := tarFile{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: "usr/local/bin/prog", Linkname: "/opt/app/bin/prog", Mode: 0o777, ModTime: fixed}}
	layer2 := append(appFiles(amdApp), symlink,
		file("usr/bin/.wh.ssh-add", 0o644, nil),
		file("usr/share/doc/bash/.wh..wh..opq", 0o644, nil),
		file("usr/share/doc/bash/README.image", 0o644, []byte("bash's documentation was replaced by layer 2\n")))
	layer3 := []tarFile{file("etc/app.conf", 0o644, []byte("# layer 3: text only\ngreeting = hello\n"))}
	// The other architectures' first layer: their program, library and
	// links as amd64's, and the dynamic loader and libc of the cross
	// libc where the program looks for them.
	crossLayer1 := map[string][]tarFile{}
	for _, x := range imageCross {
		cx := crossArchs[x.arch]
		app := buildImageApp(t, cx.cc, filepath.Join(tmp, "app-"+x.goarch))
		files := []tarFile{dir("etc/"), dir("lib/")}
		for _, f := range []string{x.ld, "libc.so.6"} {
			b, err := os.ReadFile(filepath.Join(cx.sysroot, "lib", f))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, file("lib/"+f, 0o755, b))
		}
		files = append(files, dir("usr/"), dir("usr/local/"), dir("usr/local/bin/"), symlink)
		crossLayer1[x.goarch] = append(files, appFiles(app)...)
	}
	// A layer with an ELF file truncated in its header (valid magic, 40
	// of 64 bytes) between a program and a text file.
	broken := amdApp.lib[:40]
	badLayer := []tarFile{dir("opt/"), dir("opt/app/"), dir("opt/app/bin/"), dir("opt/app/lib/"),
		file("opt/app/bin/prog", 0o755, amdApp.prog), file("opt/app/lib/libbroken.so", 0o755, broken),
		file("etc/bad.conf", 0o644, []byte("bad = yes\n"))}

	srcDir := filepath.Join(tmp, "src")
	lay := newOCILayout(t, srcDir)
	l1 := lay.layerFromFile(tarball)
	l3 := lay.layer(layer3)
	images := []ociDescriptor{lay.image("amd64", false, l1, lay.layer(layer2), l3)}
	for _, x := range imageCross {
		// arm64's manifest has no mediaType field, as umoci writes them.
		images = append(images, lay.image(x.goarch, x.goarch == "arm64", lay.layer(crossLayer1[x.goarch]), l3))
	}
	// An architecture cfi2sframe does not convert passes through.
	images = append(images, lay.image("riscv64", false, l3))
	lay.tag(imageTag, lay.index(images...))
	for _, d := range images {
		lay.tag(d.Platform.Architecture, d)
	}
	lay.tag("bad", lay.image("amd64", false, lay.layer(badLayer)))
	lay.write()
	t.Logf("source layout built in %.1f s", time.Since(t0).Seconds())

	// The registry, and the source pushed into it.
	reg := startRegistry(t, registryBin, htpasswd, filepath.Join(tmp, "registry"))
	creds := imageUser + ":" + imagePass
	skopeoRun := func(args ...string) {
		t.Helper()
		if out, err := runOut(t, nil, skopeo, append([]string{"--insecure-policy"}, args...)...); err != nil {
			t.Fatalf("skopeo %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	push := func(from, repo string) {
		skopeoRun("copy", "--quiet", "--all", "--preserve-digests", "--dest-creds", creds, "--dest-tls-verify=false",
			"oci:"+srcDir+":"+from, "docker://"+reg.host+"/"+repo+":"+imageTag)
	}
	push(imageTag, "test/src")
	push("bad", "test/bad")
	// The command finds the credentials where docker login puts them.
	dockerConfig := filepath.Join(tmp, "docker")
	auth := base64.StdEncoding.EncodeToString([]byte(creds))
	if err := os.MkdirAll(dockerConfig, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dockerConfig, "config.json"),
		[]byte(`{"auths": {"`+reg.host+`": {"auth": "`+auth+`"}}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The command's temporary files (unlinked, it says) go to cmdTmp,
	// which must be empty at the end.
	cmdTmp := filepath.Join(tmp, "cmdtmp")
	if err := os.Mkdir(cmdTmp, 0o700); err != nil {
		t.Fatal(err)
	}
	imageEnv := []string{"DOCKER_CONFIG=" + dockerConfig, "REGISTRY_AUTH_FILE=", "TMPDIR=" + cmdTmp}
	image := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		start := time.Now()
		stdout, stderr, err := runSplit(t, imageEnv, c2s, append([]string{"image"}, args...)...)
		t.Logf("cfi2sframe image %s: %.1f s", strings.Join(args, " "), time.Since(start).Seconds())
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			t.Fatalf("cfi2sframe image: %v", err)
		}
		if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
			t.Fatalf("cfi2sframe image panicked:\n%s", stderr)
		}
		return stdout, stderr, code
	}
	src := "docker://" + reg.host + "/test/src:" + imageTag
	dst := "docker://" + reg.host + "/test/dst:" + imageTag

	// The conversion through the registry.
	records, stderr, code := image("--tls-verify=false", "--json", src, dst)
	if code != 0 {
		t.Fatalf("cfi2sframe image %s %s: exit %d\n%s", src, dst, code, stderr)
	}
	dstDigest := reg.digest(t, "test/dst", imageTag)
	if dstDigest == "" {
		t.Fatal("no test/dst:" + imageTag + " in the registry after the conversion")
	}
	resDir := filepath.Join(tmp, "result")
	skopeoRun("copy", "--quiet", "--all", "--preserve-digests", "--src-creds", creds, "--src-tls-verify=false", dst, "oci:"+resDir+":"+imageTag)
	res := readOCILayout(t, resDir)
	top := res.resolve(t, imageTag)
	if top.Digest != dstDigest {
		t.Errorf("skopeo copied index %s, the registry says %s", top.Digest, dstDigest)
	}
	if top.MediaType != mediaTypeIndex {
		t.Fatalf("the result is a %s, not an image index", top.MediaType)
	}
	resImages := res.platforms(t, top)
	srcImages := readOCILayout(t, srcDir).platforms(t, lay.descs[imageTag])
	for arch := range srcImages {
		if _, ok := resImages[arch]; !ok {
			t.Fatalf("the result has no %s image (has %v)", arch, keys(resImages))
		}
	}
	if len(resImages) != len(srcImages) {
		t.Errorf("the result has %d images, want %d (%v)", len(resImages), len(srcImages), keys(resImages))
	}
	if r, s := resImages["riscv64"].desc.Digest, srcImages["riscv64"].desc.Digest; r != s {
		t.Errorf("the riscv64 image is %s, was %s: not passed through", r, s)
	}

	// Layers: converted ones new and gzip, the text one kept, diff_ids right.
	kept := map[string]int{"amd64": 2} // the text layer's index
	for _, x := range imageCross {
		kept[x.goarch] = 1
	}
	for arch, kept := range kept {
		s, r := srcImages[arch], resImages[arch]
		if len(r.manifest.Layers) != len(s.manifest.Layers) {
			t.Errorf("%s: %d layers, the source has %d", arch, len(r.manifest.Layers), len(s.manifest.Layers))
			continue
		}
		for i, l := range r.manifest.Layers {
			if i == kept {
				if l.Digest != s.manifest.Layers[i].Digest {
					t.Errorf("%s: the text-only layer %d is %s, was %s: not reused", arch, i+1, l.Digest, s.manifest.Layers[i].Digest)
				}
			} else if l.Digest == s.manifest.Layers[i].Digest {
				t.Errorf("%s: layer %d (%s) unchanged, but it holds ELF files", arch, i+1, l.Digest)
			}
			if l.MediaType != mediaTypeLayerGzip {
				t.Errorf("%s: layer %d is %s, want %s as the source's", arch, i+1, l.MediaType, mediaTypeLayerGzip)
			}
		}
		res.checkDiffIDs(t, arch, r)
		if r.config.Architecture != arch || r.config.OS != "linux" {
			t.Errorf("%s: the result's config says %s/%s", arch, r.config.OS, r.config.Architecture)
		}
		if _, ok := r.manifest.Annotations["dev.cfi2sframe.converted"]; !ok {
			t.Errorf("%s: the result's manifest has no dev.cfi2sframe.converted annotation: %v", arch, r.manifest.Annotations)
		}
	}
	checkLayerRecords(t, records, srcImages, resImages, kept)

	// Unpacked, as the source is: the same tree but for ELF files' bytes.
	srcTag := func(arch string) string { return srcDir + ":" + arch }
	if err := res.addTags(resImages); err != nil {
		t.Fatal(err)
	}
	unpack := func(image, bundle string) string {
		t.Helper()
		start := time.Now()
		if out, err := runOut(t, nil, umoci, "unpack", "--image", image, bundle); err != nil {
			t.Fatalf("umoci unpack --image %s %s: %v\n%s", image, bundle, err, out)
		}
		t.Logf("umoci unpack %s: %.1f s", filepath.Base(bundle), time.Since(start).Seconds())
		return filepath.Join(bundle, "rootfs")
	}
	// srcRoot and resRoot are the unpacked trees by architecture.
	srcRoot, resRoot := map[string]string{}, map[string]string{}
	for arch := range kept {
		for _, b := range []string{"src-" + arch, "res-" + arch} {
			d := filepath.Join(tmp, b)
			t.Cleanup(func() { os.RemoveAll(d) })
		}
		srcRoot[arch] = unpack(srcTag(arch), filepath.Join(tmp, "src-"+arch))
		resRoot[arch] = unpack(resDir+":"+arch, filepath.Join(tmp, "res-"+arch))
	}
	srcAmd, resAmd := srcRoot["amd64"], resRoot["amd64"]
	checkRootfsFixture(t, srcAmd)
	start := time.Now()
	for arch := range kept {
		diffs, err := treediff.Compare(srcRoot[arch], resRoot[arch], treediff.Options{ContentMayDiffer: elfIn(srcRoot[arch]), Times: true, DirTimes: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(diffs) > 0 {
			t.Errorf("%s: %d differences from the source:\n%s", arch, len(diffs), summarizeDiffs(diffs))
		}
	}
	t.Logf("treediff: %.1f s", time.Since(start).Seconds())
	start = time.Now()
	for arch := range kept {
		n := checkConvertedELFs(t, c2s, srcRoot[arch], resRoot[arch])
		t.Logf("%s ELF files: %s", arch, n)
		// Others: prog and its hard link, prog-setuid, libimg.so, libc.so.6, the loader.
		if arch == "amd64" && n.converted < 700 || arch != "amd64" && n.converted != 5 {
			t.Errorf("%s: %d ELF files converted, want 5 (over 700 for amd64)", arch, n.converted)
		}
	}
	t.Logf("ELF files verified in %.1f s", time.Since(start).Seconds())

	// The programs print the same.
	for _, s := range append(rootfsScripts, imageAppScripts...) {
		want := chrootRun(t, srcAmd, s.user, s.script)
		if got := chrootRun(t, resAmd, s.user, s.script); got != want {
			t.Errorf("chroot (user %q) prints, in the result:\n%s\nin the source:\n%s", s.user, got, want)
		}
		if s.script == imageAppScripts[0].script {
			for _, w := range []string{"-rwsr-xr-x 1000 1000 1 '/opt/app/bin/prog-setuid'", "ssh-add: whited out", "greeting = hello", "vla "} {
				if !strings.Contains(want, w) {
					t.Errorf("the source image's chroot does not print %q: the fixture or its unpacking is wrong\n%s", w, want)
				}
			}
			if ls := "\nREADME.image\n"; !strings.Contains(want, ls) {
				t.Errorf("the opaque whiteout left more than README.image in usr/share/doc/bash:\n%s", want)
			}
		}
	}
	for _, x := range imageCross {
		qemu := crossArchs[x.arch].qemu
		for _, p := range []string{"opt/app/bin/prog", "opt/app/bin/prog-link", "opt/app/bin/prog-setuid"} {
			var outs [2]string
			for i, root := range []string{srcRoot[x.goarch], resRoot[x.goarch]} {
				out, err := runOut(t, nil, qemu, "-L", root, filepath.Join(root, p), "x")
				if err != nil {
					t.Errorf("%s -L %s %s: %v\n%s", qemu, root, p, err, out)
				}
				outs[i] = out
			}
			if outs[0] != outs[1] || !strings.HasPrefix(outs[0], "vla ") {
				t.Errorf("%s %s prints %q, the source printed %q", x.goarch, p, outs[1], outs[0])
			}
		}
	}

	// The same digests from an OCI layout, twice, the second time one
	// layer at a time.
	for i, out := range []string{"oci1", "oci2"} {
		d := filepath.Join(tmp, out)
		args := []string{"-q", "oci:" + srcDir + ":" + imageTag, "oci:" + d + ":" + imageTag}
		if i == 1 {
			args = append([]string{"-j", "1"}, args...)
		}
		if _, stderr, code := image(args...); code != 0 {
			t.Fatalf("cfi2sframe image to an OCI layout: exit %d\n%s", code, stderr)
		}
		if got := readOCILayout(t, d).resolve(t, imageTag).Digest; got != dstDigest {
			t.Errorf("cfi2sframe image oci:SRC oci:%s wrote index %s, the registry round trip %s: not deterministic", out, got, dstDigest)
		}
		os.RemoveAll(d)
	}

	// A truncated ELF file: one line naming layer and file, no tag
	// written; with --keep-going the image, the file unchanged.
	bad := "docker://" + reg.host + "/test/bad:" + imageTag
	badOut := "docker://" + reg.host + "/test/bad-out:" + imageTag
	badLayerDigest := readOCILayout(t, srcDir).image(t, lay.descs["bad"]).manifest.Layers[0].Digest
	_, stderr, code = image("--tls-verify=false", bad, badOut)
	msg := strings.TrimSpace(stderr)
	t.Logf("exit %d: %s", code, msg)
	if code != 1 {
		t.Errorf("a layer with a truncated ELF file: exit %d, want 1:\n%s", code, stderr)
	} else if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "opt/app/lib/libbroken.so") ||
		!strings.Contains(msg, "layer") || !strings.Contains(msg, strings.TrimPrefix(badLayerDigest, "sha256:")[:12]) {
		t.Errorf("want one line naming the layer (%s) and opt/app/lib/libbroken.so, got:\n%s", badLayerDigest, stderr)
	}
	if d := reg.digest(t, "test/bad-out", imageTag); d != "" {
		t.Errorf("the failed conversion wrote test/bad-out:%s (%s)", imageTag, d)
	}
	if out, err := runOut(t, nil, skopeo, "inspect", "--raw", "--creds", creds, "--tls-verify=false", badOut); err == nil {
		t.Errorf("skopeo inspect %s succeeds after a failed conversion:\n%s", badOut, out)
	}
	_, stderr, code = image("--tls-verify=false", "--keep-going", bad, badOut)
	t.Logf("--keep-going: exit %d: %s", code, strings.TrimSpace(stderr))
	if code != 3 {
		t.Errorf("--keep-going with a failed file: exit %d, want 3 (cfi2sframe image --help)\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "opt/app/lib/libbroken.so") {
		t.Errorf("--keep-going does not name the failed file:\n%s", stderr)
	}
	if reg.digest(t, "test/bad-out", imageTag) == "" {
		t.Fatalf("--keep-going wrote no test/bad-out:%s", imageTag)
	}
	badDir := filepath.Join(tmp, "bad-out")
	skopeoRun("copy", "--quiet", "--preserve-digests", "--src-creds", creds, "--src-tls-verify=false", badOut, "oci:"+badDir+":"+imageTag)
	bo := readOCILayout(t, badDir)
	bi := bo.image(t, bo.resolve(t, imageTag))
	if len(bi.manifest.Layers) != 1 {
		t.Fatalf("--keep-going result has %d layers, want 1", len(bi.manifest.Layers))
	}
	got := bo.layerFiles(t, bi.manifest.Layers[0])
	if !bytes.Equal(got["opt/app/lib/libbroken.so"], broken) {
		t.Errorf("--keep-going changed opt/app/lib/libbroken.so (%d bytes, was %d)", len(got["opt/app/lib/libbroken.so"]), len(broken))
	}
	if f, err := elf.NewFile(bytes.NewReader(got["opt/app/bin/prog"])); err != nil || f.Section(".sframe") == nil {
		t.Errorf("--keep-going: opt/app/bin/prog not converted (%v)", err)
	}
	if string(got["etc/bad.conf"]) != "bad = yes\n" {
		t.Errorf("--keep-going: etc/bad.conf is %q", got["etc/bad.conf"])
	}
	if left, _ := os.ReadDir(cmdTmp); len(left) > 0 {
		t.Errorf("cfi2sframe image left %d files in $TMPDIR, %s first", len(left), left[0].Name())
	}
	t.Logf("total %.1f s", time.Since(t0).Seconds())
}

// checkLayerRecords checks image --json's output: one record per layer of
// each image, naming its source digest, and the result's for the layers
// written anew; kept[arch] is the index (from 0) of the one layer kept.
func checkLayerRecords(t *testing.T, out string, src, res map[string]ociImage, kept map[string]int) {
	t.Helper()
	type record struct {
		Platform  string         `json:"platform"`
		Layer     int            `json:"layer"`
		Digest    string         `json:"digest"`
		NewDigest string         `json:"new_digest"`
		Files     map[string]int `json:"files"`
	}
	seen := map[string]bool{}
	n := 0
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var r record
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			t.Errorf("--json: %v in\n%s", err, out)
			return
		}
		n++
		arch := r.Platform[strings.LastIndex(r.Platform, "/")+1:]
		key := fmt.Sprintf("%s layer %d", arch, r.Layer)
		s, ok := src[arch]
		if _, conv := kept[arch]; !conv {
			ok = false
		}
		if !ok || r.Layer < 1 || r.Layer > len(s.manifest.Layers) || seen[key] {
			t.Errorf("--json: a record for %s (platform %q): no such layer, or twice", key, r.Platform)
			continue
		}
		seen[key] = true
		i := r.Layer - 1
		if r.Digest != s.manifest.Layers[i].Digest {
			t.Errorf("--json: %s: digest %s, the source's is %s", key, r.Digest, s.manifest.Layers[i].Digest)
		}
		switch {
		case i == kept[arch] && (r.NewDigest != "" || r.Files["converted"] != 0):
			t.Errorf("--json: %s, text only: new digest %q, %d converted", key, r.NewDigest, r.Files["converted"])
		case i != kept[arch] && (r.NewDigest != res[arch].manifest.Layers[i].Digest || r.Files["converted"] == 0):
			t.Errorf("--json: %s: new digest %q, the result's is %s; %d converted", key, r.NewDigest, res[arch].manifest.Layers[i].Digest, r.Files["converted"])
		}
	}
	want := 0
	for arch := range kept {
		want += len(src[arch].manifest.Layers)
	}
	if n != want {
		t.Errorf("--json printed %d records, want %d (one per layer of each image):\n%s", n, want, out)
	}
}

// imageCross are the images of the index besides amd64's: Debian's cross
// compiler and libc (crossArchs), run with qemu-user; ld is the dynamic
// loader's name.
var imageCross = []struct{ goarch, arch, ld string }{
	{"arm64", "aarch64", "ld-linux-aarch64.so.1"},
	{"s390x", "s390x", "ld64.so.1"},
}

// imageApp is testdata/prog.c linked with testdata/lib.c as libimg.so,
// found through the run path /opt/app/lib.
type imageApp struct{ prog, lib []byte }

func buildImageApp(t *testing.T, cc, dir string) imageApp {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lib, prog := filepath.Join(dir, "libimg.so"), filepath.Join(dir, "prog")
	for _, args := range [][]string{
		{"-O2", "-fPIC", "-shared", "-o", lib, "testdata/lib.c"},
		{"-O2", "-o", prog, "testdata/prog.c", "-L" + dir, "-limg", "-Wl,-rpath,/opt/app/lib"},
	} {
		if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
		}
	}
	var a imageApp
	var err error
	if a.prog, err = os.ReadFile(prog); err != nil {
		t.Fatal(err)
	}
	if a.lib, err = os.ReadFile(lib); err != nil {
		t.Fatal(err)
	}
	return a
}

// elfCount is what checkConvertedELFs found.
type elfCount struct{ converted, withoutFDE int }

func (c elfCount) String() string {
	return fmt.Sprintf("%d converted, %d without FDEs (unchanged)", c.converted, c.withoutFDE)
}

// checkConvertedELFs requires every ELF file of the tree src with an
// FDE in .eh_frame or .debug_frame to have .sframe in the tree res, and
// all of them to pass cfi2sframe verify and verify --for kernel (run on
// all at once); every other ELF file must be unchanged. Hard links count
// once.
func checkConvertedELFs(t *testing.T, c2s, src, res string) elfCount {
	t.Helper()
	var c elfCount
	var files []string
	seen := map[[2]uint64]bool{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			id := [2]uint64{uint64(st.Dev), st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte(elf.ELFMAG)) {
			return err
		}
		out, err := os.ReadFile(filepath.Join(res, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if fdeCount(b) == 0 {
			c.withoutFDE++
			if !bytes.Equal(b, out) {
				t.Errorf("%s: has no FDE but was changed", rel)
			}
			return nil
		}
		c.converted++
		f, err := elf.NewFile(bytes.NewReader(out))
		if err != nil || f.Section(".sframe") == nil {
			t.Errorf("%s: has FDEs but no .sframe in the result (%v)", rel, err)
			return nil
		}
		files = append(files, filepath.Join(res, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		return c
	}
	out, err := runOut(t, nil, c2s, append([]string{"verify", "-q"}, files...)...)
	if n := strings.Count(out, ": 0 disagreements,"); err != nil || n != len(files) {
		t.Errorf("cfi2sframe verify on %d files: %v, %d without disagreement\n%s", len(files), err, n, out)
	}
	if out, err := runOut(t, nil, c2s, append([]string{"verify", "--for", "kernel"}, files...)...); err != nil {
		t.Errorf("cfi2sframe verify --for kernel on %d files: %v\n%s", len(files), err, out)
	}
	return c
}

// fdeCount counts the FDEs of an ELF file's .eh_frame and .debug_frame,
// walking their records (a CIE has id 0 in .eh_frame, 0xffffffff in
// .debug_frame).
func fdeCount(b []byte) int {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return 0
	}
	bo := f.ByteOrder
	n := 0
	for name, cie := range map[string]uint64{".eh_frame": 0, ".debug_frame": 0xffffffff} {
		s := f.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			continue
		}
		d, err := s.Data()
		if err != nil {
			continue
		}
		for off := 0; off+8 <= len(d); {
			l, hdr := uint64(bo.Uint32(d[off:])), 4
			if l == 0 {
				if name == ".eh_frame" {
					break // the terminator
				}
				off += 4
				continue
			}
			id := uint64(0)
			if l == 0xffffffff {
				if off+20 > len(d) {
					break
				}
				l, hdr = bo.Uint64(d[off+4:]), 12
				id = bo.Uint64(d[off+12:])
				if cie == 0xffffffff {
					cie = 0xffffffffffffffff
				}
			} else {
				id = uint64(bo.Uint32(d[off+4:]))
			}
			if id != cie {
				n++
			}
			if l > uint64(len(d)) {
				break
			}
			off += hdr + int(l)
		}
	}
	return n
}

// elfIn says which files of tree may differ after conversion: those
// beginning with the ELF magic.
func elfIn(tree string) func(string) bool {
	return func(rel string) bool {
		f, err := os.Open(filepath.Join(tree, rel))
		if err != nil {
			return false
		}
		defer f.Close()
		head := make([]byte, 4)
		n, _ := io.ReadFull(f, head)
		return n == 4 && string(head) == elf.ELFMAG
	}
}

// runOut runs a command with a timeout and returns its stdout and
// stderr together.
func runOut(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	stdout, stderr, err := runSplit(t, env, name, args...)
	return stdout + stderr, err
}

func runSplit(t *testing.T, env []string, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// registry is Debian's distribution registry, serving plain HTTP on
// 127.0.0.1 with basic authentication (bcrypt htpasswd).
type registry struct {
	host string
}

// startRegistry runs docker-registry serve on a free port with its
// storage in dir, stopped at the end of the test, and returns once it
// answers (401 without credentials, 200 with them).
func startRegistry(t *testing.T, bin, htpasswd, dir string) *registry {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "storage"), 0o700); err != nil {
		t.Fatal(err)
	}
	pw, err := exec.Command(htpasswd, "-Bbn", imageUser, imagePass).Output()
	if err != nil {
		t.Fatalf("htpasswd -Bbn: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), pw, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	l.Close()
	config := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
  secret: e2e-test-secret
auth:
  htpasswd:
    realm: e2e
    path: %s
`, filepath.Join(dir, "storage"), host, filepath.Join(dir, "htpasswd"))), 0o600); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s serve: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		logFile.Close()
	})
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-done:
			t.Fatalf("docker-registry exited: %v\n%s", cmd.ProcessState, log())
		default:
		}
		if resp, err := http.Get("http://" + host + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("docker-registry answers %s without credentials, want 401\n%s", resp.Status, log())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry does not answer on %s after 30 s\n%s", host, log())
		}
	}
	r := &registry{host: host}
	if code, _ := r.get(t, "/v2/"); code != http.StatusOK {
		t.Fatalf("docker-registry answers %d with credentials\n%s", code, log())
	}
	return r
}

func (r *registry) get(t *testing.T, path string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodHead, "http://"+r.host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(imageUser, imagePass)
	req.Header.Set("Accept", strings.Join([]string{mediaTypeIndex, mediaTypeManifest,
		"application/vnd.docker.distribution.manifest.list.v2+json", "application/vnd.docker.distribution.manifest.v2+json"}, ", "))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// digest returns the digest of repo:tag, or "" when the registry has
// no such tag.
func (r *registry) digest(t *testing.T, repo, tag string) string {
	t.Helper()
	code, h := r.get(t, "/v2/"+repo+"/manifests/"+tag)
	switch code {
	case http.StatusOK:
		return h.Get("Docker-Content-Digest")
	case http.StatusNotFound:
		return ""
	}
	t.Fatalf("HEAD %s:%s: status %d", repo, tag, code)
	return ""
}

// OCI image layout, written and read here by hand (not with the
// library the command uses, whose mistakes the test would then share).
const (
	mediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	refNameAnnotation  = "org.opencontainers.image.ref.name"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType,omitempty"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType,omitempty"`
	Config        ociDescriptor     `json:"config"`
	Layers        []ociDescriptor   `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

type ociConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		Env []string `json:"Env,omitempty"`
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// tarFile is one entry of a layer built here; the size is the body's.
type tarFile struct {
	hdr  tar.Header
	body []byte
}

// ociLayout writes an OCI image layout.
type ociLayout struct {
	t     *testing.T
	dir   string
	descs map[string]ociDescriptor // by tag
	tags  []string
}

// ociLayer is a layer blob and its diff_id.
type ociLayer struct {
	desc   ociDescriptor
	diffID string
}

func newOCILayout(t *testing.T, dir string) *ociLayout {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &ociLayout{t: t, dir: dir, descs: map[string]ociDescriptor{}}
}

// blob stores b and returns its descriptor.
func (l *ociLayout) blob(mediaType string, b []byte) ociDescriptor {
	sum := sha256.Sum256(b)
	d := "sha256:" + hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(l.dir, "blobs", "sha256", hex.EncodeToString(sum[:])), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
	return ociDescriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}
}

func (l *ociLayout) json(mediaType string, v any) ociDescriptor {
	b, err := json.Marshal(v)
	if err != nil {
		l.t.Fatal(err)
	}
	return l.blob(mediaType, b)
}

// layerFromFile stores the uncompressed tar file path as a gzip layer
// (the default level, as docker and buildah write them).
func (l *ociLayout) layerFromFile(path string) ociLayer {
	f, err := os.Open(path)
	if err != nil {
		l.t.Fatal(err)
	}
	defer f.Close()
	return l.gzipLayer(f)
}

// tarStream writes files as a tar stream (PAX headers, as layers are).
func tarStream(t *testing.T, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := f.hdr
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(f.body))
		}
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// layer writes files as a tar stream and stores it as a gzip layer.
func (l *ociLayout) layer(files []tarFile) ociLayer {
	return l.gzipLayer(bytes.NewReader(tarStream(l.t, files)))
}

func (l *ociLayout) gzipLayer(r io.Reader) ociLayer {
	tmp, err := os.CreateTemp(l.dir, "layer")
	if err != nil {
		l.t.Fatal(err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	diff, blob := sha256.New(), sha256.New()
	zw := gzip.NewWriter(io.MultiWriter(tmp, blob))
	if _, err := io.Copy(zw, io.TeeReader(r, diff)); err != nil {
		l.t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		l.t.Fatal(err)
	}
	st, err := tmp.Stat()
	if err != nil {
		l.t.Fatal(err)
	}
	hexSum := hex.EncodeToString(blob.Sum(nil))
	if err := os.Rename(tmp.Name(), filepath.Join(l.dir, "blobs", "sha256", hexSum)); err != nil {
		l.t.Fatal(err)
	}
	return ociLayer{
		desc:   ociDescriptor{MediaType: mediaTypeLayerGzip, Digest: "sha256:" + hexSum, Size: st.Size()},
		diffID: "sha256:" + hex.EncodeToString(diff.Sum(nil)),
	}
}

// image stores a config and a manifest for linux/arch with layers. The
// manifest has no mediaType field when bare, as umoci and skopeo 1.9
// write OCI manifests (OCI makes it optional; the descriptor says it).
func (l *ociLayout) image(arch string, bare bool, layers ...ociLayer) ociDescriptor {
	var c ociConfig
	c.Architecture, c.OS = arch, "linux"
	c.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	c.RootFS.Type = "layers"
	m := ociManifest{SchemaVersion: 2, MediaType: mediaTypeManifest}
	if bare {
		m.MediaType = ""
	}
	for _, x := range layers {
		c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, x.diffID)
		m.Layers = append(m.Layers, x.desc)
	}
	m.Config = l.json(mediaTypeConfig, c)
	d := l.json(mediaTypeManifest, m)
	d.Platform = &ociPlatform{Architecture: arch, OS: "linux"}
	return d
}

// index stores an image index of images.
func (l *ociLayout) index(images ...ociDescriptor) ociDescriptor {
	return l.json(mediaTypeIndex, ociIndex{SchemaVersion: 2, MediaType: mediaTypeIndex, Manifests: images})
}

func (l *ociLayout) tag(tag string, d ociDescriptor) {
	l.descs[tag] = d
	l.tags = append(l.tags, tag)
}

// write writes index.json, naming each tagged descriptor, and oci-layout.
func (l *ociLayout) write() {
	idx := ociIndex{SchemaVersion: 2, MediaType: mediaTypeIndex}
	for _, tag := range l.tags {
		d := l.descs[tag]
		d.Platform = nil
		d.Annotations = map[string]string{refNameAnnotation: tag}
		idx.Manifests = append(idx.Manifests, d)
	}
	b, err := json.Marshal(idx)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "index.json"), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// ociRead reads an OCI image layout.
type ociRead struct {
	dir   string
	index ociIndex
}

func readOCILayout(t *testing.T, dir string) *ociRead {
	t.Helper()
	r := &ociRead{dir: dir}
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r.index); err != nil {
		t.Fatalf("%s/index.json: %v", dir, err)
	}
	return r
}

// blob reads a blob, checking its digest.
func (r *ociRead) blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	alg, h, _ := strings.Cut(d.Digest, ":")
	b, err := os.ReadFile(filepath.Join(r.dir, "blobs", alg, h))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(b); alg != "sha256" || hex.EncodeToString(sum[:]) != h || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: %d bytes of digest sha256:%x, descriptor says %d", d.Digest, len(b), sum, d.Size)
	}
	return b
}

func (r *ociRead) resolve(t *testing.T, tag string) ociDescriptor {
	t.Helper()
	for _, d := range r.index.Manifests {
		if d.Annotations[refNameAnnotation] == tag {
			return d
		}
	}
	t.Fatalf("%s: no tag %s in index.json", r.dir, tag)
	return ociDescriptor{}
}

// ociImage is one image of a layout, read.
type ociImage struct {
	desc     ociDescriptor
	manifest ociManifest
	config   ociConfig
}

func (r *ociRead) image(t *testing.T, d ociDescriptor) ociImage {
	t.Helper()
	im := ociImage{desc: d}
	if err := json.Unmarshal(r.blob(t, d), &im.manifest); err != nil {
		t.Fatalf("manifest %s: %v", d.Digest, err)
	}
	if err := json.Unmarshal(r.blob(t, im.manifest.Config), &im.config); err != nil {
		t.Fatalf("config %s: %v", im.manifest.Config.Digest, err)
	}
	return im
}

// platforms reads the images of the index d by architecture.
func (r *ociRead) platforms(t *testing.T, d ociDescriptor) map[string]ociImage {
	t.Helper()
	var idx ociIndex
	if err := json.Unmarshal(r.blob(t, d), &idx); err != nil {
		t.Fatalf("index %s: %v", d.Digest, err)
	}
	out := map[string]ociImage{}
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			t.Fatalf("index %s: manifest %s has no platform", d.Digest, m.Digest)
		}
		if m.MediaType != mediaTypeManifest {
			t.Errorf("index %s: the %s image's descriptor has media type %q", d.Digest, m.Platform.Architecture, m.MediaType)
		}
		if _, dup := out[m.Platform.Architecture]; dup {
			t.Fatalf("index %s: two %s images", d.Digest, m.Platform.Architecture)
		}
		out[m.Platform.Architecture] = r.image(t, m)
	}
	return out
}

// addTags names each image of imgs by its architecture in index.json,
// for umoci unpack --image DIR:ARCH.
func (r *ociRead) addTags(imgs map[string]ociImage) error {
	for arch, im := range imgs {
		d := im.desc
		d.Platform = nil
		d.Annotations = map[string]string{refNameAnnotation: arch}
		r.index.Manifests = append(r.index.Manifests, d)
	}
	b, err := json.Marshal(r.index)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.dir, "index.json"), b, 0o644)
}

// checkDiffIDs requires im's layers to be gzip streams whose
// uncompressed digests are its config's diff_ids.
func (r *ociRead) checkDiffIDs(t *testing.T, arch string, im ociImage) {
	t.Helper()
	if len(im.config.RootFS.DiffIDs) != len(im.manifest.Layers) {
		t.Errorf("%s: %d diff_ids for %d layers", arch, len(im.config.RootFS.DiffIDs), len(im.manifest.Layers))
		return
	}
	for i, l := range im.manifest.Layers {
		b := r.blob(t, l)
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: layer %d is not gzip: %v", arch, i+1, err)
			continue
		}
		h := sha256.New()
		if _, err := io.Copy(h, zr); err != nil {
			t.Errorf("%s: layer %d: %v", arch, i+1, err)
			continue
		}
		if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != im.config.RootFS.DiffIDs[i] {
			t.Errorf("%s: layer %d uncompressed is %s, the config's diff_id %s", arch, i+1, got, im.config.RootFS.DiffIDs[i])
		}
	}
}

// layerFiles returns the regular files of a gzip layer by name.
func (r *ociRead) layerFiles(t *testing.T, d ociDescriptor) map[string][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(r.blob(t, d)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
}
