package lint

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the module's root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// goDirs returns every directory of the module holding Go files, with
// those files, leaving out testdata and hidden directories.
func goDirs(t *testing.T, root string) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") {
			dirs[filepath.Dir(p)] = append(dirs[filepath.Dir(p)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// packageDocs reports the packages among dirs (name -> files) that have
// no package doc comment in any of their non-test files.
func packageDocs(dirs map[string][]string) (missing []string, err error) {
	for dir, files := range dirs {
		fset := token.NewFileSet()
		documented, hasCode := false, false
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				return nil, err
			}
			hasCode = true
			if hasDoc(file) {
				documented = true
			}
		}
		if hasCode && !documented {
			missing = append(missing, dir)
		}
	}
	sort.Strings(missing)
	return missing, nil
}

// hasDoc reports whether file carries a package doc comment that says
// something ("Package x ..." for libraries, any text for commands).
func hasDoc(file *ast.File) bool {
	return file.Doc != nil && strings.TrimSpace(file.Doc.Text()) != ""
}

func TestEveryPackageHasADocComment(t *testing.T) {
	root := repoRoot(t)
	missing, err := packageDocs(goDirs(t, root))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range missing {
		rel, _ := filepath.Rel(root, dir)
		t.Errorf("package %s has no doc comment", rel)
	}
}

// The check itself finds an undocumented package.
func TestPackageDocsCatchesAMissingComment(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bare := write("bare.go", "package bare\n\n// Not a package comment.\nfunc F() {}\n")
	test := write("bare_test.go", "// Package bare is documented only in a test file.\npackage bare\n")
	missing, err := packageDocs(map[string][]string{dir: {bare, test}})
	if err != nil || len(missing) != 1 || missing[0] != dir {
		t.Fatalf("packageDocs = %v, %v; want [%s]", missing, err, dir)
	}
	documented := write("doc.go", "// Package bare does one thing.\npackage bare\n")
	missing, err = packageDocs(map[string][]string{dir: {bare, test, documented}})
	if err != nil || len(missing) != 0 {
		t.Fatalf("packageDocs with doc.go = %v, %v; want none", missing, err)
	}
}

func TestGofmt(t *testing.T) {
	root := repoRoot(t)
	for _, files := range goDirs(t, root) {
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out, err := format.Source(src)
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if !bytes.Equal(src, out) {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s is not gofmt-formatted (run gofmt -w %s)", rel, rel)
			}
		}
	}
}
