//go:build linux && amd64

package e2e

import (
	"bytes"
	"crypto/md5"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/hostile"
)

// TestHostilePackages converts hostile Debian packages with the real
// binary, as TestHostileImages converts images (4 GiB address space, 60 s,
// the same table): data.tar.xz and control.tar.xz declaring xz
// dictionaries of 1.5, 3 and 4 GiB; bombs of 4 GiB of zeros in gzip, xz,
// zstd and bzip2 data members and in a control member; 4 GiB of zeros
// after the data tar's end. Each must be refused with one line naming the
// package and the member (exit status 1), no crash, peak RSS under 512
// MB, no output, nothing in $TMPDIR. A directory of a bomb, a dictionary
// bomb and a good program converted with -o: the program converted, the
// packages failed, exit status not 0, the run complete. Then SIGTERM
// during the conversion of a large legal package, alone and in a tree.
func TestHostilePackages(t *testing.T) {
	h := newHiHarness(t, "Hostile packages")
	root := t.TempDir()
	for _, c := range hpCases(t) {
		t.Run(c.name, func(t *testing.T) { h.debCase(t, root, c.name, c.member, c.accept, c.build) })
	}
	t.Run("tree", func(t *testing.T) { h.debTree(t, root) })
	t.Run("sigterm", func(t *testing.T) {
		src := filepath.Join(root, "sigterm-src")
		if err := os.MkdirAll(filepath.Join(src, "tree"), 0o755); err != nil {
			t.Fatal(err)
		}
		deb := filepath.Join(src, "big.deb")
		if err := os.WriteFile(deb, hpBigDeb(t), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(deb, filepath.Join(src, "tree", "big.deb")); err != nil {
			t.Fatal(err)
		}
		h.sigterm(t, root, "deb", []string{src}, func(run string) ([]string, string) {
			out := filepath.Join(run, "out.deb")
			return []string{deb, "-o", out}, out
		})
		h.sigterm(t, root, "tree", []string{src}, func(run string) ([]string, string) {
			out := filepath.Join(run, "out")
			return []string{"-o", out, filepath.Join(src, "tree")}, out
		})
	})
}

// hpMember is one member of a package.
type hpMember struct {
	name string
	data []byte
}

// hpDeb is a package: debian-binary, then the members.
func hpDeb(members ...hpMember) []byte {
	b := []byte("!<arch>\n")
	b = append(b, hostile.ArMember("debian-binary", []byte("2.0\n"))...)
	for _, m := range members {
		b = append(b, hostile.ArMember(m.name, m.data)...)
	}
	return b
}

// hpControlFiles are control.tar's files: control, and md5sums naming
// the program.
func hpControlFiles(hello []byte) []tarFile {
	sum := md5.Sum(hello)
	return []tarFile{
		hiFile("./control", 0o644, []byte("Package: hostile\nVersion: 1.0\nArchitecture: amd64\nMaintainer: T <t@example.org>\nDescription: hostile test package\n")),
		hiFile("./md5sums", 0o644, []byte(hex.EncodeToString(sum[:])+"  usr/bin/hello\n"))}
}

// hpControlTar is control.tar.
func hpControlTar(t *testing.T, hello []byte) []byte {
	return tarStream(t, append([]tarFile{hiDir("./")}, hpControlFiles(hello)...))
}

// hpDataFiles are the last files of data.tar: ./usr/bin/hello.
func hpDataFiles(hello []byte) []tarFile {
	return []tarFile{hiDir("./usr/bin/"), hiFile("./usr/bin/hello", 0o755, hello)}
}

// hpDataTar is data.tar: the files extra, then ./usr/bin/hello.
func hpDataTar(t *testing.T, hello []byte, extra ...tarFile) []byte {
	files := append([]tarFile{hiDir("./"), hiDir("./usr/"), hiDir("./usr/share/")}, extra...)
	return tarStream(t, append(files, hpDataFiles(hello)...))
}

// hpXZ is an xz stream (CRC32 check) of data in LZMA2 uncompressed
// chunks, its one block's filter declaring the dictionary size dict:
// (2 | dict&1) << (dict/2 + 11) bytes, 4 GiB - 1 for 40. Nothing is
// compressed: the stream is as fast to write as to read.
func hpXZ(data []byte, dict byte) []byte {
	le := binary.LittleEndian
	crc := func(b []byte) []byte { return le.AppendUint32(nil, crc32.ChecksumIEEE(b)) }
	flags := []byte{0, 0x01} // CRC32
	out := append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, flags...)
	out = append(out, crc(flags)...)
	// Block header: size 12, one filter, LZMA2 (0x21) with one byte of
	// properties, padding, CRC32.
	hdr := []byte{12/4 - 1, 0x00, 0x21, 0x01, dict, 0, 0, 0}
	hdr = append(hdr, crc(hdr)...)
	out = append(out, hdr...)
	var lz []byte
	for i := 0; i < len(data); i += 1 << 16 {
		chunk := data[i:min(len(data), i+1<<16)]
		ctl := byte(2) // uncompressed, no dictionary reset
		if i == 0 {
			ctl = 1 // uncompressed, dictionary reset
		}
		lz = append(lz, ctl, byte((len(chunk)-1)>>8), byte(len(chunk)-1))
		lz = append(lz, chunk...)
	}
	lz = append(lz, 0) // end of LZMA2 data
	unpadded := len(hdr) + len(lz) + 4
	out = append(out, lz...)
	for len(lz)%4 != 0 {
		lz = append(lz, 0)
		out = append(out, 0)
	}
	out = append(out, crc(data)...)
	idx := []byte{0}
	idx = binary.AppendUvarint(idx, 1)
	idx = binary.AppendUvarint(idx, uint64(unpadded))
	idx = binary.AppendUvarint(idx, uint64(len(data)))
	for len(idx)%4 != 0 {
		idx = append(idx, 0)
	}
	idx = append(idx, crc(idx)...)
	out = append(out, idx...)
	foot := append(le.AppendUint32(nil, uint32(len(idx)/4-1)), flags...)
	out = append(out, crc(foot)...)
	out = append(out, foot...)
	return append(out, 'Y', 'Z')
}

