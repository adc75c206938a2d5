package codeshape

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/cfi2sframe/cfi2sframe/"

// imports maps each package directory of the module (relative to root,
// slash-separated) to the module's packages its non-test files import.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	deps := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".") || n == "delvecheck") {
				return filepath.SkipDir // delvecheck is a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if _, ok := deps[dir]; !ok {
			deps[dir] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok {
				deps[dir] = append(deps[dir], rest)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return deps
}

// TestLayout keeps what ships apart from what judges it: internal/testing
// holds the test oracles, harness judges and benchmark helpers, and the
// rest of internal/ is what the command and the importable packages are
// built from. A package of internal/ outside internal/testing that neither
// the command nor an importable package reaches (through non-test
// imports) belongs in internal/testing; a package outside internal/testing,
// e2e and bench that imports one of it makes the command depend on a test.
func TestLayout(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	deps := imports(t, root)
	isTesting := func(dir string) bool {
		return strings.HasPrefix(dir, "internal/testing/") || strings.HasPrefix(dir, "e2e") || strings.HasPrefix(dir, "bench/")
	}
	shipped := map[string]bool{}
	var visit func(dir string)
	visit = func(dir string) {
		if shipped[dir] {
			return
		}
		shipped[dir] = true
		for _, d := range deps[dir] {
			visit(d)
		}
	}
	for dir := range deps {
		if !isTesting(dir) && !strings.HasPrefix(dir, "internal/") {
			visit(dir) // the command and the importable packages
		}
	}
	var bad []string
	for dir := range deps {
		switch {
		case isTesting(dir) && shipped[dir]:
			bad = append(bad, dir+": a test or benchmark package, but a shipped package imports it")
		case !isTesting(dir) && !shipped[dir]:
			bad = append(bad, dir+": no shipped package imports it: move it to internal/testing")
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	if !shipped["cmd/cfi2sframe"] || !shipped["internal/elfwrite"] {
		t.Fatalf("the walk found no command: %d packages", len(deps))
	}
}

// TestDocPaths: every internal/ path the documents, the scripts and CI
// name (internal/testing/judge, ./internal/testing/cmd/sframe-damage,
// internal/elfwrite/layout.go) exists, so that moving a package cannot
// leave them pointing at nothing.
func TestDocPaths(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	var files []string
	for _, pat := range []string{"*.md", "docs/*.md", "scripts/*.sh", "bench/*.sh", "testdata/scripts/*.sh", ".ci/run"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("only %d files", len(files))
	}
	path := regexp.MustCompile(`(?:^|[^A-Za-z0-9_/.-])(?:\./)?(internal/[a-z0-9_-]+(?:/[a-z0-9_.-]*[a-z0-9_])*)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range path.FindAllStringSubmatch(string(b), -1) {
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s names %s, which does not exist", rel, m[1])
			}
		}
	}
}
