package deb

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/md5"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/cfi2sframe/cfi2sframe/internal/relobj"
	"github.com/cfi2sframe/cfi2sframe/internal/testing/tartest"
)

func hello(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../testdata/example/hello")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func needDpkgDeb(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		if os.Getenv("CFI2SFRAME_REQUIRE_TOOLCHAIN") == "1" {
			t.Fatal("dpkg-deb not found (CI installs it)")
		}
		t.Skip("dpkg-deb not found")
	}
}

// pkgTree lays out a package tree under dir: the ELF program hello and
// a hard link to it, a shell script, a symbolic link, a conffile, a
// document, and DEBIAN with control, conffiles, postinst and md5sums
// (all files but the conffile, as dh_md5sums lists them). elfs says
// whether the ELF files are there.
func pkgTree(t *testing.T, dir string, elfs bool) {
	t.Helper()
	files := map[string]string{
		"usr/bin/greet":         "#!/bin/sh\necho hi\n",
		"etc/t/t.conf":          "setting = 1\n",
		"usr/share/doc/t/notes": "notes\n",
	}
	if elfs {
		files["usr/bin/hello"] = string(hello(t))
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasPrefix(name, "usr/bin/") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	if elfs {
		if err := os.Link(filepath.Join(dir, "usr/bin/hello"), filepath.Join(dir, "usr/bin/hello-again")); err != nil {
			t.Fatal(err)
		}
		files["usr/bin/hello-again"] = files["usr/bin/hello"]
	}
	if err := os.Symlink("greet", filepath.Join(dir, "usr/bin/hi")); err != nil {
		t.Fatal(err)
	}
	var sums strings.Builder
	for _, name := range []string{"usr/bin/greet", "usr/bin/hello", "usr/bin/hello-again", "usr/share/doc/t/notes"} {
		if data, ok := files[name]; ok {
			s := md5.Sum([]byte(data))
			sums.WriteString(hex.EncodeToString(s[:]) + "  " + name + "\n")
		}
	}
	ctl := filepath.Join(dir, "DEBIAN")
	os.MkdirAll(ctl, 0o755)
	for name, data := range map[string]string{
		"control":   "Package: t\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: test package\n",
		"conffiles": "/etc/t/t.conf\n",
		"postinst":  "#!/bin/sh\nset -e\nexit 0\n",
		"md5sums":   sums.String(),
	} {
		mode := os.FileMode(0o644)
		if name == "postinst" {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(ctl, name), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// buildDeb builds the package tree dir with dpkg-deb, compressed with
// comp (gzip, xz, zstd, none).
func buildDeb(t *testing.T, dir, comp string) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "t.deb")
	cmd := exec.Command("dpkg-deb", "--build", "--root-owner-group", "-Z"+comp, dir, out)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dpkgTar is what dpkg-deb --ctrl-tarfile or --fsys-tarfile (what)
// makes of the package b: its control or data tar, uncompressed by dpkg.
func dpkgTar(t *testing.T, b []byte, what string) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.deb")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command("dpkg-deb", what, p)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("dpkg-deb %s: %v\n%s", what, err, errb.Bytes())
	}
	return out.Bytes()
}

func convertBytes(t *testing.T, in []byte, o Options) (*Result, []byte, error) {
	t.Helper()
	if o.TempDir == "" {
		o.TempDir = t.TempDir()
	}
	res, err := Convert(context.Background(), bytes.NewReader(in), int64(len(in)), o)
	if err != nil {
		return nil, nil, err
	}
	defer res.Close()
	var out bytes.Buffer
	if err := res.Write(&out); err != nil {
		t.Fatal(err)
	}
	return res, out.Bytes(), nil
}

func members(t *testing.T, b []byte) []member {
	t.Helper()
	ms, err := readMembers(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// withoutSize is an ar member header with its size field blanked.
func withoutSize(m member) string {
	h := m.hdr
	copy(h[48:58], "??????????")
	return string(h[:])
}

func TestConvert(t *testing.T) {
	needDpkgDeb(t)
	dir := filepath.Join(t.TempDir(), "pkg")
	pkgTree(t, dir, true)
	for _, comp := range []string{"xz", "gzip", "zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			in := buildDeb(t, dir, comp)
			res, out, err := convertBytes(t, in, Options{Name: "t.deb"})
			if err != nil {
				t.Fatal(err)
			}
			if res.Unchanged() != "" || res.Sums != 2 || res.SFrameBytes() == 0 {
				t.Fatalf("unchanged %q, %d sums updated, %d SFrame bytes", res.Unchanged(), res.Sums, res.SFrameBytes())
			}
			checkConverted(t, in, out, []string{"usr/bin/hello", "usr/bin/hello-again"})
			// Deterministic: the same input gives the same bytes.
			if _, again, err := convertBytes(t, in, Options{Name: "t.deb"}); err != nil || !bytes.Equal(again, out) {
				t.Errorf("a second conversion differs (err %v)", err)
			}
			// Converted again: nothing to do, the same bytes.
			res2, again, err := convertBytes(t, out, Options{Name: "t.deb"})
			if err != nil || res2.Unchanged() == "" || !bytes.Equal(again, out) {
				t.Errorf("converting the output again: err %v, unchanged %q, same %v", err, res2.Unchanged(), bytes.Equal(again, out))
			}
		})
	}
}

// checkConverted checks the converted package out against the package
// in, whose files changed (by md5sums name) were converted.
func checkConverted(t *testing.T, in, out []byte, changed []string) {
	t.Helper()
	// ar: the same members with the same headers but the size; the
	// control member keeps its compression.
	mi, mo := members(t, in), members(t, out)
	if len(mi) != len(mo) {
		t.Fatalf("%d members, want %d", len(mo), len(mi))
	}
	for i := range mi {
		if withoutSize(mi[i]) != withoutSize(mo[i]) {
			t.Errorf("member %d header %q, want %q", i, withoutSize(mo[i]), withoutSize(mi[i]))
		}
	}
	// control.tar: every header and file as it was but the sums of the
	// converted files in md5sums.
	ci, co := tartest.Read(t, dpkgTar(t, in, "--ctrl-tarfile")), tartest.Read(t, dpkgTar(t, out, "--ctrl-tarfile"))
	if diff := cmp.Diff(tartest.Headers(ci), tartest.Headers(co)); diff != "" {
		t.Errorf("control.tar headers (-in +out):\n%s", diff)
	}
	var oldSums, newSums []byte
	for i := range ci {
		if ci[i].Hdr.Name == "./md5sums" {
			oldSums, newSums = ci[i].Data, co[i].Data
		} else if !bytes.Equal(ci[i].Data, co[i].Data) {
			t.Errorf("control file %s changed", ci[i].Hdr.Name)
		}
	}
	// data.tar: every header as it was but the size.
	di, do := tartest.Read(t, dpkgTar(t, in, "--fsys-tarfile")), tartest.Read(t, dpkgTar(t, out, "--fsys-tarfile"))
	if diff := cmp.Diff(tartest.Headers(di), tartest.Headers(do), cmpopts.IgnoreFields(tar.Header{}, "Size")); diff != "" {
		t.Errorf("data.tar headers (-in +out):\n%s", diff)
	}
	content := map[string][]byte{}
	for i, e := range do {
		name := sumName(e.Hdr.Name)
		if e.Hdr.Typeflag == tar.TypeLink {
			content[name] = content[sumName(e.Hdr.Linkname)]
			continue
		}
		content[name] = e.Data
		wantChanged := false
		for _, c := range changed {
			wantChanged = wantChanged || c == name
		}
		if got := !bytes.Equal(e.Data, di[i].Data); got != wantChanged {
			t.Errorf("%s: changed %v, want %v", name, got, wantChanged)
		}
		if wantChanged {
			ef, err := elf.NewFile(bytes.NewReader(e.Data))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if ef.Section(".sframe") == nil {
				t.Errorf("%s: no .sframe", name)
			}
		}
	}
	// md5sums: the same lines but those of the converted files, and
	// every sum that of the file's new content.
	ol, nl := strings.Split(string(oldSums), "\n"), strings.Split(string(newSums), "\n")
	if len(ol) != len(nl) {
		t.Fatalf("md5sums: %d lines, want %d", len(nl), len(ol))
	}
	for i := range nl {
		if nl[i] == "" {
			continue
		}
		sum, name, _ := strings.Cut(nl[i], "  ")
		s := md5.Sum(content[name])
		if sum != hex.EncodeToString(s[:]) {
			t.Errorf("md5sums: %s: %s, the file's sum is %x", name, sum, s)
		}
		isChanged := false
		for _, c := range changed {
			isChanged = isChanged || c == name
		}
		if (nl[i] != ol[i]) != isChanged {
			t.Errorf("md5sums line %q became %q", ol[i], nl[i])
		}
	}
}

func TestNothingToConvert(t *testing.T) {
	needDpkgDeb(t)
	dir := filepath.Join(t.TempDir(), "pkg")
	pkgTree(t, dir, false)
	in := buildDeb(t, dir, "xz")
	res, out, err := convertBytes(t, in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) || res.Unchanged() == "" {
		t.Errorf("unchanged %q; output the same bytes: %v", res.Unchanged(), bytes.Equal(in, out))
	}
	t.Log(res.Unchanged())
}

// TestBzip2 converts a package whose data.tar is bzip2-compressed, which
// is written back bzip2-compressed under its name.
func TestBzip2(t *testing.T) {
	needDpkgDeb(t)
	if _, err := exec.LookPath("bzip2"); err != nil {
		t.Skip("bzip2 not found")
	}
	dir := filepath.Join(t.TempDir(), "pkg")
	pkgTree(t, dir, true)
	plain := buildDeb(t, dir, "none")
	// The same package with data.tar bzip2-compressed.
	var in []byte
	in = append(in, relobj.ArchiveMagic...)
	for _, m := range members(t, plain) {
		data := plain[m.off : m.off+m.size]
		h := m.hdr
		if m.name == "data.tar" {
			cmd := exec.Command("bzip2", "-c")
			cmd.Stdin = bytes.NewReader(data)
			var err error
			if data, err = cmd.Output(); err != nil {
				t.Fatal(err)
			}
			rename(&h, "data.tar.bz2")
		}
		relobj.SetArSize(h[:], int64(len(data)))
		in = append(append(in, h[:]...), data...)
		if len(data)%2 == 1 {
			in = append(in, '\n')
		}
	}
	res, out, err := convertBytes(t, in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Member != "data.tar.bz2" || !res.Stats.Changed() {
		t.Errorf("data member %s, changed %v", res.Member, res.Stats.Changed())
	}
	mo := members(t, out)
	if len(mo) != 3 || mo[2].name != "data.tar.bz2" || !bytes.HasPrefix(out[mo[2].off:], []byte("BZh9")) {
		var names []string
		for _, m := range mo {
			names = append(names, m.name)
		}
		t.Fatalf("members %q: want the third data.tar.bz2, bzip2-compressed with 900 kB blocks", names)
	}
	// dpkg reads both, and they hold the same but the converted files.
	di, do := tartest.Read(t, dpkgTar(t, in, "--fsys-tarfile")), tartest.Read(t, dpkgTar(t, out, "--fsys-tarfile"))
	if diff := cmp.Diff(tartest.Headers(di), tartest.Headers(do), cmpopts.IgnoreFields(tar.Header{}, "Size")); diff != "" {
		t.Errorf("data.tar headers (-in +out):\n%s", diff)
	}
	// The bzip2 tool reads the new member to its end.
	cmd := exec.Command("bzip2", "-t")
	cmd.Stdin = bytes.NewReader(out[mo[2].off : mo[2].off+mo[2].size])
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("bzip2 -t: %v: %s", err, msg)
	}
}

// rename gives the member header h the name name, keeping the
// terminator ('/' or none) of the name it had.
func rename(h *[relobj.ArHeaderSize]byte, name string) {
	if strings.HasSuffix(strings.TrimRight(string(h[:16]), " "), "/") {
		name += "/"
	}
	copy(h[:16], fmt.Sprintf("%-16s", name))
}

// TestFileError: a file of data.tar that cannot be converted fails the
// package, with an error naming the package, the member and the file.
func TestFileError(t *testing.T) {
	needDpkgDeb(t)
	dir := filepath.Join(t.TempDir(), "pkg")
	pkgTree(t, dir, true)
	// A header whose sections lie past the end.
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/bad"), hello(t)[:200], 0o755); err != nil {
		t.Fatal(err)
	}
	in := buildDeb(t, dir, "xz")
	_, _, err := convertBytes(t, in, Options{Name: "t.deb"})
	var de *Error
	if !errors.As(err, &de) || de.Member != "data.tar.xz" || !strings.HasPrefix(err.Error(), "t.deb: data.tar.xz: ./usr/bin/bad: ") {
		t.Fatalf("want an error naming t.deb, data.tar.xz and ./usr/bin/bad, got %v", err)
	}
	t.Log(err)
}

