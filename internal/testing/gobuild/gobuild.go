// Package gobuild builds small Go programs for tests of the packages that
// read Go binaries (internal/gopclntab, internal/gocfi): with the Go that
// runs the tests or an older one installed beside it (Debian's
// golang-1.N-go, in /usr/lib/go-1.N), for several architectures, with and
// without cgo, DWARF and PIE.
package gobuild

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cfi2sframe/cfi2sframe/internal/testing/toolchain"
)

// Config is one way to build the test program.
type Config struct {
	// Files replace or join the test program's files by name: main.go
	// (the usual one runs through shapes that matter to unwinding and
	// exits at once; Spin keeps the CPUs busy), and extra.go or, with
	// Cgo, cgo.go, which define extra() for main.go.
	Files  map[string]string
	Go     string // the go command; "" for the one running the tests
	GOARCH string
	Cgo    bool
	Strip  bool // -ldflags='-s -w': no .symtab, no DWARF
	PIE    bool
	// LDFlags are more linker flags (-compressdwarf=false,
	// -extldflags=-fuse-ld=lld).
	LDFlags []string
	// EHFrameOver, in a cgo build with symbols, moves one .eh_frame FDE
	// of the C code onto each of these Go functions (by the symbol
	// table's name, with or without .abi0) after the link, so that
	// .eh_frame and the function table both describe them (shareEHFrame).
	EHFrameOver []string
}

func (c Config) String() string {
	s := filepath.Base(filepath.Dir(filepath.Dir(c.goCmd()))) + "-" + c.GOARCH
	if c.Cgo {
		s += "-cgo"
	}
	if c.PIE {
		s += "-pie"
	}
	if c.Strip {
		s += "-stripped"
	}
	for _, f := range c.LDFlags {
		s += "-" + strings.Trim(strings.NewReplacer("=", "_", "/", "_").Replace(f), "-")
	}
	if len(c.EHFrameOver) > 0 {
		s += "-ehframe-over-" + strings.NewReplacer("/", "_", "*", "_", "(", "_", ")", "_").Replace(strings.Join(c.EHFrameOver, "+"))
	}
	return s
}

func (c Config) goCmd() string {
	if c.Go != "" {
		return c.Go
	}
	//lint:ignore SA1019 the root the test binary was built with is the Go running the tests
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// crossCC is the C cross compiler cgo needs for a GOARCH.
var crossCC = map[string]string{
	"arm64": "aarch64-linux-gnu-gcc",
	"s390x": "s390x-linux-gnu-gcc",
}

// Skip skips tb for a missing tool, or fails it where the tests must run
// (CFI2SFRAME_REQUIRE_TOOLCHAIN=1, as in CI).
func Skip(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if toolchain.Required() {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

// Build builds the test program (with c.Files) with c into dir and returns
// the path of the binary. A missing C cross compiler skips tb (Skip).
func Build(tb testing.TB, dir string, c Config) string {
	tb.Helper()
	src := filepath.Join(dir, "src-"+c.String())
	files := map[string]string{"go.mod": goMod, "main.go": mainGo, "extra.go": plainGo}
	if c.Cgo {
		delete(files, "extra.go")
		files["cgo.go"] = cgoGo
	}
	for name, text := range c.Files {
		files[name] = text
	}
	writeFiles(tb, src, files)
	out := filepath.Join(dir, c.String())
	ldflags := c.LDFlags
	if c.Strip {
		ldflags = append([]string{"-s", "-w"}, ldflags...)
	}
	args := []string{"build", "-trimpath", "-o", out}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags="+strings.Join(ldflags, " "))
	}
	if c.PIE {
		args = append(args, "-buildmode=pie")
	}
	cmd := exec.Command(c.goCmd(), append(args, ".")...)
	cmd.Dir = src
	env := []string{"GOARCH=" + c.GOARCH, "GOOS=linux", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0"}
	if c.Cgo {
		env[len(env)-1] = "CGO_ENABLED=1"
		if c.GOARCH != runtime.GOARCH {
			cc, ok := crossCC[c.GOARCH]
			if !ok {
				tb.Fatalf("no C cross compiler known for %s", c.GOARCH)
			}
			if _, err := exec.LookPath(cc); err != nil {
				Skip(tb, "%s: %s not installed (gcc-%s-linux-gnu)", c, cc, c.GOARCH)
			}
			env = append(env, "CC="+cc)
		}
	}
	cmd.Env = append(cleanEnv(), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s: go %s: %v\n%s", c, strings.Join(args, " "), err, stderr.String())
	}
	if len(c.EHFrameOver) > 0 {
		if err := shareEHFrame(out, c.EHFrameOver); err != nil {
			tb.Fatalf("%s: %v", c, err)
		}
	}
	return out
}

// cleanEnv is the environment without what would make another Go use the
// running one's root or settings.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOROOT", "GOTOOLDIR", "GOARCH", "GOOS", "GOFLAGS", "CGO_ENABLED", "CC", "GOEXPERIMENT", "GOAMD64", "GOARM64":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func writeFiles(tb testing.TB, dir string, files map[string]string) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// AllGos returns "" (the Go running the tests) followed by OldGos, for a
// test that builds with every Go it can. It skips tb in -short mode, and
// where no older Go is installed (Skip: in CI that fails it).
func AllGos(tb testing.TB) []string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("builds Go programs")
	}
	gos := append([]string{""}, OldGos()...)
	if len(gos) == 1 {
		Skip(tb, "no older Go installed (apt-get install golang-1.19-go): only %s tested", Version(""))
	}
	return gos
}

// OldGos returns the go commands of the Go releases installed as Debian
// packages (/usr/lib/go-1.N/bin/go) older than the running one, oldest
// first.
func OldGos() []string {
	cur := minor(runtime.Version())
	type found struct {
		minor int
		path  string
	}
	var fs []found
	dirs, _ := filepath.Glob("/usr/lib/go-1.*")
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "go-1."))
		if err != nil || n >= cur || n < 16 {
			continue
		}
		if p := filepath.Join(d, "bin", "go"); isFile(p) {
			fs = append(fs, found{n, p})
		}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].minor < fs[j].minor })
	var out []string
	for _, f := range fs {
		out = append(out, f.path)
	}
	return out
}

