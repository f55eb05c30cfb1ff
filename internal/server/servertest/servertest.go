// Package servertest starts real metadata servers for other packages'
// tests: on a loopback port, in the test's process, stopped when the test
// ends.
package servertest

import (
	"log/slog"
	"net"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
)

// Start opens a metadata server with cfg (in a fresh temporary directory
// unless cfg.Dir is set, logging nowhere unless cfg.Logger is set) and
// serves it on 127.0.0.1 until the test ends. It returns the server and
// its address.
func Start(t testing.TB, cfg server.Config) (*server.Server, string) {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := server.Open(cfg)
	if err != nil {
		t.Fatalf("open metadata server: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatalf("listen: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s, ln.Addr().String()
}
