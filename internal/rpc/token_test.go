package rpc

import (
	"errors"
	"net"
	"testing"
)

func TestHelloCarriesToken(t *testing.T) {
	in := hello{version: protocolVersion, client: ClientID{1}, secret: []byte("s"), codecs: AllCodecs, token: []byte("tok")}
	h, err := decodeHello(body(t, appendHello(nil, &in)))
	if err != nil {
		t.Fatal(err)
	}
	if string(h.token) != "tok" || string(h.secret) != "s" || h.codecs != AllCodecs {
		t.Fatalf("decoded %+v, want %+v", h, in)
	}
	// A version 3 hello has no token, and no room for one.
	in.version = 3
	if h, err = decodeHello(body(t, appendHello(nil, &in))); err != nil || h.token != nil {
		t.Fatalf("version 3 hello: %+v, %v", h, err)
	}
	// A token length that disagrees with the frame is malformed.
	in.version = protocolVersion
	b := appendHello(nil, &in)
	b = b[:len(b)-1]
	b[0]-- // the frame's length
	if _, err := decodeHello(body(t, b)); !errors.Is(err, errMalformed) {
		t.Fatalf("short token decoded: %v", err)
	}
}

func TestAuthenticateBindsIdentity(t *testing.T) {
	checkGoroutines(t)
	idents := make(chan any, 4)
	srv := startServer(t, HandlerFunc(func(c *Call) { idents <- c.Identity; c.Reply(0, nil) }), ServerConfig{
		Authenticate: func(token []byte, remote net.Addr) (any, error) {
			if string(token) != "good" {
				return nil, errors.New("unknown token")
			}
			return "holder of good", nil
		},
	})
	for _, token := range []string{"bad", ""} {
		if _, err := Dial(srv.addr, ClientConfig{Token: token, Logger: quietLogger()}); !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("Dial with token %q: %v, want ErrUnauthenticated", token, err)
		}
	}
	cl := dial(t, srv.addr, ClientConfig{Token: "good"})
	if _, _, err := cl.Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, idents); got != "holder of good" {
		t.Fatalf("call's identity %v", got)
	}
}

func TestForwardedCallCarriesToken(t *testing.T) {
	from := &origin{client: ClientID{7}, id: 9, token: []byte("client-token")}
	f, err := decodeFrame(body(t, appendCallFrom(nil, 1, 3, 0, from, &Cred{UID: 5}, []byte("p"))))
	if err != nil {
		t.Fatal(err)
	}
	if f.flags&flagToken == 0 || string(f.token) != "client-token" || f.origin != from.client || f.originID != 9 ||
		f.cred.UID != 5 || string(f.payload) != "p" {
		t.Fatalf("decoded %+v", f)
	}
	// A token flag without a forwarded origin is malformed.
	b := body(t, appendCall(nil, 1, 3, 0, &Cred{}, nil))
	b[1] |= flagToken
	if _, err := decodeFrame(b); !errors.Is(err, errMalformed) {
		t.Fatalf("token flag without origin: %v", err)
	}
}
