package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/arch"
	"github.com/cfi2sframe/cfi2sframe/internal/elfread"
	"github.com/cfi2sframe/cfi2sframe/sframe"
	"github.com/cfi2sframe/cfi2sframe/unwind"
)

// sample is one stop of a program under gdb (testdata/unwind/dump.py).
type sample struct {
	Tag  string            `json:"tag"`
	Regs map[string]uint64 `json:"regs"`
	Maps []struct {
		Start, End, Offset uint64
		Perms, Path        string
	} `json:"maps"`
	Stack uint64   `json:"stack"`
	Mem   string   `json:"mem"`
	GDB   []uint64 `json:"gdb"`
}

type stackMem struct {
	base  uint64
	b     []byte
	order binary.ByteOrder // nil: little-endian
}

func (m *stackMem) ReadWord(addr uint64) (uint64, bool) {
	if addr < m.base || addr-m.base > uint64(len(m.b)) || uint64(len(m.b))-(addr-m.base) < 8 {
		return 0, false
	}
	if m.order != nil {
		return m.order.Uint64(m.b[addr-m.base:]), true
	}
	return binary.LittleEndian.Uint64(m.b[addr-m.base:]), true
}

// object is one mapped ELF file: its SFrame table and symbols.
type object struct {
	table *sframe.Table
	sym   func(uint64) string
	elf   *elf.File
}