// hpDict1M is the dictionary byte of 1 MiB; 37, 39, 40 are 1.5, 3 and 4
// GiB.
const hpDict1M = 16

// hpBzip2 compresses b with the bzip2 program (Go has no bzip2 writer).
func hpBzip2(t *testing.T, b []byte) []byte {
	t.Helper()
	cmd := exec.Command(need(t, "bzip2"), "-9", "-c")
	cmd.Stdin = bytes.NewReader(b)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bzip2: %v", err)
	}
	return out
}

var hpBombOnce struct {
	xz, bz2 sync.Once
	xz8     []byte // an xz stream of 8 MiB of zeros
	bz32    []byte // a bzip2 stream of 32 MiB of zeros
}

// hpBomb is the bomb (the tar header of ./zeros, 4 GiB of zeros) then
// tail, in the compression c: concatenated gzip members, xz streams,
// bzip2 streams, or one zstd frame of RLE blocks.
func hpBomb(t *testing.T, c string, tail []byte) []byte {
	head := hiBombHeader()
	switch c {
	case "gz":
		b := hiGzip(t, head, 0)
		for i := 0; i < hiBombSize/(64<<20); i++ {
			b = append(b, hiGzip64(t)...)
		}
		return append(b, hiGzip(t, tail, 0)...)
	case "zst":
		// The frame's raw blocks can only lead: the tail (the archive's
		// end and what follows) goes in a second frame.
		return append(hiZstd(hiZstdWindow128K, head, hiBombSize), hiZstd(hiZstdWindow128K, tail, 0)...)
	case "xz":
		hpBombOnce.xz.Do(func() {
			var buf bytes.Buffer
			w, err := xz.WriterConfig{DictCap: 1 << 20}.NewWriter(&buf)
			if err != nil {
				panic(err)
			}
			w.Write(make([]byte, 8<<20))
			w.Close()
			hpBombOnce.xz8 = buf.Bytes()
		})
		b := hpXZ(head, hpDict1M)
		for i := 0; i < hiBombSize/(8<<20); i++ {
			b = append(b, hpBombOnce.xz8...)
		}
		return append(b, hpXZ(tail, hpDict1M)...)
	case "bz2":
		hpBombOnce.bz2.Do(func() { hpBombOnce.bz32 = hpBzip2(t, make([]byte, 32<<20)) })
		b := hpBzip2(t, head)
		for i := 0; i < hiBombSize/(32<<20); i++ {
			b = append(b, hpBombOnce.bz32...)
		}
		return append(b, hpBzip2(t, tail)...)
	}
	t.Fatalf("no compression %q", c)
	return nil
}

