package rpc

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

type forwardResult struct {
	status uint32
	reply  []byte
	err    error
}

func forward(c *Client, from ClientID, id uint64, method uint16, cred *Cred, req []byte) <-chan forwardResult {
	ch := make(chan forwardResult, 1)
	c.Forward(nil, from, id, method, cred, req, func(status uint32, reply []byte, err error, _ *Batch) {
		ch <- forwardResult{status, reply, err}
	})
	return ch
}

// A forwarded call reaches the handler as the original caller's, and its
// reply comes back to the forwarder whatever the order of replies.
func TestForwardKeepsOriginalIdentity(t *testing.T) {
	checkGoroutines(t)
	var log attemptLog
	h := newHolder()
	srv := startServer(t, HandlerFunc(func(c *Call) { log.add(c); h.Serve(c) }), ServerConfig{})
	c := dial(t, srv.addr, ClientConfig{})

	origin := ClientID{1, 2, 3}
	const n = 50
	results := make([]<-chan forwardResult, n)
	for i := range n {
		payload := []byte(fmt.Sprint("call ", i))
		results[i] = forward(c, origin, uint64(1000+i), 7, &Cred{UID: uint32(i), Groups: []uint32{5}}, payload)
	}
	// Answer in reverse order, with each call's own identity in the reply.
	held := make([]*Call, n)
	for i := range n {
		held[i] = recv(t, h.calls)
	}
	for i := n - 1; i >= 0; i-- {
		call := held[i]
		if call.Client != origin || call.Cred.Groups[0] != 5 {
			t.Fatalf("call from %v with cred %+v; want %v", call.Client, call.Cred, origin)
		}
		call.Reply(uint32(call.Cred.UID), []byte(fmt.Sprint(call.ID, " ", string(call.Payload))))
	}
	for i := range n {
		r := recv(t, results[i])
		if r.err != nil {
			t.Fatalf("forward %d: %v", i, r.err)
		}
		want := fmt.Sprint(1000+i, " call ", i)
		if r.status != uint32(i) || !bytes.Equal(r.reply, []byte(want)) {
			t.Fatalf("forward %d: status %d reply %q, want %d %q", i, r.status, r.reply, i, want)
		}
	}
	// The forwarder's own calls keep its own identity on the same
	// connection.
	go func() { call := recv(t, h.calls); call.Reply(0, nil) }()
	if _, _, err := c.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	seen := log.get()
	if last := seen[len(seen)-1]; last.client != c.ID() {
		t.Fatalf("own call seen from %v, want %v", last.client, c.ID())
	}
}

// A forwarded call whose connection breaks is answered with an error, and
// the next one finds the connection redialed.
func TestForwardConnectionLost(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if c.ID == 1 {
			h.Serve(c) // never answered
		} else {
			c.Reply(0, nil)
		}
	}), ServerConfig{})
	c := dial(t, srv.addr, ClientConfig{})
	ch := forward(c, ClientID{9}, 1, 1, &Cred{}, nil)
	held := recv(t, h.calls)
	srv.ln.killAll()
	if r := recv(t, ch); r.err == nil {
		t.Fatalf("forward over a killed connection: status %d, no error", r.status)
	}
	held.Reply(0, nil) // dropped: its connection is gone
	waitFor(t, "the connection to be redialed", func() bool {
		r := recv(t, forward(c, ClientID{9}, 2, 1, &Cred{}, nil))
		if r.err != nil {
			if !errors.Is(r.err, ErrNoConnection) && !errors.Is(r.err, errMalformed) {
				t.Logf("forward: %v", r.err)
			}
			return false
		}
		return true
	})
}

// A server never takes a forwarded call on a connection that did not
// negotiate version 3.
func TestForwardedFlagNeedsVersion3(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, echo, ServerConfig{})
	nc := rawConn(t, srv.addr)
	if w := rawHandshake(t, nc, hello{version: 2}); w.status != StatusOK {
		t.Fatalf("welcome %+v", w)
	}
	nc.Write(appendCallFrom(nil, 1, 1, 0, &origin{id: 5}, &Cred{}, nil))
	expectClosed(t, nc)
}
