package data

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/internal/object"
)

// fakeAdmin is a partition with some garbage slices, purged once; the
// collector's goroutine calls it, the test reads purged under mu.
type fakeAdmin struct {
	mu      sync.Mutex
	garbage []*pb.SliceRef
	failing bool
}

func (a *fakeAdmin) ListGarbage(context.Context, uint64, uint32, int64) (*pb.ListSlicesReply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failing {
		return nil, errors.New("listing fails")
	}
	return &pb.ListSlicesReply{Slices: a.garbage, Eof: true}, nil
}

func (a *fakeAdmin) ListSlices(context.Context, uint64, uint32) (*pb.ListSlicesReply, error) {
	return &pb.ListSlicesReply{Eof: true}, nil
}

func (a *fakeAdmin) Purge(context.Context, []uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.garbage = nil
	return nil
}

func (a *fakeAdmin) Partition() uint16 { return 0 }

// TestRunReports checks which passes Run reports: the first, one that
// collected garbage, one that failed; not a quiet one.
func TestRunReports(t *testing.T) {
	store, err := object.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	admin := &fakeAdmin{}
	passes := make(chan Pass, 100)
	col := NewCollector(store, admin, CollectorConfig{Interval: time.Millisecond, Delay: time.Nanosecond, SweepEvery: 1 << 30,
		Report: func(_ context.Context, p Pass) { passes <- p }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); col.Run(ctx) }()
	defer func() { cancel(); <-done }()
	next := func(what string) Pass {
		t.Helper()
		select {
		case p := <-passes:
			return p
		case <-time.After(30 * time.Second):
			t.Fatalf("no pass reported: %s", what)
			return Pass{}
		}
	}
	if p := next("the first"); p.Err != nil || p.Collect.Slices != 0 || p.Start.IsZero() {
		t.Fatalf("first pass %+v", p)
	}
	admin.mu.Lock()
	admin.garbage = []*pb.SliceRef{{Id: 7, Size: 10}}
	admin.mu.Unlock()
	if p := next("one that collected"); p.Err != nil || p.Collect.Slices != 1 || p.Collect.Objects != 1 {
		t.Fatalf("collecting pass %+v", p)
	}
	admin.mu.Lock()
	admin.failing = true
	admin.mu.Unlock()
	if p := next("one that failed"); p.Err == nil {
		t.Fatalf("failing pass %+v", p)
	}
}
