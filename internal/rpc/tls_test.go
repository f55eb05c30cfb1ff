package rpc

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// testTLS returns a server config with a fresh self-signed certificate for
// 127.0.0.1, and a client config that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "canopy test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		MinVersion:   tls.VersionTLS13,
	}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client
}

func TestTLS(t *testing.T) {
	checkGoroutines(t)
	serverTLS, clientTLS := testTLS(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(StatusOK, c.Payload) }),
		ServerConfig{TLS: serverTLS, Secret: "s"})

	// The client checks the certificate against 127.0.0.1, the host it
	// dials, and everything works as over plain TCP, compression included.
	cl := dial(t, srv.addr, ClientConfig{TLS: clientTLS, Secret: "s"})
	if _, ok := cl.cur.Load().nc.(*tls.Conn); !ok {
		t.Fatal("client connection is not TLS")
	}
	for _, req := range [][]byte{[]byte("over tls"), compressible(1 << 20)} {
		if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, req); err != nil || !bytes.Equal(reply, req) {
			t.Fatalf("call over TLS: %d bytes back, %v", len(reply), err)
		}
	}
	if cl.codec() != CodecS2 {
		t.Fatalf("codec %v over TLS, want s2", cl.codec())
	}

	// Redials are TLS too.
	srv.ln.killAll()
	waitFor(t, "server to drop the connection", func() bool { return srv.numConns() == 0 })
	if _, reply, err := cl.Call(testCtx(t), 1, Cred{}, []byte("again")); err != nil || string(reply) != "again" {
		t.Fatalf("call after a redial: %q, %v", reply, err)
	}

	t.Run("plaintext client", func(t *testing.T) {
		_, err := Dial(srv.addr, ClientConfig{Secret: "s", Logger: quietLogger(), DialTimeout: bound})
		if err == nil {
			t.Fatal("plaintext client got through to a TLS server")
		}
		t.Logf("plaintext client: %v", err)
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		_, err := Dial(srv.addr, ClientConfig{Secret: "s", TLS: &tls.Config{MinVersion: tls.VersionTLS13}, Logger: quietLogger()})
		var verr *tls.CertificateVerificationError
		if !errors.As(err, &verr) {
			t.Fatalf("Dial with an untrusted certificate: %v, want a certificate verification error", err)
		}
	})
	t.Run("wrong server name", func(t *testing.T) {
		cfg := clientTLS.Clone()
		cfg.ServerName = "elsewhere.example"
		_, err := Dial(srv.addr, ClientConfig{Secret: "s", TLS: cfg, Logger: quietLogger()})
		var verr *tls.CertificateVerificationError
		if !errors.As(err, &verr) {
			t.Fatalf("Dial naming another server: %v, want a certificate verification error", err)
		}
	})
	if n := served.Load(); n != 3 {
		t.Fatalf("server served %d calls, want the TLS client's 3", n)
	}
	waitFor(t, "refused connections to go", func() bool { return srv.numConns() == 1 })
}

// A plaintext hello sent to a TLS server gets the connection closed, not
// served; the server answers TLS clients still.
func TestTLSServerRefusesPlaintext(t *testing.T) {
	checkGoroutines(t)
	serverTLS, clientTLS := testTLS(t)
	var served atomic.Int32
	srv := startServer(t, HandlerFunc(func(c *Call) { served.Add(1); c.Reply(StatusOK, nil) }),
		ServerConfig{TLS: serverTLS})
	nc := rawConn(t, srv.addr)
	if _, err := nc.Write(appendHello(nil, &hello{version: protocolVersion})); err != nil {
		t.Fatal(err)
	}
	nc.Write(appendCall(nil, 1, 1, 0, &Cred{}, nil)) // may fail: the server is closing
	expectClosed(t, nc)
	if _, _, err := dial(t, srv.addr, ClientConfig{TLS: clientTLS}).Call(testCtx(t), 1, Cred{}, nil); err != nil {
		t.Fatal(err)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("served %d calls, want 1", n)
	}
}

// A TLS client fails cleanly against a plaintext server.
func TestTLSClientPlaintextServer(t *testing.T) {
	checkGoroutines(t)
	_, clientTLS := testTLS(t)
	srv := startServer(t, echo, ServerConfig{})
	_, err := Dial(srv.addr, ClientConfig{TLS: clientTLS, Logger: quietLogger(), DialTimeout: bound})
	if err == nil {
		t.Fatal("TLS client got through to a plaintext server")
	}
	t.Logf("TLS client: %v", err)
	waitFor(t, "the refused connection to go", func() bool { return srv.numConns() == 0 })
}
