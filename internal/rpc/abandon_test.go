package rpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// Abandon fails the forwarded calls in flight on a connection whose
// server holds them without answering, with the error given, and the
// client works again on a new connection.
func TestAbandonFailsCallsInFlightAndRedials(t *testing.T) {
	checkGoroutines(t)
	h := newHolder()
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if c.Method == 1 {
			c.Reply(0, c.Payload) // answered at once
			return
		}
		h.Serve(c) // held
	}), ServerConfig{})
	c := dial(t, srv.addr, ClientConfig{})
	held := forward(c, ClientID{9}, 1, 7, &Cred{}, []byte("held"))
	call := recv(t, h.calls) // the server has it, and does not answer
	c.Abandon(fmt.Errorf("%w: test", ErrSilent))
	r := recv(t, held)
	if !errors.Is(r.err, ErrSilent) {
		t.Fatalf("forwarded call after Abandon: status %d, err %v; want ErrSilent", r.status, r.err)
	}
	call.Reply(0, nil) // too late: its connection is gone
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, rep, err := c.Call(ctx, 1, Cred{}, []byte("again"))
	if err != nil || st != 0 || string(rep) != "again" {
		t.Fatalf("call after Abandon: status %d reply %q err %v", st, rep, err)
	}
}
