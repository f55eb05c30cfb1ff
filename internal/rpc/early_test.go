package rpc

import (
	"errors"
	"testing"
)

// TestEarlyCallsAreMarked: a client configured Early marks its own calls,
// one that is not leaves them unmarked, and the mark is refused on a reply.
func TestEarlyCallsAreMarked(t *testing.T) {
	checkGoroutines(t)
	srv := startServer(t, HandlerFunc(func(c *Call) {
		if c.Early {
			c.Reply(0, []byte("early"))
			return
		}
		c.Reply(0, []byte("strict"))
	}), ServerConfig{})
	for _, tc := range []struct {
		early bool
		want  string
	}{{true, "early"}, {false, "strict"}} {
		cl := dial(t, srv.addr, ClientConfig{Early: tc.early})
		// Twice: once written by the caller, once after the first reply.
		for range 2 {
			_, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("p"))
			if err != nil {
				t.Fatal(err)
			}
			if string(reply) != tc.want {
				t.Fatalf("Early %v: server saw a %s call", tc.early, reply)
			}
		}
	}
	// A call's own mark wins over the client's: both ways, and the
	// client's calls after it keep the client's.
	for _, tc := range []struct {
		early bool
		mark  Mark
		want  string
	}{{true, MarkDurable, "strict"}, {false, MarkEarly, "early"}, {true, MarkEarly, "early"}, {false, MarkDurable, "strict"}} {
		cl := dial(t, srv.addr, ClientConfig{Early: tc.early})
		_, reply, err := cl.CallMarked(testCtx(t), 1, Cred{}, []byte("p"), tc.mark)
		if err != nil {
			t.Fatal(err)
		}
		if string(reply) != tc.want {
			t.Fatalf("Early %v, mark %d: server saw a %s call", tc.early, tc.mark, reply)
		}
		_, reply, err = cl.Call(testCtx(t), 1, Cred{}, []byte("p"))
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "early", false: "strict"}[tc.early]; string(reply) != want {
			t.Fatalf("Early %v: after a marked call the server saw a %s call", tc.early, reply)
		}
	}
	b := body(t, appendReply(nil, 1, 3, 0, flagEarly, nil))
	if _, err := decodeFrame(b); !errors.Is(err, errMalformed) {
		t.Fatalf("early flag on a reply: %v", err)
	}
	// A version 4 connection may not carry the mark.
	c := &conn{version: 4}
	call := appendCall(nil, 1, 3, flagEarly, &Cred{}, nil)
	var owned bool
	if _, err := c.decode(call[lenSize:], &owned); !errors.Is(err, errMalformed) {
		t.Fatalf("early call on a version 4 connection: %v", err)
	}
}
