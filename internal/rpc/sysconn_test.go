package rpc

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// sysPair returns the two ends of a loopback TCP connection, the first
// wrapped as connections are (a sysConn, except under the race detector),
// both closed when the test ends.
func sysPair(t *testing.T) (wrapped, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- nc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	wrapped = newSysConn(nc)
	if _, ok := wrapped.(*sysConn); ok != sysConnEnabled {
		t.Fatalf("newSysConn gave a %T", wrapped)
	}
	t.Cleanup(func() { wrapped.Close(); peer.Close() })
	wrapped.SetDeadline(time.Now().Add(bound))
	peer.SetDeadline(time.Now().Add(bound))
	return wrapped, peer
}

// TestSysConnCarriesBytesBothWays writes more than the socket buffers hold
// in both directions at once, so that writes stop part way and wait, and
// checks every byte arrives in order, then that a close reads as io.EOF.
func TestSysConnCarriesBytesBothWays(t *testing.T) {
	const size = 8 << 20
	out := make([]byte, size)
	back := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range out {
		out[i] = byte(rng.Uint32())
		back[i] = byte(rng.Uint32())
	}
	// The connection's deadlines start now, not before the slow part
	// above (slower still under the race detector).
	c, peer := sysPair(t)
	errs := make(chan error, 3)
	go func() { // c writes out in one call
		n, err := c.Write(out)
		if err == nil && n != size {
			err = io.ErrShortWrite
		}
		errs <- err
	}()
	go func() { // peer echoes nothing but writes back, then reads out
		if _, err := peer.Write(back); err != nil {
			errs <- err
			return
		}
		got, err := io.ReadAll(io.LimitReader(peer, size))
		if err == nil && !bytes.Equal(got, out) {
			err = errors.New("peer read different bytes")
		}
		errs <- err
	}()
	got := make([]byte, size)
	_, err := io.ReadFull(c, got) // many reads of what the kernel has
	if err == nil && !bytes.Equal(got, back) {
		err = errors.New("c read different bytes")
	}
	errs <- err
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	peer.Close()
	if n, err := c.Read(got[:1]); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want 0, EOF", n, err)
	}
}

// TestSysConnDeadlinesAndClose: a read with nothing to read ends at its
// deadline and may be retried; a read in progress ends when the connection
// is closed; writes and reads after the close fail.
func TestSysConnDeadlinesAndClose(t *testing.T) {
	c, peer := sysPair(t)
	buf := make([]byte, 16)
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want ErrDeadlineExceeded", err)
	}
	c.SetReadDeadline(time.Now().Add(bound))
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read after the deadline moved: %q, %v", buf[:n], err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := c.Read(buf)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the read wait, most likely
	c.Close()
	if err := recv(t, done); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read across close: %v, want net.ErrClosed", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v, want net.ErrClosed", err)
	}
}

// TestSysConnWriteToClosedPeer: writing to a connection the peer has reset
// fails instead of reporting success.
func TestSysConnWriteToClosedPeer(t *testing.T) {
	c, peer := sysPair(t)
	peer.(*net.TCPConn).SetLinger(0) // close with a reset
	peer.Close()
	chunk := make([]byte, 64<<10)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		_, err = c.Write(chunk)
	}
	if err == nil {
		t.Fatal("writes to a reset connection kept succeeding")
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("write error %v (%T) is not a *net.OpError", err, err)
	}
}
