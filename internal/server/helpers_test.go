package server

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// openAndServe opens a server on cfg (logging nowhere unless cfg says) and
// serves it on a loopback port until the test ends.
func openAndServe(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return s, ln.Addr().String()
}

// shutdown stops s gracefully, answering what is in flight.
func shutdown(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// dial connects to addr as cred until the test ends. The handshake may
// take long on a machine that runs many test binaries at once.
func dial(t testing.TB, addr string, cred client.Cred) *client.Client {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Cred: &cred, OpTimeout: 10 * time.Second, DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serveOn serves cfg and returns the server and a client acting as root.
func serveOn(t testing.TB, cfg Config) (*Server, *client.Client) {
	t.Helper()
	s, addr := openAndServe(t, cfg)
	return s, dial(t, addr, client.Cred{})
}