// minor is the minor version of a "go1.N..." string, 0 if none.
func minor(v string) int {
	v = strings.TrimPrefix(v, "go1.")
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	n, _ := strconv.Atoi(v[:i])
	return n
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Version returns what `go version` says of the go command goCmd ("" for
// the running one), for messages.
func Version(goCmd string) string {
	c := Config{Go: goCmd}
	cmd := exec.Command(c.goCmd(), "version")
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Sprintf("%s: %v", c.goCmd(), err)
	}
	return strings.TrimSpace(string(out))
}

const goMod = "module gobuildtest\n\ngo 1.16\n"

// mainGo exercises what gives functions varied frames: goroutines and
// channels, defer and recover, closures, methods through interfaces, a
// large frame, deep recursion (stack growth), maps and fmt.
const mainGo = `package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

type shape interface{ area() float64 }

type rect struct{ w, h float64 }

func (r rect) area() float64 { return r.w * r.h }

type circle struct{ r float64 }

func (c *circle) area() float64 { return 3.14159 * c.r * c.r }

//go:noinline
func big(n int) int {
	var buf [4096]byte
	for i := range buf {
		buf[i] = byte(i * n)
	}
	s := 0
	for _, b := range buf {
		s += int(b)
	}
	return s
}

//go:noinline
func deep(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%64])
}

func safe(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("recovered: %v", r)
		}
	}()
	f()
	return nil
}

func main() {
	shapes := []shape{rect{2, 3}, &circle{1}}
	total := 0.0
	for _, s := range shapes {
		total += s.area()
	}
	var wg sync.WaitGroup
	results := make(chan int, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results <- big(i) + deep(100*i)
		}(i)
	}
	wg.Wait()
	close(results)
	var rs []int
	for r := range results {
		rs = append(rs, r)
	}
	sort.Ints(rs)
	m := map[string]int{}
	for _, w := range strings.Fields("a b a c b a") {
		m[w]++
	}
	err := safe(func() { var p *rect; _ = p.area() })
	fmt.Fprintln(os.Stdout, total, rs, len(m), err, extra())
}
`

// Spin is a main.go for Config.Files: 16 goroutines compute Fibonacci
// numbers (main.fib, recursive, so samples land deep in its frames) for
// the duration its first argument gives (1s without one), then it
// prints a line.
const Spin = `package main

import (
	"fmt"
	"os"
	"sync"
	"time"
)

//go:noinline
func fib(n int) int {
	if n < 2 {
		return n
	}
	return fib(n-1) + fib(n-2)
}

//go:noinline
func work(stop time.Time) int {
	s := 0
	for time.Now().Before(stop) {
		s += fib(22)
	}
	return s
}

func main() {
	d := time.Second
	if len(os.Args) > 1 {
		d, _ = time.ParseDuration(os.Args[1])
	}
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	res := make([]int, 16)
	for i := 0; i < len(res); i++ {
		i := i // Go before 1.22 shares one i between iterations
		wg.Add(1)
		go func() { defer wg.Done(); res[i] = work(stop) + extra() }()
	}
	wg.Wait()
	fmt.Println(len(res))
}
`

const plainGo = "package main\n\nfunc extra() int { return 0 }\n"

// cgoGo adds C code, a call into it and a callback from it.
const cgoGo = `package main

/*
#include <stdlib.h>
extern int goCallback(int);
static int twice(int x) { return goCallback(x) * 2; }
static int sum(int n) { int s = 0; for (int i = 0; i < n; i++) s += i; return s; }
*/
import "C"

//export goCallback
func goCallback(x C.int) C.int { return x + 1 }

func extra() int { return int(C.twice(20)) + int(C.sum(10)) }
`
