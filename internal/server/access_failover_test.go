package server

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// TestScopedInodeCallsAfterFailover: a client scoped to /tenants/a looks
// files up by path at the leader of a group of three; the leader is
// stopped. At the new leader, which showed the client nothing, its inode
// calls (getattr, setattr, xattr, open, readdir, lock) on the inside
// nodes it learned work at once, and the same calls on the inode numbers
// of an outside file and directory (learned from another client) are
// still refused with EACCES.
func TestScopedInodeCallsAfterFailover(t *testing.T) {
	g := newGroupOf(&group{t: t, srvs: make([]*Server, 3), locks: 2 * time.Second}) // a grace period of 1 s
	lead := g.leader()
	var addrs []string
	for _, p := range g.peers {
		addrs = append(addrs, p.Addr)
	}
	all := strings.Join(addrs, ",")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := dial(t, all, client.Cred{})
	for _, d := range []string{"/tenants/a/dir", "/outside/dir"} {
		if err := root.MkdirAll(ctx, d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"/tenants/a/dir/file", "/outside/secret"} {
		if _, err := root.Create(ctx, f, 0o666); err != nil {
			t.Fatal(err)
		}
		if _, err := root.Chown(ctx, f, 1500, 1500); err != nil {
			t.Fatal(err)
		}
	}
	secret, err := root.Stat(ctx, "/outside/secret")
	if err != nil {
		t.Fatal(err)
	}
	outDir, err := root.Stat(ctx, "/outside/dir")
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := root.AddCredential(ctx, client.Credential{Name: "tenant-a", Path: "/tenants/a", AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	sc := mustDialToken(t, all, token, client.Cred{UID: 1500, GID: 1500})
	file, err := sc.Stat(ctx, "/dir/file")
	if err != nil {
		t.Fatal(err)
	}
	dir, err := sc.Stat(ctx, "/dir")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.GetAttr(ctx, secret.Ino()); err == nil {
		t.Fatal("getattr of the outside file before the failover succeeded")
	}

	g.stop(lead)
	g.leader()
	lk := client.Lock{Type: client.WriteLock, End: client.LockEOF}
	inside := map[string]func(client.Ino) error{
		"getattr": func(ino client.Ino) error { _, err := sc.GetAttr(ctx, ino); return err },
		"setattr": func(ino client.Ino) error {
			_, err := sc.SetAttrIno(ctx, ino, client.SetAttr{Valid: client.SetMode, Mode: 0o640})
			return err
		},
		"setxattr": func(ino client.Ino) error { return sc.SetXattrIno(ctx, ino, "user.k", []byte("v"), 0) },
		"open": func(ino client.Ino) error {
			if _, err := sc.OpenIno(ctx, ino, uint32(syscall.O_RDONLY)); err != nil {
				return err
			}
			return sc.CloseIno(ctx, ino)
		},
		"setlk": func(ino client.Ino) error {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				// EAGAIN until the new leader's grace period ends.
				if err := sc.SetLk(ctx, ino, 1, lk); !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
					return err
				}
			}
		},
	}
	for name, call := range inside {
		if err := call(file.Ino()); err != nil {
			t.Errorf("%s of the inside file right after the failover: %v", name, err)
		}
		if err := call(secret.Ino()); err == nil || !strings.Contains(err.Error(), syscall.EACCES.Error()) {
			t.Errorf("%s of the outside file after the failover: %v, want EACCES", name, err)
		}
	}
	if _, _, _, err := sc.ReadDirIno(ctx, dir.Ino(), "", 100, false); err != nil {
		t.Errorf("readdir of the inside directory after the failover: %v", err)
	}
	if _, _, _, err := sc.ReadDirIno(ctx, outDir.Ino(), "", 100, false); err == nil {
		t.Error("readdir of the outside directory after the failover succeeded")
	}
	if a, err := root.Stat(ctx, "/outside/secret"); err != nil || a.Mode().Perm() != 0o666 {
		t.Fatalf("the outside file changed: %v, %v", a.Mode(), err)
	}
}
