package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key as PEM files and returns their paths.
func writeSelfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "canopy test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return certFile, keyFile
}

// TestSecretAndTLS serves with a shared secret over TLS and checks that
// the file commands get through only with the right secret and the
// server's certificate.
func TestSecretAndTLS(t *testing.T) {
	certFile, keyFile := writeSelfSigned(t)
	tlsCfg, err := serverTLS(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	_, addr := servertest.Start(t, server.Config{Secret: "s3cret", TLS: tlsCfg})

	if _, err := canopy(t, addr, "--secret", "s3cret", "--tls-ca", certFile, "mkdir", "/ok"); err != nil {
		t.Fatalf("right secret, trusted certificate: %v", err)
	}
	if _, err := canopy(t, addr, "--secret", "wrong", "--tls-ca", certFile, "mkdir", "/no"); !errors.Is(err, rpc.ErrUnauthenticated) {
		t.Errorf("wrong secret: %v, want an authentication error", err)
	}
	if _, err := canopy(t, addr, "--secret", "s3cret", "--timeout", "2s", "mkdir", "/no"); err == nil {
		t.Error("plain TCP against a TLS server succeeded")
	}
	if _, err := canopy(t, addr, "--secret", "s3cret", "--tls-insecure", "stat", "/ok"); err != nil {
		t.Errorf("--tls-insecure: %v", err)
	}
	out, err := canopy(t, addr, "--secret", "s3cret", "--tls-ca", certFile, "ls", "/")
	if err != nil || strings.TrimSpace(out) != "ok" {
		t.Errorf("ls / = %q, %v; want only ok (the refused mkdirs must not have run)", out, err)
	}
}
