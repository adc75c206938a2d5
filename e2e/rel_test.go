package e2e

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// TestRelocatableObjects compiles objects with and without as --gsframe,
// converts the plain ones, and expects what gas produced: the same
// objdump --sframe text, the same .sframe bytes and .rela.sframe entries;
// then links both sets with GNU ld and compares the final .sframe at every
// PC and runs the program.
func TestRelocatableObjects(t *testing.T) {
	objdump := toolchain.Tool(t, "sid", "x86_64-objdump")
	readelf := toolchain.Tool(t, "sid", "x86_64-readelf")
	objcopies := map[string]string{"x86_64": toolchain.Tool(t, "sid", "x86_64-objcopy"), "aarch64": toolchain.Tool(t, "sid", "aarch64-objcopy"), "s390x": toolchain.Tool(t, "sid", "s390x-objcopy")}
	root := filepath.Dir(filepath.Dir(objdump))
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata")
	type build struct {
		name, arch string
		flags      []string
		srcs       []string
		cxx        bool
	}
	builds := []build{
		{"O2", "x86_64", []string{"-O2"}, []string{"prog.c", "lib.c"}, false},
		{"O0-ffs", "x86_64", []string{"-O0", "-ffunction-sections"}, []string{"prog.c", "lib.c"}, false},
		{"O2-drap", "x86_64", []string{"-O2", "-mstackrealign"}, []string{"prog.c", "lib.c"}, false},
		{"cxx-comdat", "x86_64", []string{"-O1"}, []string{"exc.cc"}, true},
		{"O2-pac", "aarch64", []string{"-O2", "-mbranch-protection=standard"}, []string{"prog.c", "lib.c"}, false},
		{"O2-bkey-cxx", "aarch64", []string{"-O2", "-mbranch-protection=pac-ret+b-key"}, []string{"exc.cc"}, true},
		// s390x: FP and RA in FPRs (flexible FDEs), R_390_PC64, gas's
		// section padding; one section per function.
		{"O2-fp", "s390x", []string{"-O2", "-fno-omit-frame-pointer"}, []string{"prog.c", "lib.c"}, false},
		{"O0-ffs", "s390x", []string{"-O0", "-ffunction-sections"}, []string{"prog.c", "lib.c"}, false},
		{"cxx-O2", "s390x", []string{"-O2"}, []string{"exc.cc"}, true},
	}
	objs, pcs := 0, 0
	for _, b := range builds {
		t.Run(b.arch+"/"+b.name, func(t *testing.T) {
			cc, qemu, sysroot := "gcc", "", ""
			if b.cxx {
				cc = "g++"
			}
			if x, ok := crossArchs[b.arch]; ok {
				cc, qemu, sysroot = need(t, x.cc), need(t, x.qemu), x.sysroot
				if b.cxx {
					cc = need(t, x.cxx)
				}
			}
			dir := filepath.Join(tmp, b.arch+"-"+b.name)
			objcopy := objcopies[b.arch]
			var gnuObjs, oursObjs []string
			for _, s := range b.srcs {
				base := strings.TrimSuffix(s, filepath.Ext(s))
				compile := func(out string, extra ...string) {
					args := append(append([]string{"-B" + filepath.Join(root, "gcc-"+b.arch) + "/", "-c", "-o", out, filepath.Join(src, s)}, b.flags...), extra...)
					if o, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
						t.Fatalf("%s: %v\n%s", cc, err, o)
					}
				}
				os.MkdirAll(dir, 0o755)
				gnu := filepath.Join(dir, base+".gnu.o")
				plain := filepath.Join(dir, base+".plain.o")
				ours := filepath.Join(dir, base+".ours.o")
				compile(gnu, "-Wa,--gsframe")
				compile(plain)
				if o, err := exec.Command(c2s, "-q", plain, "-o", ours).CombinedOutput(); err != nil {
					t.Fatalf("cfi2sframe: %v\n%s", err, o)
				}
				objs++
				// objdump text (after the file-name line), section bytes,
				// relocation entries.
				dump := func(f string) string {
					o, err := exec.Command(objdump, "--sframe", f).CombinedOutput()
					if err != nil {
						t.Fatalf("objdump %s: %v\n%s", f, err, o)
					}
					return string(o[bytes.Index(o, []byte("Contents of")):])
				}
				if g, o := dump(gnu), dump(ours); g != o {
					t.Errorf("%s: objdump --sframe differs:\nGNU:\n%s\nours:\n%s", s, g, o)
				}
				sec := func(f string) []byte {
					o, err := exec.Command(objcopy, "-O", "binary", "--only-section=.sframe", f, "/dev/stdout").Output()
					if err != nil {
						t.Fatalf("objcopy %s: %v", f, err)
					}
					return o
				}
				if !bytes.Equal(sec(gnu), sec(ours)) {
					t.Errorf("%s: .sframe bytes differ", s)
				}
				if g, o := relaSFrame(readelf, gnu), relaSFrame(readelf, ours); g != o || g == "" {
					t.Errorf("%s: .rela.sframe differs:\nGNU:%s\nours:%s", s, g, o)
				}
				gnuObjs = append(gnuObjs, gnu)
				oursObjs = append(oursObjs, ours)
			}
			// Link both sets with GNU ld; the merged sections must agree.
			link := func(out string, objs []string) string {
				p := filepath.Join(dir, out)
				args := append([]string{"-B" + filepath.Join(root, "gcc-"+b.arch) + "/", "-o", p}, objs...)
				if o, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
					t.Fatalf("link: %v\n%s", err, o)
				}
				return p
			}
			g, o := link("prog.gnu", gnuObjs), link("prog.ours", oursObjs)
			// ld merges the objects' sections into the same .sframe.
			if gs, os := sframeBytes(t, readFile(t, g)), sframeBytes(t, readFile(t, o)); !bytes.Equal(gs, os) {
				t.Errorf("linked .sframe differs from GNU's (%d and %d bytes)", len(gs), len(os))
			}
			c := compare(t, g, o)
			pcs += c.PCs
			t.Logf("linked: %s", c)
			if c.Differ > 0 || c.Missing > 0 {
				t.Errorf("linked program: %v", c.Examples)
			}
			var outs [2]string
			for i, p := range []string{g, o} {
				var s string
				var err error
				if qemu != "" {
					s, err = run(t, nil, qemu, "-L", sysroot, p)
				} else {
					s, err = run(t, nil, p)
				}
				if err != nil {
					t.Fatalf("run %s: %v\n%s", p, err, s)
				}
				outs[i] = s
			}
			if outs[0] != outs[1] {
				t.Errorf("outputs differ: %q vs %q", outs[0], outs[1])
			}
		})
	}
	t.Logf("%d objects converted like gas; %d PCs of the linked programs compared", objs, pcs)
}

