package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/engine"
)

// TestSaveEngineServesTheNamespace saves a namespace built in process and
// starts a server on the directory: the files are there, with their
// attributes, and the server goes on making new ones after them.
func TestSaveEngineServesTheNamespace(t *testing.T) {
	e := engine.New(0, 1)
	d, err := e.Mkdir(engine.Root, e.Root(), "d", 0o755, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c"} {
		if _, err := e.Mknod(engine.Root, d.Ino, name, engine.S_IFREG|0o640, 0, int64(3+i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir() + "/meta"
	if err := SaveEngine(Config{Dir: dir}, e); err != nil {
		t.Fatal(err)
	}
	if err := SaveEngine(Config{Dir: dir}, e); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("a second save into the same directory: %v, want ErrNotEmpty", err)
	}
	if err := SaveEngine(Config{Dir: t.TempDir() + "/p1", Partition: 1}, e); err == nil {
		t.Fatal("saving partition 0 as partition 1 succeeded")
	}

	_, c := serveOn(t, Config{Dir: dir})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"a", "b", "c"} {
		a, err := c.Stat(ctx, "/d/"+name)
		if err != nil {
			t.Fatalf("stat /d/%s: %v", name, err)
		}
		if a.Attr().Mode != engine.S_IFREG|0o640 {
			t.Errorf("/d/%s: mode %o, want %o", name, a.Attr().Mode, engine.S_IFREG|0o640)
		}
	}
	if _, err := c.Create(ctx, "/d/new", 0o644); err != nil {
		t.Fatalf("create after the saved ones: %v", err)
	}
	ents, err := c.ReadDir(ctx, "/d")
	if err != nil || len(ents) != 4 {
		t.Fatalf("readdir /d: %d entries, %v; want 4", len(ents), err)
	}
}
