package rpc

import (
	"testing"
)

// OnClientGone fires once per client, when the last of its connections
// closes, after the calls it read were handed to the handler; a refused
// handshake never counts.
func TestOnClientGone(t *testing.T) {
	gone := make(chan ClientID, 4)
	handled := make(chan ClientID, 4)
	ts := startServer(t, HandlerFunc(func(c *Call) {
		handled <- c.Client
		c.Reply(0, nil)
	}), ServerConfig{Secret: "s", OnClientGone: func(id ClientID) { gone <- id }})

	id := ClientID{1, 2, 3}
	a := dial(t, ts.addr, ClientConfig{Secret: "s", ClientID: id})
	b := dial(t, ts.addr, ClientConfig{Secret: "s", ClientID: id})
	for _, c := range []*Client{a, b} {
		if _, _, err := c.Call(testCtx(t), 7, Cred{}, nil); err != nil {
			t.Fatal(err)
		}
		recv(t, handled)
	}
	if _, err := Dial(ts.addr, ClientConfig{Secret: "wrong", ClientID: ClientID{9}, Logger: quietLogger(), MaxRetries: -1}); err == nil {
		t.Fatal("dial with a wrong secret succeeded")
	}
	a.Close()
	waitFor(t, "the first connection to close", func() bool { return ts.numConns() == 1 })
	select {
	case got := <-gone:
		t.Fatalf("client %v reported gone while it still has a connection", got)
	default:
	}
	b.Close()
	if got := recv(t, gone); got != id {
		t.Fatalf("gone %v, want %v", got, id)
	}
	waitFor(t, "every connection to close", func() bool { return ts.numConns() == 0 })
	select {
	case got := <-gone:
		t.Fatalf("second report, for %v", got)
	default:
	}
}
