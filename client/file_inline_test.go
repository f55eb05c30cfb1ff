package client_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/data"
)

// TestSmallFileInline: a small file written whole goes to the service
// with its commit and no object is stored; readers (also of another
// client) get its bytes from the service; the flusher then stores its
// object and the service lets go of the bytes, and reads go on. A file
// larger than the partition takes inline is stored as objects first.
func TestSmallFileInline(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			env := startData(t, b, client.Options{})
			info, err := env.c.Volume(env.ctx, client.RootIno)
			if err != nil || info.InlineMax <= 0 {
				t.Fatalf("volume: %+v %v; want an inline limit", info, err)
			}
			small := []byte("a small file, whole")
			big := make([]byte, info.InlineMax+1)
			rand.Read(big)
			if err := env.c.WriteFile(env.ctx, "/small", small, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := env.c.WriteFile(env.ctx, "/big", big, 0o644); err != nil {
				t.Fatal(err)
			}
			sliceOf := func(p string) uint64 {
				fi, err := env.c.Stat(env.ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				chunks, err := env.c.Chunks(env.ctx, fi.Ino(), 0, 1)
				if err != nil || len(chunks) != 1 || len(chunks[0].Slices) != 1 {
					t.Fatalf("chunks of %s: %+v %v", p, chunks, err)
				}
				return chunks[0].Slices[0].ID
			}
			stored := func(id uint64) bool {
				for _, k := range env.objects(t) {
					if strings.HasSuffix(k, fmt.Sprintf("/%d_0_%d", id, len(small))) {
						return true
					}
				}
				return false
			}
			id := sliceOf("/small")
			if stored(id) {
				t.Fatal("the small file's object was stored before its commit")
			}
			if len(env.objects(t)) != 1 {
				t.Fatalf("objects %v, want the big file's one", env.objects(t))
			}
			other, err := client.Dial(env.addr, withStoreOf(b, env))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			for _, c := range []*client.Client{env.c, other} {
				if got, err := c.ReadFile(env.ctx, "/small"); err != nil || !bytes.Equal(got, small) {
					t.Fatalf("read before the flush: %q %v", got, err)
				}
			}
			f := data.NewFlusher(env.store, clientdata.InlineAdmin(env.c, 0), data.FlusherConfig{})
			if n, err := f.Flush(env.ctx); err != nil || n != 1 {
				t.Fatalf("flush: %d stored, %v; want 1", n, err)
			}
			if !stored(id) {
				t.Fatalf("the flusher stored no object for slice %d: %v", id, env.objects(t))
			}
			if n, err := f.Flush(env.ctx); err != nil || n != 0 {
				t.Fatalf("a second flush: %d stored, %v; want none", n, err)
			}
			third, err := client.Dial(env.addr, withStoreOf(b, env))
			if err != nil {
				t.Fatal(err)
			}
			defer third.Close()
			if got, err := third.ReadFile(env.ctx, "/small"); err != nil || !bytes.Equal(got, small) {
				t.Fatalf("read after the flush: %q %v", got, err)
			}
			if got, err := third.ReadFile(env.ctx, "/big"); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("read of the big file: %d bytes, %v", len(got), err)
			}
		})
	}
}

// withStoreOf returns options for another client of env's store.
func withStoreOf(b backend, env *dataEnv) client.Options {
	if b.name == "local" {
		return client.Options{}
	}
	return clientdata.WithStore(client.Options{}, env.store)
}

// TestCompactionReadsInlineBytes: a chunk whose first slice's bytes the
// service still holds inline (no flusher runs here) is compacted by its
// writer, which reads those bytes from the service.
func TestCompactionReadsInlineBytes(t *testing.T) {
	e := startData(t, backends[0], client.Options{Data: client.DataOptions{CompactAt: 8}})
	f, err := e.c.OpenFile(e.ctx, "/w", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := randomBytes(6, 32<<10)
	if _, err := f.WriteAt(want, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // one slice, the whole file: inline
		t.Fatal(err)
	}
	patchUntilCompacted(t, e, f, want, 8) // eight commits of the writer's own reach CompactAt
}
