package goprologue

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// olderGo is Debian's Go 1.19 (package golang-1.19-go), the oldest Go
// with the pclntab layout the tests read and the last before amd64's
// frame moved to PUSHQ BP; the tests use it when it is installed.
const olderGo = "/usr/lib/go-1.19/bin/go"

// toolchains are the go commands to build the test program with: the
// one on PATH (the Go running the tests) and the older Go when present.
func toolchains(t *testing.T) []string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	gos := []string{goCmd}
	if _, err := os.Stat(olderGo); err == nil {
		gos = append(gos, olderGo)
	} else {
		t.Logf("%s is not installed (apt-get install golang-1.19-go): building with %s only", olderGo, goCmd)
	}
	return gos
}

// buildProgram builds testdata/fpprog with goCmd for goarch, without cgo,
// optimized or (noOpt) with -N -l for its own package, and returns the
// binary's path.
func buildProgram(t *testing.T, goCmd, goarch string, noOpt bool) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "fpprog", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module fpprog\n\ngo 1.19\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "fpprog")
	args := []string{"build", "-o", out}
	if noOpt {
		args = append(args, "-gcflags=-N -l")
	}
	cmd := exec.Command(goCmd, append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOTOOLCHAIN=local", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", goCmd, args, err, b)
	}
	return out
}

// goVersion is what goCmd says of itself, for the logs.
func goVersion(goCmd string) string {
	b, err := exec.Command(goCmd, "version").Output()
	if err != nil {
		return goCmd
	}
	return strings.TrimSpace(string(b))
}

// TestGoBinaries builds the test program with each toolchain, for amd64
// and arm64, optimized and not, and checks what Analyze says of every
// function of it: the counts are logged; no function written in Go may
// be unrecognized or fail to decode; the test program's own functions
// have the kinds they are written to have; and every described function
// keeps the invariants of Go's frame layout (see checkInvariants).
func TestGoBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs")
	}
	for _, goCmd := range toolchains(t) {
		version := goVersion(goCmd)
		for _, goarch := range []string{"amd64", "arm64"} {
			for _, noOpt := range []bool{false, true} {
				name := filepath.Base(filepath.Dir(filepath.Dir(goCmd))) + "/" + goarch
				if noOpt {
					name += "/N-l"
				}
				t.Run(name, func(t *testing.T) {
					s := analyzeBinary(t, buildProgram(t, goCmd, goarch, noOpt))
					t.Logf("%s %s -N -l=%v: %d functions\n%s", version, goarch, noOpt, len(s.funcs), s.count())
					checkGoFuncs(t, s)
					checkProgramFuncs(t, s, noOpt)
					checkInvariants(t, s)
					checkQuick(t, s, true)
				})
			}
		}
	}
}

// goRoot is the GOROOT of the go command on PATH; the test is skipped
// without one.
func goRoot(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	b, err := exec.Command(goCmd, "env", "GOROOT").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestGoCommand analyzes the go command of the Go running the tests and
// logs the counts, which the package documentation quotes.
func TestGoCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a large binary")
	}
	path := filepath.Join(goRoot(t), "bin", "go")
	s := analyzeBinary(t, path)
	t.Logf("%s (%s): %d functions\n%s", path, goVersion(path), len(s.funcs), s.count())
	checkGoFuncs(t, s)
	checkInvariants(t, s)
}