// TestBadPackages: broken packages are errors naming the package, never
// panics or partial results.
func TestBadPackages(t *testing.T) {
	needDpkgDeb(t)
	dir := filepath.Join(t.TempDir(), "pkg")
	pkgTree(t, dir, true)
	good := buildDeb(t, dir, "xz")
	ms := members(t, good)
	data := ms[2]
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	setName := func(b []byte, m member, name string) []byte {
		copy(b[m.off-60:m.off-44], []byte(name+strings.Repeat(" ", 16-len(name))))
		return b
	}
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"empty":            {nil, "not an ar archive"},
		"magic only":       {[]byte(relobj.ArchiveMagic), "debian-binary is not the first member"},
		"truncated header": {good[:data.off-30], "truncated member header"},
		"truncated data":   {good[:data.off+data.size/2], "bad member size"},
		"lying size": {edit(func(b []byte) []byte {
			relobj.SetArSize(b[data.off-60:data.off], data.size+1000)
			return b
		}), "bad member size"},
		"unknown compression": {edit(func(b []byte) []byte { return setName(b, data, "data.tar.lz4") }), "data.tar.lz4: unknown compression"},
		"no data.tar":         {edit(func(b []byte) []byte { return setName(b, data, "other") }), "no data.tar member"},
		"data first": {edit(func(b []byte) []byte {
			return setName(setName(b, ms[1], "data.tar.xz"), data, "control.tar.xz")
		}), "before the control member"},
		"format 3": {edit(func(b []byte) []byte { b[ms[0].off] = '3'; return b }), "not 2.x"},
		"corrupt data": {edit(func(b []byte) []byte {
			for i := data.off + data.size/2; i < data.off+data.size/2+64; i++ {
				b[i] ^= 0x55
			}
			return b
		}), "t.deb: data.tar.xz: "},
		"bad compressed control": {edit(func(b []byte) []byte {
			copy(b[ms[1].off:], "junk")
			return b
		}), "t.deb: control.tar.xz: "},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			res, _, err := convertBytes(t, c.in, Options{Name: "t.deb"})
			var de *Error
			if err == nil || !errors.As(err, &de) || !strings.HasPrefix(err.Error(), "t.deb: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error saying %q, got %v (result %+v)", c.want, err, res)
			}
			t.Log(err)
		})
	}
}

func TestPatchSums(t *testing.T) {
	a, b := md5.Sum([]byte("a")), md5.Sum([]byte("b"))
	old := "00000000000000000000000000000000  usr/bin/a\n" +
		"00000000000000000000000000000000 *./usr/bin/b\n" +
		"not a line\n" +
		"00000000000000000000000000000000  usr/bin/c\n" +
		"0000000000000000000000000000000g  usr/bin/a\n" +
		"00000000000000000000000000000000  usr/bin/a"
	got, n := patchSums([]byte(old), map[string][16]byte{"usr/bin/a": a, "usr/bin/b": b})
	want := hex.EncodeToString(a[:]) + "  usr/bin/a\n" +
		hex.EncodeToString(b[:]) + " *./usr/bin/b\n" +
		"not a line\n" +
		"00000000000000000000000000000000  usr/bin/c\n" +
		"0000000000000000000000000000000g  usr/bin/a\n" +
		hex.EncodeToString(a[:]) + "  usr/bin/a"
	if string(got) != want || n != 3 {
		t.Errorf("%d changed:\n%s\nwant 3:\n%s", n, got, want)
	}
}
