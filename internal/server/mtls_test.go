package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/router"
)

// testPKI is a CA made in the test and what it signs.
type testPKI struct {
	t    *testing.T
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	n    int64
}

func newPKI(t *testing.T) *testPKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "canopy test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{t: t, ca: ca, key: key, pool: pool, n: 1}
}

// issue returns a certificate signed by the CA for a server (on
// 127.0.0.1) or a client.
func (p *testPKI) issue(name string, server bool) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	p.n++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.n), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		p.t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestMutualTLSCredential: a client certificate named by a credential
// authenticates as it, without a token: the credential's read-only and
// uid range hold; a certificate no credential names, and a client with
// none, are refused where tokens are required; a removed credential
// stops its certificate on the open connection.
func TestMutualTLSCredential(t *testing.T) {
	ctx := context.Background()
	pki := newPKI(t)
	srvCert := pki.issue("metadata server", true)
	cfg := Config{Dir: t.TempDir(), TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pki.pool}}
	srv, addr := openAndServe(t, cfg)
	clientTLS := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{RootCAs: pki.pool, Certificates: certs, MinVersion: tls.VersionTLS13}
	}
	admin, err := client.Dial(addr, client.Options{TLS: clientTLS(), Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Mkdir(ctx, "/d", 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Chmod(ctx, "/d", 0o777); err != nil {
		t.Fatal(err)
	}
	alice, bob, mallory := pki.issue("alice", false), pki.issue("bob", false), pki.issue("mallory", false)
	fp := func(c tls.Certificate) string { f := auth.Fingerprint(c.Leaf); return hex.EncodeToString(f[:]) }
	if _, _, err := admin.AddCredential(ctx, client.Credential{Name: "alice", UIDs: "1000-1999", GIDs: "1000-1999", CertSHA256: fp(alice)}); err != nil {
		t.Fatal(err)
	}
	_, cr, err := admin.AddCredential(ctx, client.Credential{Name: "bob", ReadOnly: true, AllowRoot: true, CertSHA256: fp(bob)})
	if err != nil {
		t.Fatal(err)
	}
	if cr.CertSHA256 != fp(bob) {
		t.Errorf("credential's fingerprint %q, want %q", cr.CertSHA256, fp(bob))
	}
	srv.RequireTokens()

	dial := func(cred client.Cred, certs ...tls.Certificate) (*client.Client, error) {
		c, err := client.Dial(addr, client.Options{TLS: clientTLS(certs...), Cred: &cred, OpTimeout: 5 * time.Second})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	a, err := dial(client.Cred{UID: 1500, GID: 1500}, alice)
	if err != nil {
		t.Fatalf("dial with alice's certificate: %v", err)
	}
	if _, err := a.Mkdir(ctx, "/d/alice", 0o755); err != nil {
		t.Fatalf("mkdir under alice's credential: %v", err)
	}
	if who, err := a.Whoami(ctx); err != nil || who.Name != "alice" {
		t.Errorf("whoami with alice's certificate: %+v, %v", who, err)
	}
	a2500, err := dial(client.Cred{UID: 2500, GID: 1500}, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a2500.Mkdir(ctx, "/d/x", 0o755); !errors.Is(err, syscall.EPERM) {
		t.Errorf("uid outside alice's range: %v, want EPERM", err)
	}
	b, err := dial(client.Cred{}, bob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "/d/alice"); err != nil {
		t.Errorf("stat under bob's read-only credential: %v", err)
	}
	if _, err := b.Mkdir(ctx, "/d/bob", 0o755); !errors.Is(err, syscall.EACCES) {
		t.Errorf("mkdir under bob's read-only credential: %v, want EACCES", err)
	}
	if _, err := dial(client.Cred{}, mallory); err == nil {
		t.Error("a certificate no credential names was admitted where tokens are required")
	}
	if _, err := dial(client.Cred{}); err == nil {
		t.Error("a client with neither certificate nor token was admitted where tokens are required")
	}
	// The admin's connection predates RequireTokens and stays open.
	if err := admin.RemoveCredential(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Stat(ctx, "/d"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("alice's certificate after her credential was removed: %v, want EACCES", err)
	}
}

// TestMutualTLSThroughRouter: a router whose listener verifies client
// certificates passes each one on; the partition binds the client's calls
// to the credential that names the certificate, with its checks (uid
// range, read-only, revocation), and refuses a certificate no credential
// names.
func TestMutualTLSThroughRouter(t *testing.T) {
	ctx := context.Background()
	pki := newPKI(t)
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	admin := dial(t, addr, client.Cred{})
	if _, err := admin.Mkdir(ctx, "/d", 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Chmod(ctx, "/d", 0o777); err != nil {
		t.Fatal(err)
	}
	alice, bob, mallory := pki.issue("alice", false), pki.issue("bob", false), pki.issue("mallory", false)
	fp := func(c tls.Certificate) string { f := auth.Fingerprint(c.Leaf); return hex.EncodeToString(f[:]) }
	for _, cr := range []client.Credential{
		{Name: "alice", UIDs: "1000-1999", GIDs: "1000-1999", CertSHA256: fp(alice)},
		{Name: "bob", ReadOnly: true, AllowRoot: true, CertSHA256: fp(bob)},
	} {
		if _, _, err := admin.AddCredential(ctx, cr); err != nil {
			t.Fatal(err)
		}
	}
	routerToken, _, err := admin.AddCredential(ctx, client.Credential{Name: "router", Router: true, AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := router.Start(ctx, router.Config{Listen: "127.0.0.1:0", Root: []string{addr}, Token: routerToken,
		TLS: &tls.Config{Certificates: []tls.Certificate{pki.issue("router", true)}, MinVersion: tls.VersionTLS13,
			ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: pki.pool},
		Logger: slog.New(slog.DiscardHandler), TablesWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	dialR := func(cred client.Cred, cert tls.Certificate) *client.Client {
		c, err := client.Dial(r.Addr(), client.Options{Cred: &cred, OpTimeout: 5 * time.Second,
			TLS: &tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}})
		if err != nil {
			t.Fatalf("dial the router with %s's certificate: %v", cert.Leaf.Subject.CommonName, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a := dialR(client.Cred{UID: 1500, GID: 1500}, alice)
	if who, err := a.Whoami(ctx); err != nil || who.Name != "alice" {
		t.Errorf("whoami through the router with alice's certificate: %+v, %v", who, err)
	}
	if _, err := a.Mkdir(ctx, "/d/alice", 0o755); err != nil {
		t.Fatalf("mkdir under alice's credential through the router: %v", err)
	}
	if fi, err := admin.Stat(ctx, "/d/alice"); err != nil || fi.Attr().UID != 1500 {
		t.Errorf("alice's directory: %+v, %v", fi, err)
	}
	if _, err := dialR(client.Cred{UID: 2500, GID: 1500}, alice).Mkdir(ctx, "/d/x", 0o755); !errors.Is(err, syscall.EPERM) {
		t.Errorf("uid outside alice's range through the router: %v, want EPERM", err)
	}
	b := dialR(client.Cred{}, bob)
	if _, err := b.Stat(ctx, "/d/alice"); err != nil {
		t.Errorf("stat under bob's read-only credential through the router: %v", err)
	}
	if _, err := b.Mkdir(ctx, "/d/bob", 0o755); !errors.Is(err, syscall.EACCES) {
		t.Errorf("mkdir under bob's read-only credential through the router: %v, want EACCES", err)
	}
	if _, err := dialR(client.Cred{}, mallory).Stat(ctx, "/d"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("a certificate no credential names, through the router: %v, want EACCES", err)
	}
	if err := admin.RemoveCredential(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Stat(ctx, "/d"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("alice's certificate through the router after her credential was removed: %v, want EACCES", err)
	}
}
