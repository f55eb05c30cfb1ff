package client_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/object"
)

// syncWatch is a store that defers durability to Sync and notes, for the
// test, whether every Put so far has been followed by a Sync.
type syncWatch struct {
	object.Store
	mu       sync.Mutex
	unsynced int // Puts since the last Sync began
	syncs    int
}

func (s *syncWatch) Put(ctx context.Context, key string, data []byte) error {
	s.mu.Lock()
	s.unsynced++
	s.mu.Unlock()
	return s.Store.Put(ctx, key, data)
}

func (s *syncWatch) Sync(ctx context.Context) error {
	s.mu.Lock()
	s.unsynced = 0
	s.syncs++
	s.mu.Unlock()
	return object.Sync(ctx, s.Store)
}

// TestCloseSyncsStoreBeforeCommit checks data before metadata with a store
// that defers durability: once the file is closed (its slices committed),
// no Put is left unsynced, and the local store says it defers.
func TestCloseSyncsStoreBeforeCommit(t *testing.T) {
	_, local := backends[0].start(t)
	if _, ok := local.(object.Syncer); !ok {
		t.Fatalf("the local store does not defer durability to Sync")
	}
	watch := &syncWatch{Store: local}
	e := startData(t, backends[0], clientdata.WithStore(client.Options{}, watch))
	f, err := e.c.OpenFile(e.ctx, "/f", os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 9<<20) // three blocks
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	if _, err := f.Write(buf); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	watch.mu.Lock()
	unsynced, syncs := watch.unsynced, watch.syncs
	watch.mu.Unlock()
	if syncs == 0 || unsynced != 0 {
		t.Fatalf("after close: %d syncs, %d puts not followed by one", syncs, unsynced)
	}
	got, err := e.c.ReadFile(e.ctx, "/f")
	if err != nil || len(got) != len(buf) || got[len(got)-1] != buf[len(buf)-1] {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
}
