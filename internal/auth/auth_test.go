package auth

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
)

func TestTokenRoundTrip(t *testing.T) {
	text, hash, err := NewToken("tenant-a")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ParseToken(" " + text + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name != "tenant-a" || tok.Hash != hash {
		t.Fatalf("parsed %+v", tok)
	}
	for _, bad := range []string{"", "cnpy.", "cnpy.a.00", text[:len(text)-1], "xnpy" + text[4:], "cnpy.a b." + text[len(text)-64:]} {
		if _, err := ParseToken(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("ParseToken(%q): %v, want ErrBadToken", bad, err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	text, hash, _ := NewToken("a")
	other, _, _ := NewToken("a") // same name, another secret
	c := &Credential{Name: "a", Path: "/", Hash: hash, Expires: 100,
		Addresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	tab := NewTable(c)
	lo := netip.MustParseAddr("127.0.0.1")
	if got, err := tab.Authenticate([]byte(text), lo, 99); err != nil || got != c {
		t.Fatalf("Authenticate: %v, %v", got, err)
	}
	for name, try := range map[string]func() error{
		"wrong secret": func() error { _, err := tab.Authenticate([]byte(other), lo, 1); return err },
		"expired":      func() error { _, err := tab.Authenticate([]byte(text), lo, 100); return err },
		"address":      func() error { _, err := tab.Authenticate([]byte(text), netip.MustParseAddr("10.0.0.1"), 1); return err },
		"revoked":      func() error { _, err := tab.Without("a").Authenticate([]byte(text), lo, 1); return err },
	} {
		if err := try(); !errors.Is(err, ErrBadToken) || !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s: %v, want ErrBadToken", name, err)
		}
	}
	if tab.With(&Credential{Name: "a"}).Current(c) {
		t.Error("a replaced credential is still current")
	}
}

func TestIdentity(t *testing.T) {
	c := &Credential{Name: "a", UIDs: []Range{{1000, 1999}}, GIDs: []Range{{1000, 1999}}, SquashUID: NobodyID, SquashGID: NobodyID}
	if uid, gid, groups, err := c.Identity(0, 0, []uint32{0}); err != nil || uid != NobodyID || gid != NobodyID || groups != nil {
		t.Fatalf("root not squashed: %d %d %v %v", uid, gid, groups, err)
	}
	if uid, _, _, err := c.Identity(1500, 1000, []uint32{1001}); err != nil || uid != 1500 {
		t.Fatalf("uid in range: %d %v", uid, err)
	}
	for _, id := range [][3]uint32{{2000, 1000, 1000}, {1000, 5, 1000}, {1000, 1000, 0}} {
		if _, _, _, err := c.Identity(id[0], id[1], []uint32{id[2]}); !errors.Is(err, ErrIdentity) {
			t.Errorf("identity %v: %v, want ErrIdentity", id, err)
		}
	}
	c.AllowRoot = true
	if uid, gid, _, err := c.Identity(0, 0, nil); err != nil || uid != 0 || gid != 0 {
		t.Fatalf("root allowed: %d %d %v", uid, gid, err)
	}
}

func TestValidateAndRanges(t *testing.T) {
	c := &Credential{Name: "x", Path: "/tenants/a/../b/"}
	if err := c.Validate(); err != nil || c.Path != "/tenants/b" {
		t.Fatalf("Validate: %v, path %q", err, c.Path)
	}
	for _, bad := range []*Credential{{Name: ""}, {Name: "a.b"}, {Name: "a", Path: "rel"}, {Name: "a", UIDs: []Range{{5, 4}}},
		{Name: "a", Admin: true, AllowRoot: true, Path: "/x"}} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	rs, err := ParseRanges("1000-1999, 3000")
	if err != nil || FormatRanges(rs) != "1000-1999,3000" {
		t.Fatalf("ParseRanges: %v %v", rs, err)
	}
	if _, err := ParseRanges("9-1"); err == nil {
		t.Fatal("reversed range parsed")
	}
	ps, err := ParsePrefixes("10.1.2.3/8,::1")
	if err != nil || ps[0].String() != "10.0.0.0/8" || ps[1].String() != "::1/128" {
		t.Fatalf("ParsePrefixes: %v %v", ps, err)
	}
}
