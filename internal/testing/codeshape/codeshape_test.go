// Package codeshape holds tests of the shape of the code itself: rules
// of the developers' guide that a reviewer would otherwise have to count.
package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxLines is the longest a non-test function may be, from its func line
// to its closing brace.
const maxLines = 150

// allowed are the functions that may be longer, with the reason.
var allowed = map[string]string{
	"cfi/exec.go:(*executor).run": "the CFA opcode switch: one case per DWARF opcode, split only by obscuring it",
}

func TestFunctionLength(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	var long []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			name := rel + ":" + funcName(fn)
			if _, ok := allowed[name]; n > maxLines && !ok {
				long = append(long, name)
			}
			if ok := n > maxLines; !ok && allowed[name] != "" {
				t.Errorf("%s is %d lines now: take it off the allowed list", name, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(long)
	for _, l := range long {
		t.Errorf("%s is over %d lines: split it along its named steps", l, maxLines)
	}
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	star := ""
	if s, ok := typ.(*ast.StarExpr); ok {
		star, typ = "*", s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if ix, ok := typ.(*ast.IndexListExpr); ok {
		typ = ix.X
	}
	id, _ := typ.(*ast.Ident)
	name := "?"
	if id != nil {
		name = id.Name
	}
	if star != "" {
		return "(" + star + name + ")." + fn.Name.Name
	}
	return name + "." + fn.Name.Name
}
