package e2e

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// selfSample is one stack testdata/unwind/selfdump.c captured from its
// SIGALRM handler.
type selfSample struct {
	pc, sp, fp, lr uint64
	maps           string
	stack          []byte
}

func readSelfDump(t *testing.T, b []byte, le binary.ByteOrder) []selfSample {
	t.Helper()
	var out []selfSample
	for len(b) > 0 {
		if len(b) < 48 || string(b[:6]) != "SAMPLE" {
			t.Fatalf("bad sample header")
		}
		s := selfSample{pc: le.Uint64(b[8:]), sp: le.Uint64(b[16:]), fp: le.Uint64(b[24:]), lr: le.Uint64(b[32:])}
		n := le.Uint64(b[40:])
		b = b[48:]
		if uint64(len(b)) < n+8 {
			t.Fatalf("truncated sample")
		}
		s.maps = string(b[:n])
		end := le.Uint64(b[n:])
		b = b[n+8:]
		if end < s.sp || uint64(len(b)) < end-s.sp {
			t.Fatalf("truncated stack")
		}
		s.stack = b[:end-s.sp]
		b = b[end-s.sp:]
		out = append(out, s)
	}
	return out
}

// TestUnwindSelfDump: a program interrupted by a timer in a loop inside an
// -fomit-frame-pointer library (main -> level1 -> with_alloca (alloca,
// PAC-signed return addresses on AArch64) -> lib_mid -> lib_leaf) dumps
// its registers, mappings and stack; the program, the library and libc are
// converted, and each stack is walked with SFrame alone to _start. AArch64
// and s390x run under qemu in single-step mode, so that the timer lands on
// different instructions. On s390x the walk starts with r14 for the
// leaf's return address and finds each caller's SP at the CFA minus 160.
func TestUnwindSelfDump(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("runs x86-64 and AArch64 (qemu) Linux programs")
	}
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata/unwind")
	for _, machine := range []string{"x86_64", "aarch64", "s390x"} {
		t.Run(machine, func(t *testing.T) {
			cc, libdir, run, sysroot := "gcc", "/lib/x86_64-linux-gnu", []string{}, ""
			a, mflags, order := arch.AMD64, []string{}, binary.ByteOrder(binary.LittleEndian)
			if x, ok := crossArchs[machine]; ok {
				cc, sysroot = need(t, x.cc), x.sysroot
				libdir = filepath.Join(sysroot, "lib")
				run = []string{need(t, x.qemu), "-singlestep"}
			} else {
				need(t, "gcc")
			}
			switch machine {
			case "aarch64":
				a, mflags = arch.ARM64, []string{"-mbranch-protection=standard"}
			case "s390x":
				a, order = arch.S390X, binary.BigEndian
			}
			plain, ours := filepath.Join(tmp, machine, "plain"), filepath.Join(tmp, machine, "ours")
			os.MkdirAll(plain, 0o755)
			os.MkdirAll(ours, 0o755)
			build := func(args ...string) {
				if b, err := exec.Command(cc, append(args, mflags...)...).CombinedOutput(); err != nil {
					t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
				}
			}
			build("-O2", "-fomit-frame-pointer", "-fPIC", "-shared", "-Wl,-z,now", "-o", filepath.Join(plain, "libuw.so"), filepath.Join(src, "lib.c"))
			build("-O2", "-Wl,-z,now", "-o", filepath.Join(plain, "selfdump"), filepath.Join(src, "selfdump.c"), "-L"+plain, "-luw")
			libc, err := filepath.EvalSymlinks(filepath.Join(libdir, "libc.so.6"))
			if err != nil {
				t.Skipf("no %s libc.so.6", machine)
			}
			for in, out := range map[string]string{
				filepath.Join(plain, "selfdump"): "selfdump", filepath.Join(plain, "libuw.so"): "libuw.so", libc: "libc.so.6",
			} {
				if b, err := exec.Command(c2s, "-q", "--force", in, "-o", filepath.Join(ours, out)).CombinedOutput(); err != nil {
					t.Fatalf("cfi2sframe %s: %v\n%s", in, err, b)
				}
			}
			dump := filepath.Join(tmp, machine, "dump")
			cmd := exec.Command(filepath.Join(ours, "selfdump"), dump)
			if len(run) > 0 {
				cmd = exec.Command(run[0], append(run[1:], filepath.Join(ours, "selfdump"), dump)...)
			}
			cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+ours, "QEMU_LD_PREFIX="+sysroot)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("selfdump: %v\n%s", err, b)
			}
			raw, err := os.ReadFile(dump)
			if err != nil {
				t.Fatal(err)
			}
			samples := readSelfDump(t, raw, order)
			if len(samples) < 10 {
				t.Fatalf("%d samples", len(samples))
			}
			objs := map[string]*object{}
			pcs := map[uint64]bool{}
			var longest []string
			for _, s := range samples {
				pcs[s.pc] = true
				names, why := walkSelf(t, a, order, &s, objs)
				if len(names) > len(longest) {
					longest = names
				}
				// The timer lands in lib_leaf's loop mostly, but also in
				// lib_mid or a PLT stub between calls.
				want := []string{"with_alloca", "level1", "main", "_start"}
				if names[0] == "lib_leaf" {
					want = append([]string{"lib_leaf", "lib_mid"}, want...)
				}
				if why != unwind.ReasonOutermost || !subsequence(names, want) || names[len(names)-1] != "_start" {
					t.Errorf("pc %#x: walk %v stopped: %v; want %v in order, ending at _start", s.pc, names, why, want)
				}
			}
			t.Logf("%d samples at %d PCs walked to _start; the deepest: %s", len(samples), len(pcs), strings.Join(longest, " <- "))
		})
	}
}