// TestRelocatableBigEndianAndV2 covers objects assembled by GNU as -EB
// (AArch64 big-endian; the cross gcc only compiles to assembly) and SFrame
// V2 objects as trixie's as (binutils 2.44) writes them: the same bytes and
// relocations as gas.
func TestRelocatableBigEndianAndV2(t *testing.T) {
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata")
	type job struct {
		name     string
		srcs     []string // in testdata
		compile  []string // compiler and flags for -S
		as       string
		asFlags  []string
		c2sFlags []string
		readelf  string
	}
	gcc := need(t, "gcc")
	a64 := need(t, "aarch64-linux-gnu-gcc")
	jobs := []job{
		{"aarch64be-pac", []string{"../../testdata/sframe/src/common.c", "../../testdata/sframe/src/lib.c"}, []string{a64, "-mbig-endian", "-O2", "-mbranch-protection=pac-ret+b-key", "-S"}, toolchain.Tool(t, "sid", "aarch64-as"), []string{"-EB"}, nil,
			toolchain.Tool(t, "sid", "aarch64-readelf")},
		{"x86_64-v2", []string{"prog.c", "lib.c"}, []string{gcc, "-O2", "-S"}, toolchain.Tool(t, "trixie", "x86_64-as"), nil, []string{"--sframe-version", "2"},
			toolchain.Tool(t, "sid", "x86_64-readelf")},
		{"aarch64-v2", []string{"prog.c", "lib.c"}, []string{a64, "-O2", "-mbranch-protection=standard", "-S"}, toolchain.Tool(t, "trixie", "aarch64-as"), nil, []string{"--sframe-version", "2"},
			toolchain.Tool(t, "sid", "aarch64-readelf")},
	}
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			for _, s := range j.srcs {
				asm := filepath.Join(tmp, j.name+"-"+filepath.Base(s)+".s")
				if o, err := exec.Command(j.compile[0], append(j.compile[1:], "-o", asm, filepath.Join(src, s))...).CombinedOutput(); err != nil {
					t.Fatalf("compile: %v\n%s", err, o)
				}
				gnu, plain, ours := asm+".gnu.o", asm+".plain.o", asm+".ours.o"
				for _, x := range []struct {
					out   string
					extra []string
				}{{gnu, []string{"--gsframe"}}, {plain, nil}} {
					args := append(append(append([]string{}, j.asFlags...), x.extra...), "-o", x.out, asm)
					if o, err := exec.Command(j.as, args...).CombinedOutput(); err != nil {
						t.Fatalf("as: %v\n%s", err, o)
					}
				}
				if o, err := exec.Command(c2s, append([]string{"-q", plain, "-o", ours}, j.c2sFlags...)...).CombinedOutput(); err != nil {
					t.Fatalf("cfi2sframe: %v\n%s", err, o)
				}
				sec := func(f string) []byte {
					// Raw bytes (trixie's as makes .sframe SHT_PROGBITS,
					// which objcopy -O binary does not extract from a .o).
					ef, err := elf.Open(f)
					if err != nil {
						t.Fatal(err)
					}
					defer ef.Close()
					s := ef.Section(".sframe")
					if s == nil {
						t.Fatalf("%s: no .sframe", f)
					}
					b, _ := s.Data()
					return b
				}
				if g, o := sec(gnu), sec(ours); !bytes.Equal(g, o) || len(g) < 28 {
					t.Errorf("%s: .sframe bytes differ (%d vs %d bytes)", s, len(g), len(o))
				}
				if g, o := relaSFrame(j.readelf, gnu), relaSFrame(j.readelf, ours); g != o || g == "" {
					t.Errorf("%s: relocations differ:\nGNU:%s\nours:%s", s, g, o)
				}
			}
		})
	}
}

