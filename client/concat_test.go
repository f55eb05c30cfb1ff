package client_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/client"
)

// TestConcat joins files through a real server without copying them: the
// result reads as the concatenation, no new data objects are stored, and
// it stays readable once the sources are gone.
func TestConcat(t *testing.T) {
	e := startData(t, backends[0], client.Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	var srcs []string
	for i, size := range []int{5 << 20, 1000, 3<<20 + 7} {
		b := make([]byte, size)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		name := "/part" + string(rune('a'+i))
		if err := e.c.WriteFile(e.ctx, name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
		srcs = append(srcs, name)
	}
	before := len(e.objects(t))
	if err := e.c.WriteFile(e.ctx, "/joined", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := e.c.Concat(e.ctx, "/joined", srcs...)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(want)) || fi.Name() != "joined" {
		t.Fatalf("attributes after concat: size %d name %q", fi.Size(), fi.Name())
	}
	if got, err := e.c.ReadFile(e.ctx, "/joined"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v), want the %d of the parts", len(got), err, len(want))
	}
	if after := len(e.objects(t)); after != before {
		t.Fatalf("%d data objects before concat, %d after: bytes were copied", before, after)
	}
	for _, s := range srcs {
		if err := e.c.Unlink(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.c.ReadFile(e.ctx, "/joined"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back after removing the parts: %d bytes, %v", len(got), err)
	}
	if _, err := e.c.Concat(e.ctx, "/joined", "/joined"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("concat of a file onto itself: %v", err)
	}
	if _, err := e.c.Concat(e.ctx, "/joined", "/parta"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("concat of a missing file: %v", err)
	}
}
