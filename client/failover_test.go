package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// endpoint is a TCP relay in front of a metadata server, standing for one
// of several interchangeable routers: kill closes its listener and every
// connection through it, as a router process dying would.
type endpoint struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	conns   []net.Conn
	served  atomic.Int64 // connections relayed
	wg      sync.WaitGroup
}

func newEndpoint(t *testing.T, backend string) *endpoint {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{ln: ln, backend: backend}
	e.wg.Add(1)
	go e.accept()
	t.Cleanup(e.kill)
	return e
}

func (e *endpoint) addr() string { return e.ln.Addr().String() }

func (e *endpoint) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", e.backend)
		if err != nil {
			c.Close()
			continue
		}
		e.mu.Lock()
		e.conns = append(e.conns, c, b)
		e.mu.Unlock()
		e.served.Add(1)
		e.wg.Add(2)
		go e.pipe(c, b)
		go e.pipe(b, c)
	}
}

func (e *endpoint) pipe(dst, src net.Conn) {
	defer e.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

func (e *endpoint) kill() {
	e.ln.Close()
	e.mu.Lock()
	for _, c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// TestFailoverBetweenEndpoints runs creates from several goroutines through
// two endpoints in front of one partition and kills the one in use: every
// call must succeed (retried on the other endpoint), and every create must
// have been applied exactly once (a create applied twice would fail with
// EEXIST on its retry).
func TestFailoverBetweenEndpoints(t *testing.T) {
	_, backend := servertest.Start(t, server.Config{})
	a, b := newEndpoint(t, backend), newEndpoint(t, backend)
	c, err := client.Dial(a.addr()+","+b.addr(), client.Options{Cred: &client.Cred{}, OpTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const workers, perWorker = 4, 300
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		dir := fmt.Sprintf("/w%d", w)
		if _, err := c.Mkdir(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if _, err := c.Create(ctx, fmt.Sprintf("%s/f%d", dir, i), 0o644); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	for done.Load() < workers*perWorker/4 {
		time.Sleep(time.Millisecond)
	}
	a.kill()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("call failed across the failover: %v", err)
	}
	if b.served.Load() == 0 {
		t.Fatal("no connection moved to the second endpoint")
	}
	for w := range workers {
		ents, err := c.ReadDir(ctx, fmt.Sprintf("/w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != perWorker {
			t.Errorf("/w%d holds %d files, want %d", w, len(ents), perWorker)
		}
	}
	if _, err := c.Create(ctx, "/w0/f0", 0o644); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("create of an existing file after failover: %v, want EEXIST", err)
	}
}

func TestDialListsEveryAddress(t *testing.T) {
	_, backend := servertest.Start(t, server.Config{})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	// The dead address first, the live one in Options.Addrs: Dial finds it.
	c, err := client.Dial(deadAddr+", ", client.Options{Addrs: []string{backend}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Stat(context.Background(), "/"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Dial(" , ", client.Options{}); err == nil {
		t.Fatal("Dial with no address succeeded")
	}
}
