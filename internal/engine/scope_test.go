package engine

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestLinkedUnder: a file is under a directory when one of its links is
// in that directory's subtree (a hard link from outside counts), not when
// its only link is outside; the search stops at its budget.
func TestLinkedUnder(t *testing.T) {
	e := New(0, 1)
	must := func(a Attr, err error) Ino {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	top := must(e.Mkdir(Root, e.Root(), "top", 0o755, 1))
	deep := must(e.Mkdir(Root, must(e.Mkdir(Root, top, "a", 0o755, 1)), "b", 0o755, 1))
	out := must(e.Mkdir(Root, e.Root(), "out", 0o755, 1))
	in := must(e.Mknod(Root, deep, "f", S_IFREG|0o644, 0, 1))
	secret := must(e.Mknod(Root, out, "s", S_IFREG|0o644, 0, 1))
	shared := must(e.Mknod(Root, out, "shared", S_IFREG|0o644, 0, 1))
	must(e.Link(Root, shared, deep, "shared", 1))
	for i := range 50 {
		must(e.Mknod(Root, top, fmt.Sprint("filler", i), S_IFREG|0o644, 0, 1))
	}
	for _, c := range []struct {
		ino  Ino
		want bool
	}{{in, true}, {shared, true}, {secret, false}, {out, false}, {deep, true}, {top, true}} {
		got, err := e.LinkedUnder(c.ino, top, 0)
		if err != nil || got != c.want {
			t.Errorf("LinkedUnder(%d): %v, %v; want %v", c.ino, got, err, c.want)
		}
	}
	if _, err := e.LinkedUnder(MakeIno(0, 1<<30), top, 0); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing node: %v, want ENOENT", err)
	}
	if ok, err := e.LinkedUnder(secret, top, 10); ok || !errors.Is(err, ErrSearchBudget) {
		t.Errorf("search over its budget: %v, %v; want ErrSearchBudget", ok, err)
	}
}
