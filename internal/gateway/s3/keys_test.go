package s3

import (
	"strings"
	"testing"
)

func TestParseKeys(t *testing.T) {
	k, err := ParseKeys(strings.NewReader("# comment\n\nA1 s1\nA2 s2 1000\nA3 s3 1000:2000\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := k.cred("A1"); ok {
		t.Error("a key without uid has an identity of its own")
	}
	if c, ok := k.cred("A2"); !ok || c.UID != 1000 || c.GID != 1000 {
		t.Errorf("A2 acts as %+v (%v), want uid and gid 1000", c, ok)
	}
	if c, ok := k.cred("A3"); !ok || c.UID != 1000 || c.GID != 2000 {
		t.Errorf("A3 acts as %+v (%v), want 1000:2000", c, ok)
	}
	if a, err := (iam{k}).GetUserAccount("A3"); err != nil || a.Secret != "s3" || a.UserID != 1000 || a.GroupID != 2000 {
		t.Errorf("account of A3: %+v, %v", a, err)
	}
	if _, err := (iam{k}).GetUserAccount("nope"); err == nil {
		t.Error("an unknown key has an account")
	}
	for _, bad := range []string{"onlyone\n", "A s x\n", "A s 1:y\n", "A s\nA t\n", "A s 1 extra\n"} {
		if _, err := ParseKeys(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
		}
	}
}
