package judge

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// The programs the tests judge chains of: e2e/testdata/kernel's five C
// programs, built as scripts/kernel-acceptance.sh builds them (static, -O2
// -fomit-frame-pointer; plt also -fno-builtin) with the host's gcc, in
// the variants it runs: .plain, .ours and .for-kernel (cfi2sframe's
// outputs) and .gnu (GNU as --gsframe, when the reference toolchain is
// installed); and its Go program, goprog, built as the script builds it
// (CGO_ENABLED=0, -ldflags='-s -w': .plain, and cfi2sframe --for kernel's
// .for-kernel) and once more without -s -w (.sym: its symbols and DWARF
// for nm and gdb); and its dynamically linked program, dyn (PIE, -O2
// -fomit-frame-pointer: .plain) with its library (dynlib/libchain.so).
// Built once per test binary.
var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	gnuBuilt  bool
)

var kernelProgs = []string{"chain", "drap", "signal", "plt", "noreturn"}

// goVariants are the variants of goprog the harness runs.
var goVariants = []string{"plain", "for-kernel"}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range []string{buildDir, glibcDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

// skip skips t for a missing tool, or fails it where the tests must run
// (CFI2SFRAME_REQUIRE_TOOLCHAIN=1, as in CI).
func skip(t *testing.T, why string) {
	t.Helper()
	if toolchain.Required() {
		t.Fatal(why)
	}
	t.Skip(why)
}

func skipf(t *testing.T, format string, args ...any) {
	t.Helper()
	skip(t, fmt.Sprintf(format, args...))
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// runGo runs the go command with CGO_ENABLED=0, as the harness builds
// goprog.
func runGo(args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// programs returns the directory of the built programs, or skips t when
// there is no gcc able to link statically.
func programs(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		skip(t, "no gcc")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "judge-test")
		if buildErr != nil {
			return
		}
		c2s := filepath.Join(buildDir, "cfi2sframe")
		if buildErr = run("go", "build", "-o", c2s, "../../../cmd/cfi2sframe"); buildErr != nil {
			return
		}
		gnuAs, gnu := toolchain.Path("sid", "x86_64-as")
		gnuBuilt = gnu
		src := filepath.Join("..", "..", "..", "e2e", "testdata", "kernel")
		for _, p := range kernelProgs {
			args := []string{"-static", "-O2", "-fomit-frame-pointer"}
			if p == "plt" {
				args = append(args, "-fno-builtin")
			}
			plain := filepath.Join(buildDir, p+".plain")
			if buildErr = run("gcc", append(args, "-o", plain, filepath.Join(src, p+".c"))...); buildErr != nil {
				return
			}
			if gnu {
				b := filepath.Join(filepath.Dir(filepath.Dir(gnuAs)), "gcc-x86_64") + "/"
				if buildErr = run("gcc", append(args, "-B"+b, "-Wa,--gsframe", "-o", filepath.Join(buildDir, p+".gnu"), filepath.Join(src, p+".c"))...); buildErr != nil {
					return
				}
			}
			if buildErr = run(c2s, "-q", plain, "-o", filepath.Join(buildDir, p+".ours")); buildErr != nil {
				return
			}
			if buildErr = run(c2s, "-q", "--for", "kernel", plain, "-o", filepath.Join(buildDir, p+".for-kernel")); buildErr != nil {
				return
			}
		}
		goSrc := filepath.Join(src, "goprog.go")
		plain := filepath.Join(buildDir, "goprog.plain")
		if buildErr = runGo("build", "-ldflags=-s -w", "-o", plain, goSrc); buildErr != nil {
			return
		}
		if buildErr = runGo("build", "-o", filepath.Join(buildDir, "goprog.sym"), goSrc); buildErr != nil {
			return
		}
		if buildErr = run(c2s, "-q", "--for", "kernel", plain, "-o", filepath.Join(buildDir, "goprog.for-kernel")); buildErr != nil {
			return
		}
		dl := filepath.Join(buildDir, "dynlib")
		if buildErr = os.MkdirAll(dl, 0o755); buildErr != nil {
			return
		}
		if buildErr = run("gcc", "-O2", "-fomit-frame-pointer", "-fPIC", "-shared", "-o", filepath.Join(dl, "libchain.so"), filepath.Join(src, "libchain.c")); buildErr != nil {
			return
		}
		buildErr = run("gcc", "-O2", "-fomit-frame-pointer", "-o", filepath.Join(buildDir, "dyn.plain"), filepath.Join(src, "dyn.c"), "-L"+dl, "-lchain")
	})
	if buildErr != nil {
		if strings.Contains(buildErr.Error(), "cannot find -lc") {
			skipf(t, "no static libc: %v", buildErr)
		}
		t.Fatal(buildErr)
	}
	return buildDir
}

// variants are the variants of a program built here.
func variants() []string {
	v := []string{"plain", "ours", "for-kernel"}
	if gnuBuilt {
		v = append(v, "gnu")
	}
	return v
}

