package auth

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseToken: any text parses or fails with ErrBadToken, never
// panics, and what parses names a valid credential and formats back to
// the same token (hex in lower case).
func FuzzParseToken(f *testing.F) {
	text, _, _ := NewToken("tenant-a")
	f.Add(text)
	f.Add("cnpy.a." + strings.Repeat("0", 64))
	f.Add("cnpy..")
	f.Add("cnpy.a.b." + strings.Repeat("f", 64))
	f.Add(" \tcnpy.x." + strings.Repeat("A", 64) + "\n")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("ParseToken(%q): %v is not ErrBadToken", s, err)
			}
			return
		}
		if !ValidName(tok.Name) {
			t.Fatalf("ParseToken(%q) named %q", s, tok.Name)
		}
		trimmed := strings.TrimSpace(s)
		if !strings.HasPrefix(trimmed, "cnpy."+tok.Name+".") || len(trimmed) != len("cnpy.")+len(tok.Name)+1+64 {
			t.Fatalf("ParseToken(%q) = %+v", s, tok)
		}
	})
}

// A certificate token parses only in the form CertToken makes, back to
// the fingerprint it was made of, and is never a token a hello may
// present.
func FuzzParseCertToken(f *testing.F) {
	var fp [32]byte
	fp[0], fp[31] = 0xab, 0x01
	f.Add(CertToken(fp))
	f.Add([]byte("cnpy-cert."))
	f.Add([]byte("cnpy-cert." + strings.Repeat("g", 64)))
	f.Add([]byte("cnpy.a." + strings.Repeat("0", 64)))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := ParseCertToken(b)
		if !ok {
			return
		}
		if again := CertToken(got); !strings.EqualFold(string(again), string(b)) {
			t.Fatalf("ParseCertToken(%q) = %x, which makes %q", b, got, again)
		}
		if _, err := ParseToken(string(b)); err == nil {
			t.Fatalf("certificate token %q parses as a token", b)
		}
	})
}
