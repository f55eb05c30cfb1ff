package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// Client certificates as an alternative to tokens. A credential may name
// the SHA-256 fingerprint of a client certificate's DER; a client that
// presents that certificate in a TLS handshake the server verified (its
// chain leads to the server's client CA) and no token is bound to the
// credential, as if it had presented the credential's token.

// HasCert reports whether c names a client certificate.
func (c *Credential) HasCert() bool { return c.Cert != [sha256.Size]byte{} }

// Fingerprint returns the SHA-256 of cert's DER, as a credential names it.
func Fingerprint(cert *x509.Certificate) [sha256.Size]byte { return sha256.Sum256(cert.Raw) }

// ParseFingerprint parses a fingerprint written in hex, with or without
// colons between the bytes ("ab:cd:..." as openssl prints it).
func ParseFingerprint(s string) ([sha256.Size]byte, error) {
	var fp [sha256.Size]byte
	b, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(s), ":", ""))
	if err != nil || len(b) != sha256.Size {
		return fp, fmt.Errorf("%w: certificate fingerprint %q (want 32 bytes in hex)", ErrInvalid, s)
	}
	copy(fp[:], b)
	return fp, nil
}

// AuthenticateCert returns the credential that names the certificate
// cert, presented from addr at time now, or ErrBadToken. The fingerprints
// are compared in constant time.
func (t *Table) AuthenticateCert(cert *x509.Certificate, addr netip.Addr, now int64) (*Credential, error) {
	return t.AuthenticateFingerprint(Fingerprint(cert), cert.Subject.String(), addr, now)
}

// AuthenticateFingerprint is AuthenticateCert for the certificate whose
// fingerprint is fp (subject names it in errors).
func (t *Table) AuthenticateFingerprint(fp [sha256.Size]byte, subject string, addr netip.Addr, now int64) (*Credential, error) {
	var found *Credential
	if t != nil {
		for _, c := range t.byName {
			if c.HasCert() && subtle.ConstantTimeCompare(c.Cert[:], fp[:]) == 1 {
				found = c
			}
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: no credential names certificate %q", ErrBadToken, subject)
	}
	if !found.Live(now) {
		return nil, fmt.Errorf("%w: credential %q expired", ErrBadToken, found.Name)
	}
	if !found.AllowsAddr(addr) {
		return nil, fmt.Errorf("%w: credential %q not allowed from %v", ErrBadToken, found.Name, addr)
	}
	return found, nil
}

// Through a router. A router that verified a client's certificate passes
// the client on with a certificate token in place of a token: the prefix
// and the certificate's fingerprint in hex. A partition believes one only
// from a connection bound to a router credential (as any token passed
// on), and finds the credential by the fingerprint; a certificate token
// is never a token a hello may present (ParseToken refuses it).

// certTokenPrefix starts a certificate token.
const certTokenPrefix = "cnpy-cert."

// CertToken returns the certificate token of the certificate whose
// fingerprint is fp.
func CertToken(fp [sha256.Size]byte) []byte {
	return []byte(certTokenPrefix + hex.EncodeToString(fp[:]))
}

// ParseCertToken returns the fingerprint of a certificate token, and
// false for anything else.
func ParseCertToken(tok []byte) ([sha256.Size]byte, bool) {
	var fp [sha256.Size]byte
	s, ok := strings.CutPrefix(string(tok), certTokenPrefix)
	if !ok || len(s) != 2*sha256.Size {
		return fp, false
	}
	if _, err := hex.Decode(fp[:], []byte(s)); err != nil {
		return fp, false
	}
	return fp, true
}