// withUnsized extends a symbolizer to symbols of size 0 (s390x glibc's
// _start has no .size): an address no sized symbol covers takes the name of
// the nearest unsized function symbol at or below it in the same section.
func withUnsized(ef *elf.File, sym func(uint64) string) func(uint64) string {
	syms, _ := ef.Symbols()
	return func(addr uint64) string {
		name := sym(addr)
		if !strings.HasPrefix(name, "(") {
			return name
		}
		best, bestAt := "", uint64(0)
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size != 0 || s.Value > addr || s.Value < bestAt || int(s.Section) >= len(ef.Sections) {
				continue
			}
			if sec := ef.Sections[s.Section]; addr < sec.Addr+sec.Size {
				best, bestAt = s.Name, s.Value
			}
		}
		if best == "" {
			return name
		}
		return best
	}
}

func walkSelf(t *testing.T, a *arch.Arch, order binary.ByteOrder, s *selfSample, objs map[string]*object) ([]string, unwind.Reason) {
	t.Helper()
	var space unwind.Space
	var objOf []*object
	for _, line := range strings.Split(s.maps, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[1], "x") || !strings.HasPrefix(f[5], "/") {
			continue
		}
		lohi := strings.SplitN(f[0], "-", 2)
		lo, _ := strconv.ParseUint(lohi[0], 16, 64)
		hi, _ := strconv.ParseUint(lohi[1], 16, 64)
		off, _ := strconv.ParseUint(f[2], 16, 64)
		o, ok := objs[f[5]]
		if !ok {
			o = &object{}
			objs[f[5]] = o
			if ef, err := elfread.Open(f[5]); err == nil {
				o.elf, o.sym = ef.ELF, withUnsized(ef.ELF, ef.Symbolizer())
				if sec, err := ef.SFrame(); err == nil {
					if o.table, err = sframe.Open(sec.Data, sec.Addr); err != nil {
						t.Errorf("%s: %v", f[5], err)
					}
				}
			}
		}
		if o.elf == nil {
			continue
		}
		for _, p := range o.elf.Progs {
			if p.Type == elf.PT_LOAD && p.Off <= off && off < p.Off+p.Filesz {
				space = append(space, unwind.Mapping{Lo: lo, Hi: hi, Bias: lo - (p.Vaddr + (off - p.Off)), Table: o.table, Obj: len(objOf)})
				objOf = append(objOf, o)
				break
			}
		}
	}
	u := &unwind.Unwinder{Arch: a, Space: &space, Mem: &stackMem{base: s.sp, b: bytes.Clone(s.stack), order: order}}
	fr := unwind.Topmost(a, s.pc, s.sp, s.fp, s.lr)
	var names []string
	for i := 0; i < 64; i++ {
		pc := fr.PC - uint64(btoi(!fr.Top))
		name := "?"
		if m := space.Find(pc); m != nil {
			name = objOf[m.Obj].sym(pc - m.Bias)
		}
		names = append(names, name)
		if why, _ := u.Step(&fr); why != unwind.ReasonOK {
			return names, why
		}
	}
	return names, unwind.ReasonOK
}