// hpCompress compresses b as a member of compression c: nothing really
// compressed for xz and zstd (stored chunks, raw blocks).
func hpCompress(t *testing.T, c string, b []byte) []byte {
	switch c {
	case "gz":
		return hiGzip(t, b, 0)
	case "xz":
		return hpXZ(b, hpDict1M)
	case "zst":
		return hiZstd(hiZstdWindow128K, b, 0)
	case "bz2":
		return hpBzip2(t, b)
	}
	t.Fatalf("no compression %q", c)
	return nil
}

type hpCase struct {
	name   string
	member string // the member the message must name
	accept bool
	build  func(t *testing.T, hello []byte) []byte
}

// hpCases are the packages, each built by its case.
func hpCases(t *testing.T) []hpCase {
	var cases []hpCase
	for _, c := range []string{"gz", "xz", "zst", "bz2"} {
		ctl := c
		if c == "bz2" {
			ctl = "xz" // dpkg takes no control.tar.bz2
		}
		cases = append(cases, hpCase{"good-" + c, "", true, func(t *testing.T, hello []byte) []byte {
			return hpDeb(hpMember{"control.tar." + ctl, hpCompress(t, ctl, hpControlTar(t, hello))},
				hpMember{"data.tar." + c, hpCompress(t, c, hpDataTar(t, hello))})
		}})
	}
	for _, d := range []struct {
		label string
		dict  byte
	}{{"1.5GiB", 37}, {"3GiB", 39}, {"4GiB", 40}} {
		cases = append(cases,
			hpCase{"data-xz-dict-" + d.label, "data.tar.xz", false, func(t *testing.T, hello []byte) []byte {
				return hpDeb(hpMember{"control.tar.xz", hpXZ(hpControlTar(t, hello), hpDict1M)}, hpMember{"data.tar.xz", hpXZ(hpDataTar(t, hello), d.dict)})
			}},
			hpCase{"control-xz-dict-" + d.label, "control.tar.xz", false, func(t *testing.T, hello []byte) []byte {
				return hpDeb(hpMember{"control.tar.xz", hpXZ(hpControlTar(t, hello), d.dict)}, hpMember{"data.tar.xz", hpXZ(hpDataTar(t, hello), hpDict1M)})
			}})
	}
	for _, c := range []string{"gz", "xz", "zst", "bz2"} {
		ctl := map[string]string{"bz2": "xz"}[c]
		if ctl == "" {
			ctl = c
		}
		cases = append(cases, hpCase{"data-" + c + "-bomb-4GiB", "data.tar." + c, false, func(t *testing.T, hello []byte) []byte {
			data := hpBomb(t, c, tarStream(t, hpDataFiles(hello))) // the program after the bomb
			return hpDeb(hpMember{"control.tar." + ctl, hpCompress(t, ctl, hpControlTar(t, hello))}, hpMember{"data.tar." + c, data})
		}})
	}
	cases = append(cases,
		hpCase{"control-gz-bomb-4GiB", "control.tar.gz", false, func(t *testing.T, hello []byte) []byte {
			return hpDeb(hpMember{"control.tar.gz", hpBomb(t, "gz", tarStream(t, hpControlFiles(hello)))}, hpMember{"data.tar.gz", hiGzip(t, hpDataTar(t, hello), 0)})
		}},
		hpCase{"data-gz-4GiB-after-tar-end", "data.tar.gz", false, func(t *testing.T, hello []byte) []byte {
			data := hiGzip(t, hpDataTar(t, hello), 0)
			for i := 0; i < hiBombSize/(64<<20); i++ {
				data = append(data, hiGzip64(t)...)
			}
			return hpDeb(hpMember{"control.tar.gz", hiGzip(t, hpControlTar(t, hello), 0)}, hpMember{"data.tar.gz", data})
		}},
	)
	return cases
}