// TestArchive converts a static archive (an object with a long name, a
// non-ELF member, the GNU symbol index) and links a program against it,
// for x86-64 and for s390x (big-endian members; run under qemu).
func TestArchive(t *testing.T) {
	objdump := toolchain.Tool(t, "sid", "x86_64-objdump")
	root := filepath.Dir(filepath.Dir(objdump))
	c2s := buildCommand(t, t.TempDir())
	src, _ := filepath.Abs("testdata")
	for _, arch := range []string{"x86_64", "s390x"} {
		t.Run(arch, func(t *testing.T) {
			cc, ar, nm, qemu := "gcc", "ar", "nm", []string(nil)
			if x, ok := crossArchs[arch]; ok {
				prefix := strings.TrimSuffix(x.cc, "gcc")
				cc, ar, nm = x.cc, prefix+"ar", prefix+"nm"
				qemu = []string{need(t, x.qemu), "-L", x.sysroot}
			}
			need(t, cc)
			need(t, ar)
			need(t, nm)
			tmp := t.TempDir()
			B := "-B" + filepath.Join(root, "gcc-"+arch) + "/"
			sh := func(name string, args ...string) string {
				cmd := exec.Command(name, args...)
				cmd.Dir = tmp
				o, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s %v: %v\n%s", name, args, err, o)
				}
				return string(o)
			}
			long := "a_member_name_longer_than_sixteen_characters.o"
			sh(cc, B, "-O2", "-c", filepath.Join(src, "lib.c"), "-o", long)
			os.WriteFile(filepath.Join(tmp, "README.txt"), []byte("not an object\n"), 0o644)
			sh(ar, "rcs", "libx.a", long, "README.txt")
			sh(c2s, "libx.a", "-o", "libx.sframe.a")
			if got := sh(ar, "t", "libx.sframe.a"); got != long+"\nREADME.txt\n" {
				t.Errorf("members: %q", got)
			}
			if a, b := sh(nm, "-s", "libx.a"), sh(nm, "-s", "libx.sframe.a"); !strings.Contains(b, "lib_apply in "+long) || a != b {
				t.Errorf("archive index changed:\n%s\n---\n%s", a, b)
			}
			// objdump complains about README.txt (not an object) and goes on.
			if o, _ := exec.Command(objdump, "--sframe", filepath.Join(tmp, "libx.sframe.a")).CombinedOutput(); !strings.Contains(string(o), "Num FDEs: 2") {
				t.Errorf("objdump of the archive:\n%s", o)
			}
			sh(cc, B, "-O2", "-c", filepath.Join(src, "prog.c"), "-o", "prog.o")
			sh(c2s, "-q", "prog.o", "-o", "prog.sframe.o")
			sh(cc, B, "-o", "prog", "prog.sframe.o", "libx.sframe.a")
			if o := sh(append(qemu, filepath.Join(tmp, "prog"))[0], append(qemu, filepath.Join(tmp, "prog"))[1:]...); !strings.Contains(o, "lib 45 285") {
				t.Errorf("program output %q", o)
			}
			f, err := elf.Open(filepath.Join(tmp, "prog"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Section(".sframe") == nil {
				t.Error("the linked program has no .sframe")
			}
		})
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// relaSFrame returns the entries readelf -rW prints for .rela.sframe (the
// header line, which gives the section's file offset, left out), or "".
func relaSFrame(readelf, file string) string {
	o, _ := exec.Command(readelf, "-rW", file).Output()
	i := bytes.Index(o, []byte("'.rela.sframe'"))
	if i < 0 {
		return ""
	}
	o = o[i+bytes.IndexByte(o[i:], '\n'):]
	if k := bytes.Index(o, []byte("\n\n")); k >= 0 {
		o = o[:k]
	}
	return string(o)
}
