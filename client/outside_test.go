package client_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/vfs"
)

// TestSDKFromAnotherModule builds testdata/sdkcheck as a module of its own
// (example.com/sdkcheck, with github.com/canopyfs/canopy replaced by this
// checkout) and runs it against a real server: it compiles only if what it
// uses of package client is public, and it exits non-zero if a result is
// wrong. It works offline, from the module cache and this checkout's
// go.sum.
func TestSDKFromAnotherModule(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool:", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	modFile, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(modFile)
	if goLine == nil {
		t.Fatal("no go line in go.mod")
	}
	dir := t.TempDir()
	gomod := "module example.com/sdkcheck\n\n" + string(goLine) + "\n\n" +
		"require github.com/canopyfs/canopy v0.0.0\n\n" +
		"replace github.com/canopyfs/canopy => " + root + "\n"
	copyFile(t, filepath.Join(dir, "go.mod"), []byte(gomod))
	for _, f := range []struct{ from, to string }{
		{filepath.Join(root, "go.sum"), "go.sum"},
		{filepath.Join("testdata", "sdkcheck", "main.go"), "main.go"},
	} {
		b, err := os.ReadFile(f.from)
		if err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join(dir, f.to), b)
	}
	src, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range regexp.MustCompile(`"github\.com/canopyfs/canopy/[^"]*"`).FindAll(src, -1) {
		if string(imp) != `"github.com/canopyfs/canopy/client"` {
			t.Fatalf("sdkcheck imports %s: it may use package client only", imp)
		}
	}

	_, addr := servertest.Start(t, server.Config{Storage: "file://" + t.TempDir(), FS: vfs.NewMem()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "sdkcheck")
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	build.Dir = dir
	build.Env = append(os.Environ(),
		"GOFLAGS=-mod=mod "+os.Getenv("GOFLAGS"), "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build sdkcheck in its own module: %v\n%s", err, out)
	}
	run := exec.CommandContext(ctx, bin, "-addr", addr)
	out, err := run.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("sdkcheck: ok")) {
		t.Fatalf("sdkcheck against %s: %v\n%s", addr, err, strings.TrimSpace(string(out)))
	}
}

func copyFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
