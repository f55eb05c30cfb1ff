package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// TestClientCertificateCredential: a server given --tls-client-ca binds a
// client that presents a certificate named by a credential (auth add
// --cert-sha256) to it, without a token: here a read-only one.
func TestClientCertificateCredential(t *testing.T) {
	srvCert, srvKey := writeSelfSigned(t)
	cliCert, cliKey := writeSelfSigned(t)
	tlsClientCA = cliCert
	tlsCfg, err := serverTLS(srvCert, srvKey)
	tlsClientCA = ""
	if err != nil {
		t.Fatal(err)
	}
	_, addr := servertest.Start(t, server.Config{TLS: tlsCfg})
	data, err := os.ReadFile(cliCert)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	fp := sha256.Sum256(block.Bytes)
	mustCanopy(t, addr, "--tls-ca", srvCert, "mkdir", "/d")
	mustCanopy(t, addr, "--tls-ca", srvCert, "auth", "add", "reader", "--read-only", "--allow-root", "--cert-sha256", hex.EncodeToString(fp[:]))
	if out := mustCanopy(t, addr, "--tls-ca", srvCert, "auth", "show", "reader"); !strings.Contains(out, hex.EncodeToString(fp[:])) {
		t.Errorf("auth show does not give the fingerprint: %s", out)
	}
	withCert := []string{"--tls-ca", srvCert, "--tls-client-cert", cliCert, "--tls-client-key", cliKey}
	mustCanopy(t, addr, append(withCert, "stat", "/d")...)
	if _, err := canopy(t, addr, append(withCert, "mkdir", "/d/x")...); !errors.Is(err, syscall.EACCES) {
		t.Errorf("mkdir with the read-only credential's certificate: %v, want EACCES", err)
	}
	mustCanopy(t, addr, "--tls-ca", srvCert, "mkdir", "/d/y") // without the certificate: no credential, as before
}
