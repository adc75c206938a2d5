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

// apiBudget is the most exported identifiers the importable packages may
// have together: top-level functions, types, variables and constants,
// methods of exported types, and exported fields and interface methods.
// It goes down, and up only for a new capability, with the reason here:
// the library is meant to be small (sframe, unwind,
// convert, verify; cfi, translate and arch with what they need), and
// what only the command uses lives under internal/. 1,019 at 2a4860c,
// over 16 packages; 691 over 9 once the command's packages moved; 614
// over 7 with one ABI descriptor (package arch) and unwind without its own;
// 579 with one conversion path in convert and verify through one entry;
// 512 once cfi opened files and ran FDEs through one File and Context and
// translate took one kind of Source.
// 479 with sframe's encoder arena, lookups and raw fields cut; 466 with
// the PLT simulators in internal/pltsim, unwind's registers behind Reg
// and SetReg, and ForReader the one way to name a reader in convert.
// 440 with sframe's Table the one decoded model (whole-section decoding
// for tests and tools in internal/sfsection) and its FDEs without raw
// type fields; 418 with cfi's Touch, Kind, Execute and Section fields and
// translate's Translate, Tables and derived counts cut.
// 419 with cfi.FDE.GoNote: the note on a Go function's rules reaches
// --diagnostics through the one thing translate gets of a function, its
// FDE. 422 with cfi.File.Shared and verify's Shared kind and count:
// verify says which of two sections describing a Go function it checked
// against, and only cfi knows which one it left out.
// 423 with verify's ReturnAddresses: verify says how many return-address
// bytes after a function's last call it checked (convert covers them for
// the kernel, which looks a return address up as it is).
// 438 with --from-code (issue 46), a new capability: cfi's Options,
// OpenBytesWith, Left (the code the analysis left out, which cfi alone
// knows and translate never sees) and SectionOf (which source described
// a function, for the report's split), convert's FromCode and DebugDirs
// and the from-code remark's reason.
// 440 with verify's FromCode kind and count: verify checks the functions
// described from code against their instructions, since no CFI can.
// 442 with verify's Unproven kind and count: rules of functions described
// from code that the check cannot re-derive from the rows alone, told
// apart from rules shown wrong.
// 444 with sframe.Options.Share and convert.Options.PlainLayout: the
// encoder's shared FRE blocks and the conversion's way back to one block
// per function (issue 47).
const apiBudget = 444

// exported counts the exported identifiers of the package in dir (its
// non-test files).
func exported(t *testing.T, fset *token.FileSet, files []string) int {
	n := 0
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name == "main" {
			return 0
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d)) {
					n++
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					n += exportedSpec(s)
				}
			}
		}
	}
	return n
}

func exportedRecv(fn *ast.FuncDecl) bool {
	name := funcName(fn)
	name = strings.TrimPrefix(strings.TrimPrefix(name, "(*"), "(")
	return ast.IsExported(name)
}

func exportedSpec(s ast.Spec) int {
	n := 0
	switch s := s.(type) {
	case *ast.ValueSpec:
		for _, id := range s.Names {
			if id.IsExported() {
				n++
			}
		}
	case *ast.TypeSpec:
		if !s.Name.IsExported() {
			return 0
		}
		n++
		var fields *ast.FieldList
		switch ty := s.Type.(type) {
		case *ast.StructType:
			fields = ty.Fields
		case *ast.InterfaceType:
			fields = ty.Methods
		}
		if fields != nil {
			for _, f := range fields.List {
				for _, id := range f.Names {
					if id.IsExported() {
						n++
					}
				}
			}
		}
	}
	return n
}

// TestExportedAPI keeps the importable packages' exported identifiers
// within apiBudget, and lists them per package (go test -v).
func TestExportedAPI(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	byDir := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch n := d.Name(); {
			case path == root:
			case n == "testdata" || n == "internal" || n == "cmd" || n == "e2e" || n == "bench" || strings.HasPrefix(n, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dir, _ := filepath.Rel(root, filepath.Dir(path))
			byDir[dir] = append(byDir[dir], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var dirs []string
	for dir := range byDir {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	total := 0
	for _, dir := range dirs {
		n := exported(t, fset, byDir[dir])
		if n > 0 {
			t.Logf("%-12s %d", dir, n)
		}
		total += n
	}
	t.Logf("total        %d", total)
	switch {
	case total > apiBudget:
		t.Errorf("%d exported identifiers, over the budget of %d: unexport what only this module uses, or move it under internal/", total, apiBudget)
	case total < apiBudget:
		t.Errorf("%d exported identifiers, under the budget of %d: lower apiBudget to %d", total, apiBudget, total)
	}
}

// TestExamplesImportNoInternal: the runnable examples of the importable
// packages are what godoc shows a user to copy, so they use only what
// another module can import.
func TestExamplesImportNoInternal(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	files, err := filepath.Glob(filepath.Join(root, "*", "example_test.go"))
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v, %d files", err, len(files))
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if strings.Contains(imp.Path.Value, "/internal/") {
				t.Errorf("%s imports %s, which a user of the library cannot", path, imp.Path.Value)
			}
		}
	}
}
