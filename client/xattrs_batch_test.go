package client_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/client"
)

func TestXattrs(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	if err := e.c.WriteFile(e.ctx, "/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := range 40 { // more than are read at once
		n := fmt.Sprintf("user.a.%02d", i)
		want[n] = fmt.Sprintf("value %d", i)
		if err := e.c.SetXattr(e.ctx, "/f", n, []byte(want[n]), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.c.SetXattr(e.ctx, "/f", "user.b", []byte("other"), 0); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.Xattrs(e.ctx, "/f", "user.a.")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d attributes, want %d", len(got), len(want))
	}
	for n, v := range want {
		if string(got[n]) != v {
			t.Errorf("%s = %q, want %q", n, got[n], v)
		}
	}
	all, err := e.c.Xattrs(e.ctx, "/f", "")
	if err != nil || len(all) != len(want)+1 || string(all["user.b"]) != "other" {
		t.Fatalf("all attributes: %d of them, user.b %q, %v", len(all), all["user.b"], err)
	}
	one, err := e.c.Xattrs(e.ctx, "/f", "user.b")
	if err != nil || len(one) != 1 || string(one["user.b"]) != "other" {
		t.Fatalf("one attribute: %v, %v", one, err)
	}
	none, err := e.c.Xattrs(e.ctx, "/f", "user.none")
	if err != nil || len(none) != 0 {
		t.Fatalf("no attribute: %v, %v", none, err)
	}
	if _, err := e.c.Xattrs(e.ctx, "/missing", ""); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing file: %v, want ENOENT", err)
	}
}