var amd64DWARF = map[string]uint32{"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
	"r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15}

// TestUnwindRealStacks builds a program and an -fomit-frame-pointer
// library, converts them and libc, runs the program under gdb with the
// converted libc, stops at every instruction from the program's PLT stub
// into the library (PLT, prologues, the library's own PLT, a loop) and in a
// signal handler, and walks each captured stack with SFrame alone: every
// walk must reach _start through the expected functions.
func TestUnwindRealStacks(t *testing.T) {
	if runtime.GOARCH != "amd64" || runtime.GOOS != "linux" {
		t.Skip("runs x86-64 Linux programs under gdb")
	}
	gdb := need(t, "gdb")
	need(t, "gcc")
	tmp := t.TempDir()
	c2s := buildCommand(t, tmp)
	src, _ := filepath.Abs("testdata/unwind")
	plain, ours := filepath.Join(tmp, "plain"), filepath.Join(tmp, "ours")
	os.MkdirAll(plain, 0o755)
	os.MkdirAll(ours, 0o755)
	gcc := func(args ...string) {
		if b, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	gcc("-O2", "-fomit-frame-pointer", "-fPIC", "-shared", "-Wl,-z,now", "-o", filepath.Join(plain, "libuw.so"), filepath.Join(src, "lib.c"))
	gcc("-O2", "-Wl,-z,now", "-o", filepath.Join(plain, "prog"), filepath.Join(src, "prog.c"), "-L"+plain, "-luw")
	libc, err := filepath.EvalSymlinks("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip("no x86-64 libc.so.6")
	}
	for in, out := range map[string]string{
		filepath.Join(plain, "prog"): "prog", filepath.Join(plain, "libuw.so"): "libuw.so", libc: "libc.so.6",
	} {
		if b, err := exec.Command(c2s, "-q", "--force", in, "-o", filepath.Join(ours, out)).CombinedOutput(); err != nil {
			t.Fatalf("cfi2sframe %s: %v\n%s", in, err, b)
		}
	}
	dump := filepath.Join(tmp, "dump.jsonl")
	cmd := exec.Command(gdb, "-batch", "-nx",
		"-ex", "source "+filepath.Join(src, "dump.py"),
		"-ex", "set pagination off",
		"-ex", "set backtrace past-main on", "-ex", "set backtrace past-entry on",
		"-ex", "handle SIGUSR1 nostop noprint pass",
		"-ex", "break 'lib_mid@plt'", "-ex", "run", "-ex", `python steps("plt", 60)`,
		"-ex", "delete", "-ex", "break handler", "-ex", "continue", "-ex", `python steps("sig", 16)`,
		"-ex", "kill", filepath.Join(ours, "prog"))
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+ours, "UNWIND_DUMP="+dump)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gdb: %v\n%s", err, b)
	}
	f, err := os.Open(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	openObj := objectOpener(t)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	n := 0
	for sc.Scan() {
		var s sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		n++
		names, pcs, why := walkSample(t, &s, openObj)
		if !equalPCs(pcs, s.GDB) {
			t.Errorf("%s: SFrame walk %#x, gdb's backtrace %#x", s.Tag, pcs, s.GDB)
		}
		want := []string{"with_alloca", "level1", "main", "_start"}
		if strings.HasPrefix(s.Tag, "sig") {
			want = []string{"handler", "<signal>", "level1", "main", "_start"}
		}
		if why != unwind.ReasonOutermost || !subsequence(names, want) || names[len(names)-1] != "_start" {
			t.Errorf("%s (pc %#x): walk %v stopped: %v; want %v in order, ending at _start", s.Tag, s.Regs["rip"], names, why, want)
		} else if testing.Verbose() && (s.Tag == "plt+0" || s.Tag == "sig+0") {
			t.Logf("%s: %v", s.Tag, names)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 76 {
		t.Errorf("%d samples, want 76", n)
	}
}

// objectOpener returns a function that opens an ELF file once, with its
// SFrame table and symbols (no table or ELF if it has none or is not
// one).
func objectOpener(t *testing.T) func(string) *object {
	objs := map[string]*object{}
	return func(path string) *object {
		if o, ok := objs[path]; ok {
			return o
		}
		o := &object{}
		objs[path] = o
		ef, err := elfread.Open(path)
		if err != nil {
			return o
		}
		o.elf, o.sym = ef.ELF, ef.Symbolizer()
		if s, err := ef.SFrame(); err == nil {
			if o.table, err = sframe.Open(s.Data, s.Addr); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}
		return o
	}
}

func equalPCs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func walkSample(t *testing.T, s *sample, openObj func(string) *object) ([]string, []uint64, unwind.Reason) {
	t.Helper()
	u, fr, objOf := sampleUnwinder(t, s, openObj)
	space := *u.Space
	var names []string
	var pcs []uint64
	for i := 0; i < 64; i++ {
		pcs = append(pcs, fr.PC)
		m := space.Find(fr.PC - uint64(btoi(!fr.Top)))
		name := "?"
		if m != nil {
			name = objOf[m.Obj].sym(fr.PC - uint64(btoi(!fr.Top)) - m.Bias)
		}
		why, _ := u.Step(&fr)
		names = append(names, name)
		if why != unwind.ReasonOK {
			return names, pcs, why
		}
		if fr.Top {
			names = append(names, "<signal>")
		}
	}
	return names, pcs, unwind.ReasonOK
}

// sampleUnwinder returns an x86-64 Unwinder over the executable mappings
// and the stack of s, the topmost frame with s's registers, and the
// object of each mapping of the Space (by its Obj).
func sampleUnwinder(t *testing.T, s *sample, openObj func(string) *object) (*unwind.Unwinder, unwind.Frame, []*object) {
	t.Helper()
	var space unwind.Space
	var objOf []*object
	for _, m := range s.Maps {
		if !strings.Contains(m.Perms, "x") || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		o := openObj(m.Path)
		if o.elf == nil {
			continue
		}
		// Bias: the mapping's start minus the address its file offset has
		// in the PT_LOAD that holds it.
		var bias uint64
		found := false
		for _, p := range o.elf.Progs {
			if p.Type == elf.PT_LOAD && p.Off <= m.Offset && m.Offset < p.Off+p.Filesz {
				bias = m.Start - (p.Vaddr + (m.Offset - p.Off))
				found = true
				break
			}
		}
		if !found {
			continue
		}
		space = append(space, unwind.Mapping{Lo: m.Start, Hi: m.End, Bias: bias, Table: o.table, Obj: len(objOf)})
		objOf = append(objOf, o)
	}
	b, err := hex.DecodeString(s.Mem)
	if err != nil {
		t.Fatal(err)
	}
	u := &unwind.Unwinder{Arch: arch.AMD64, Space: &space, Mem: &stackMem{base: s.Stack, b: b}}
	fr := unwind.Frame{PC: s.Regs["rip"], Top: true}
	for name, r := range amd64DWARF {
		fr.SetReg(r, s.Regs[name])
	}
	return u, fr, objOf
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// subsequence says whether want appears in names in order.
func subsequence(names, want []string) bool {
	i := 0
	for _, n := range names {
		if i < len(want) && n == want[i] {
			i++
		}
	}
	return i == len(want)
}