// gdbScript steps the programs under gdb and prints the call chains gdb
// finds ("CHAIN TAG IP..." innermost first, callers by their return
// addresses, as the kernel records them).
const gdbScript = `
import gdb
gdb.execute("set pagination off")
gdb.execute("set backtrace past-main on")
gdb.execute("set backtrace past-entry on")
def chain(tag):
    f = gdb.newest_frame()
    out = []
    while f is not None:
        out.append("%x" % f.pc())
        f = f.older()
    print("CHAIN %s %s" % (tag, " ".join(out)))
def plt_walk(lo, hi, n):
    seen = 0
    prev = False
    for _ in range(5000):
        pc = int(gdb.parse_and_eval("$pc")) & 0xffffffffffffffff
        inplt = lo <= pc < hi
        if inplt:
            chain("PLT")
        elif prev:
            chain("impl")
            seen += 1
            if seen == n:
                return
        prev = inplt
        gdb.execute("stepi", to_string=True)
`

// gdbChains runs prog (with the argument 10: ten turns of each loop) under
// gdb with the commands cmds (which call chain(TAG) from gdbScript), and
// returns the chains by tag, in order.
func gdbChains(t *testing.T, prog string, cmds ...string) map[string][][]uint64 {
	t.Helper()
	if _, err := exec.LookPath("gdb"); err != nil {
		skip(t, "no gdb")
	}
	py := filepath.Join(t.TempDir(), "chains.py")
	if err := os.WriteFile(py, []byte(gdbScript), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-nx", "-batch", "-x", py, "-ex", "handle SIGUSR1 nostop noprint pass"}
	for _, c := range cmds {
		args = append(args, "-ex", c)
	}
	args = append(args, "--args", prog, "10")
	out, err := exec.Command("gdb", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb %s: %v\n%s", prog, err, out)
	}
	chains := map[string][][]uint64{}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "CHAIN" {
			continue
		}
		var ips []uint64
		for _, h := range f[2:] {
			v, err := strconv.ParseUint(h, 16, 64)
			if err != nil {
				t.Fatalf("gdb: %q", l)
			}
			ips = append(ips, v)
		}
		chains[f[1]] = append(chains[f[1]], ips)
	}
	if len(chains) == 0 {
		if strings.Contains(string(out), "ptrace") {
			skipf(t, "gdb cannot trace here:\n%s", out)
		}
		t.Fatalf("gdb %s gave no chain:\n%s", prog, out)
	}
	return chains
}

// pltRange is the address range of prog's .plt.
func pltRange(t *testing.T, prog string) (uint64, uint64) {
	t.Helper()
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := f.Section(".plt")
	if s == nil {
		t.Fatalf("%s has no .plt", prog)
	}
	return s.Addr, s.Addr + s.Size
}

// realChains are the call chains gdb finds in each program (by the
// variant's own symbols: the variants' code is the same), by tag: chain
// "leaf"; drap "drapfn" and "leaf"; signal "s3" and "hleaf"; plt "p2",
// "PLT" (in a .plt stub, three times) and "impl" (at the first
// instruction the stub jumps to: strlen's, strnlen's and strcpy's
// implementations).
func realChains(t *testing.T, prog string) map[string][][]uint64 {
	t.Helper()
	chainsMu.Lock()
	defer chainsMu.Unlock()
	if c, ok := chainsOf[prog]; ok {
		return c
	}
	c := gdbRun(t, prog)
	chainsOf[prog] = c
	return c
}

// chainsOf are the chains realChains found, by program.
var (
	chainsMu sync.Mutex
	chainsOf = map[string]map[string][][]uint64{}
)

func gdbRun(t *testing.T, prog string) map[string][][]uint64 {
	switch p := strings.Split(filepath.Base(prog), ".")[0]; p {
	case "chain":
		return gdbChains(t, prog, "break leaf", "run", "python chain('leaf')")
	case "drap":
		return gdbChains(t, prog, "break drapfn", "break leaf", "run", "python chain('drapfn')", "continue", "python chain('leaf')")
	case "signal":
		return gdbChains(t, prog, "break s3", "break hleaf", "run", "python chain('s3')", "continue", "python chain('hleaf')")
	case "plt":
		lo, hi := pltRange(t, prog)
		return gdbChains(t, prog, "break p2", "run", "python chain('p2')", fmt.Sprintf("python plt_walk(%d, %d, 3)", lo, hi))
	case "noreturn":
		return gdbChains(t, prog, "break spin_pad", "break spin_next", "run", "python chain('spin_pad')", "continue", "python chain('spin_next')")
	case "goprog":
		// The stripped variants have no symbols to break at: gdb runs
		// their twin, whose code is theirs (TestGoSymtab).
		c := gdbChains(t, filepath.Join(filepath.Dir(prog), "goprog.sym"), "break main.leaf", "run", "python chain('leaf')")
		// gdb goes one frame past runtime.goexit, to PC 0.
		for _, ips := range c {
			for i := range ips {
				if n := len(ips[i]); n > 0 && ips[i][n-1] == 0 {
					ips[i] = ips[i][:n-1]
				}
			}
		}
		return c
	default:
		t.Fatalf("no chains for %s", p)
		return nil
	}
}
