package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

func TestAuditLogRotates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := openAudit(path, 400, 2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		a.add(auditEntry{Client: fmt.Sprint(i), Method: "MKDIR"})
	}
	a.close()
	for _, name := range []string{path, path + ".1", path + ".2"} {
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 400 || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %d bytes, mode %v", name, fi.Size(), fi.Mode())
		}
	}
	if _, err := os.Stat(path + ".3"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a third rotated file is kept: %v", err)
	}
}

// countingHandler counts the records logged through it.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h *countingHandler) WithGroup(string) slog.Handler             { return h }

// TestBadHandshakeFlood: 5,000 connections with bad hellos (garbage,
// forged tokens) leave the server serving, and log a bounded number of
// lines.
func TestBadHandshakeFlood(t *testing.T) {
	h := &countingHandler{}
	_, addr := openAndServe(t, Config{Dir: t.TempDir(), Logger: slog.New(h)})
	start := time.Now()
	h.n.Store(0)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= 5000; i = next.Add(1) {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				if i%2 == 0 {
					nc.Write([]byte("\x20\x00\x00\x00\x03\x00\x00\x00garbage garbage garbage!"))
				} else {
					// A well-formed hello, version 4, with a forged token.
					c, err := client.Dial(addr, client.Options{Token: "cnpy.x.0000000000000000000000000000000000000000000000000000000000000000",
						OpTimeout: time.Second, Cred: &client.Cred{}})
					if err == nil {
						c.Close()
						t.Error("forged token accepted")
					}
				}
				nc.Close()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Still serving.
	c := dial(t, addr, client.Cred{})
	if _, err := c.Mkdir(context.Background(), "/after-the-flood", 0o755); err != nil {
		t.Fatalf("after the flood: %v", err)
	}
	// The log: at most the bursts and the rates (5 a second for failed
	// handshakes; the rpc client's own refusals are not logged here).
	limit := int64(2*20 + 2*5*elapsed.Seconds() + 10)
	if n := h.n.Load(); n > limit {
		t.Fatalf("%d log lines for 5000 bad handshakes in %v; want at most %d", n, elapsed, limit)
	}
}
