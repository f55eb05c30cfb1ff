package webdav

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/net/webdav"
)

func TestLockSystem(t *testing.T) {
	now := time.Unix(1000, 0)
	s := newLockSystem(func(name string) (string, bool) { return `"tag-` + name + `"`, true })
	a, err := s.create(now, webdav.LockDetails{Root: "/d", Duration: time.Minute}, true)
	if err != nil {
		t.Fatal(err)
	}
	// A second shared lock fits beside the first; an exclusive one on the
	// tree, above or below, does not.
	b, err := s.create(now, webdav.LockDetails{Root: "/d/f", Duration: -1, ZeroDepth: true}, true)
	if err != nil {
		t.Fatalf("second shared lock: %v", err)
	}
	for _, root := range []string{"/d", "/d/f", "/"} {
		if _, err := s.Create(now, webdav.LockDetails{Root: root, Duration: -1}); !errors.Is(err, webdav.ErrLocked) {
			t.Fatalf("exclusive lock on %s over shared ones: %v", root, err)
		}
	}
	if _, err := s.Create(now, webdav.LockDetails{Root: "/other", Duration: -1}); err != nil {
		t.Fatalf("exclusive lock beside them: %v", err)
	}

	// Writing /d/f needs a token of a lock on it; a's covers it.
	if _, err := s.Confirm(now, "/d/f", ""); !errors.Is(err, webdav.ErrConfirmationFailed) {
		t.Fatalf("confirm without a token: %v", err)
	}
	if _, err := s.Confirm(now, "/d/f", "", webdav.Condition{Token: a}); err != nil {
		t.Fatalf("confirm with a: %v", err)
	}
	// Every condition of the list must hold, the entity tag's included.
	if _, err := s.Confirm(now, "/d/f", "", webdav.Condition{Token: b}, webdav.Condition{ETag: `"bogus"`}); err == nil {
		t.Fatal("confirm with a wrong entity tag succeeded")
	}
	if _, err := s.Confirm(now, "/d/f", "", webdav.Condition{Token: b}, webdav.Condition{ETag: `"tag-/d/f"`}); err != nil {
		t.Fatalf("confirm with the right entity tag: %v", err)
	}
	if _, err := s.Confirm(now, "/d/f", "", webdav.Condition{Token: b, Not: true}); err == nil {
		t.Fatal("confirm with Not of a held token succeeded")
	}

	// a expires after its minute; b never does.
	later := now.Add(2 * time.Minute)
	if _, err := s.Refresh(later, a, time.Minute); !errors.Is(err, webdav.ErrNoSuchLock) {
		t.Fatalf("refresh of an expired lock: %v", err)
	}
	if err := s.Unlock(later, b); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(later, b); !errors.Is(err, webdav.ErrNoSuchLock) {
		t.Fatalf("second unlock: %v", err)
	}
	if _, err := s.Confirm(later, "/d/f", ""); err != nil {
		t.Fatalf("confirm once unlocked: %v", err)
	}
}

func TestParseTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"": -1, "Infinite": -1, "Second-30": 30 * time.Second, "Second-5, Infinite": 5 * time.Second} {
		if got, err := parseTimeout(in); err != nil || got != want {
			t.Errorf("parseTimeout(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"Minute-3", "Second-x", "Second--1"} {
		if _, err := parseTimeout(in); err == nil {
			t.Errorf("parseTimeout(%q) accepted", in)
		}
	}
}
