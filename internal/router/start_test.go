package router

import (
	"errors"
	"log/slog"
	"syscall"
	"testing"
)

// A router pointed at a partition that keeps no tables does not start; nor
// does one without a root.
func TestStartNeedsTheRootPartition(t *testing.T) {
	_, a1 := startPartition(t, 1)
	r, err := Start(testCtx(t), Config{Listen: "127.0.0.1:0", Root: []string{a1}, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		r.Close()
		t.Fatal("router started against partition 1")
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		t.Fatalf("start against partition 1: %v, want the partition's errno", err)
	}
	if _, err := Start(testCtx(t), Config{Listen: "127.0.0.1:0"}); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("start without a root: %v, want EINVAL", err)
	}
}