// debCase converts the case's package into OUT.deb and judges the run.
func (h *hiHarness) debCase(t *testing.T, root, name, member string, accept bool, build func(*testing.T, []byte) []byte) {
	c := hiNewCase(t, root, name)
	in := filepath.Join(c.dir, name+".deb")
	if err := os.WriteFile(in, build(t, hiHello(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(c.dir, "out.deb")
	before := hiSnap(t, c.dir, c.tmp, out)
	o := h.exec(hiRun{c: c, args: []string{in, "-o", out}})
	want := hiWant{code: 1, refs: []string{name + ".deb"}, words: []string{member}}
	if accept {
		want = hiWant{code: 0}
	}
	row := h.judge(t, name, o, hiCheck{c: c, dst: out, before: before, want: want})
	if accept && o.code == 0 {
		row.note = hpConverted(t, out)
	}
	h.add(row)
}

// hpConverted says whether the converted package's program has .sframe,
// as dpkg-deb extracts it (when there).
func hpConverted(t *testing.T, deb string) string {
	dpkgDeb, err := exec.LookPath("dpkg-deb")
	if err != nil {
		return ""
	}
	dir := filepath.Join(t.TempDir(), "x")
	if out, err := exec.Command(dpkgDeb, "-x", deb, dir).CombinedOutput(); err != nil {
		t.Errorf("dpkg-deb -x %s: %v\n%s", deb, err, out)
		return "dpkg-deb -x fails"
	}
	f, err := elf.Open(filepath.Join(dir, "usr/bin/hello"))
	if err != nil {
		t.Errorf("the converted package's program: %v", err)
		return ""
	}
	defer f.Close()
	if f.Section(".sframe") == nil {
		t.Errorf("the converted package's program has no .sframe")
		return "not converted"
	}
	return "dpkg-deb -x: usr/bin/hello has .sframe"
}

// debTree converts a directory of a gzip bomb package, an xz dictionary
// bomb package and a good program with -o OUT: the program converted,
// the packages failed (named on stderr), exit status not 0, nothing in
// $TMPDIR, nothing written outside OUT.
func (h *hiHarness) debTree(t *testing.T, root string) {
	const name = "tree/bomb-dict-good"
	c := hiNewCase(t, root, name)
	hello := hiHello(t)
	tree := filepath.Join(c.dir, "tree")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"bomb.deb": hpDeb(hpMember{"control.tar.gz", hiGzip(t, hpControlTar(t, hello), 0)}, hpMember{"data.tar.gz", hpBomb(t, "gz", tarStream(t, hpDataFiles(hello)))}),
		"dict.deb": hpDeb(hpMember{"control.tar.xz", hpXZ(hpControlTar(t, hello), hpDict1M)}, hpMember{"data.tar.xz", hpXZ(hpDataTar(t, hello), 40)}),
		"hello":    hello,
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(tree, n), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(c.dir, "out")
	before := hiSnap(t, c.dir, c.tmp, out)
	o := h.exec(hiRun{c: c, args: []string{"-o", out, tree}})
	row := h.judge(t, name, o, hiCheck{c: c, dst: out, before: before, want: hiWant{code: hiFails}})
	for _, n := range []string{"bomb.deb", "dict.deb"} {
		if !strings.Contains(o.stderr, n) {
			t.Errorf("%s: stderr does not name %s:\n%s", name, n, hostileHead([]byte(o.stderr), 20))
		}
	}
	if f, err := elf.Open(filepath.Join(out, "tree", "hello")); err != nil {
		t.Errorf("%s: the good program: %v", name, err)
	} else {
		if f.Section(".sframe") == nil {
			t.Errorf("%s: the good program was not converted", name)
		}
		f.Close()
	}
	names, _ := hostileNames(out)
	row.note = strings.Join(hostileFiles(names), " ") + " in OUT; stderr: " + strings.Join(strings.Split(strings.TrimSpace(o.stderr), "\n"), " / ")
	h.add(row)
}

// hpBigDeb is a legal package whose data.tar.xz (stored chunks) holds 8
// MB of random text and the program: read fast, compressed again by the
// conversion for seconds.
func hpBigDeb(t *testing.T) []byte {
	hello := hiHello(t)
	text := make([]byte, 8<<20)
	hiText(rand.New(rand.NewPCG(3, 4)), text)
	data := hpDataTar(t, hello, hiDir("./usr/share/big/"), hiFile("./usr/share/big/text", 0o644, text))
	return hpDeb(hpMember{"control.tar.xz", hpXZ(hpControlTar(t, hello), hpDict1M)}, hpMember{"data.tar.xz", hpXZ(data, hpDict1M)})
}
