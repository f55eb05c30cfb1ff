package client_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The public surface of package client must be usable from outside the
// module: no exported signature may name a type of an internal package or
// of the generated protocol messages, which code outside cannot import.

// forbiddenPath reports whether code outside the module cannot (or must
// not) name types of the package at path.
func forbiddenPath(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasPrefix(path, "internal/") ||
		strings.HasSuffix(path, "/api/metapb")
}

// apiLeaks returns, for each exported name of pkg whose signature (type,
// fields, methods, parameters and results, through unexported types it
// exposes) names a forbidden type, "where: type".
func apiLeaks(pkg *types.Package) []string {
	c := &leakChecker{pkg: pkg, seen: map[*types.Named]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		if tn, ok := obj.(*types.TypeName); ok && !tn.IsAlias() {
			if named, ok := tn.Type().(*types.Named); ok {
				c.named(named, name)
				continue
			}
		}
		c.check(obj.Type(), name)
	}
	slices.Sort(c.leaks)
	return slices.Compact(c.leaks)
}

// leakChecker walks types for apiLeaks.
type leakChecker struct {
	pkg   *types.Package
	seen  map[*types.Named]bool // the package's own named types already walked
	leaks []string
}

// named walks a named type of the package: its underlying type and its
// exported methods.
func (c *leakChecker) named(t *types.Named, where string) {
	if c.seen[t] {
		return
	}
	c.seen[t] = true
	c.check(t.Underlying(), where)
	for m := range t.Methods() {
		if m.Exported() {
			c.check(m.Type(), where+"."+m.Name())
		}
	}
}

func (c *leakChecker) check(t types.Type, where string) {
	switch t := t.(type) {
	case *types.Alias:
		c.check(types.Unalias(t), where)
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() != nil && forbiddenPath(obj.Pkg().Path()) {
			c.leaks = append(c.leaks, where+": "+obj.Pkg().Path()+"."+obj.Name())
		}
		for a := range t.TypeArgs().Types() {
			c.check(a, where)
		}
		// The package's exported types are walked from their own
		// declarations; unexported ones only as far as they are exposed.
		if obj.Pkg() == c.pkg && !obj.Exported() {
			c.named(t, where)
		}
	case *types.Pointer:
		c.check(t.Elem(), where)
	case *types.Slice:
		c.check(t.Elem(), where)
	case *types.Array:
		c.check(t.Elem(), where)
	case *types.Chan:
		c.check(t.Elem(), where)
	case *types.Map:
		c.check(t.Key(), where)
		c.check(t.Elem(), where)
	case *types.Tuple:
		for v := range t.Variables() {
			c.check(v.Type(), where)
		}
	case *types.Signature:
		c.check(t.Params(), where)
		c.check(t.Results(), where)
	case *types.Struct:
		for f := range t.Fields() {
			if f.Exported() || f.Embedded() {
				c.check(f.Type(), where+"."+f.Name())
			}
		}
	case *types.Interface:
		for m := range t.Methods() {
			if m.Exported() {
				c.check(m.Type(), where+"."+m.Name())
			}
		}
		for e := range t.EmbeddedTypes() {
			c.check(e, where)
		}
	case *types.TypeParam:
		c.check(t.Constraint(), where)
	case *types.Union:
		for term := range t.Terms() {
			c.check(term.Type(), where)
		}
	}
}

// exportImporter returns an importer that reads the compiler's export data
// of pkgs and their dependencies, built by go list -export.
func exportImporter(t *testing.T, fset *token.FileSet, pkgs ...string) types.Importer {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool:", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}"}, pkgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	files := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), " "); ok && file != "" {
			files[path] = file
		}
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		file, ok := files[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
}

const clientPath = "github.com/canopyfs/canopy/client"

func TestPublicAPINamesNoInternalType(t *testing.T) {
	fset := token.NewFileSet()
	imp := exportImporter(t, fset, clientPath)

	// The check itself: the fixture's planted leaks, and only those.
	files, err := parseDir(fset, filepath.Join("testdata", "apileak"))
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := (&types.Config{Importer: imp}).Check("example.com/apileak", fset, files, nil)
	if err != nil {
		t.Fatalf("type-check the fixture: %v", err)
	}
	var where []string
	for _, l := range apiLeaks(fixture) {
		where = append(where, strings.SplitN(l, ":", 2)[0])
	}
	want := []string{"Default", "Handle.Attr", "Hidden.Info", "Info", "Lister.List", "Open", "Options.Store", "Pages", "Results"}
	if !slices.Equal(where, want) {
		t.Errorf("the check finds leaks at %q in the fixture, want %q", where, want)
	}

	// The package.
	pkg, err := imp.Import(clientPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Dial", "Options", "Client", "File", "FS"} {
		if pkg.Scope().Lookup(name) == nil {
			t.Fatalf("package client as read has no %s", name)
		}
	}
	for _, l := range apiLeaks(pkg) {
		t.Errorf("exported API of package client names a type code outside the module cannot use: %s", l)
	}
}

// parseDir parses the Go files of dir.
func parseDir(fset *token.FileSet, dir string) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("no Go files in %s (%v)", dir, err)
	}
	var files []*ast.File
	for _, name := range names {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// Every exported name of package client has a doc comment: types, funcs,
// methods of exported types, constants and variables (a group's comment
// covers its members), and exported fields of exported structs (a line
// comment will do).
func TestPublicAPIDocumented(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		missing = append(missing, undocumented(fset, f)...)
	}
	for _, m := range missing {
		t.Errorf("undocumented: %s", m)
	}
}

// undocumented lists the exported names of f without a doc comment.
func undocumented(fset *token.FileSet, f *ast.File) []string {
	var missing []string
	miss := func(n ast.Node, what string) {
		missing = append(missing, fmt.Sprintf("%s: %s", fset.Position(n.Pos()), what))
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv != nil {
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); !ok || !id.IsExported() {
					continue
				}
				miss(d, fmt.Sprintf("method %s.%s", recv.(*ast.Ident).Name, d.Name.Name))
				continue
			}
			miss(d, "func "+d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && d.Doc == nil {
						miss(s, "type "+s.Name.Name)
					}
					if st, ok := s.Type.(*ast.StructType); ok {
						for _, field := range st.Fields.List {
							for _, fn := range field.Names {
								if fn.IsExported() && field.Doc == nil && field.Comment == nil {
									miss(fn, "field "+s.Name.Name+"."+fn.Name)
								}
							}
						}
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
							miss(n, n.Name)
						}
					}
				}
			}
		}
	}
	return missing
}
