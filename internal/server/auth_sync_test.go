package server

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/auth"
	"github.com/canopyfs/canopy/internal/rpc"
)

// TestAuthSyncCopy: a partition other than the root takes a copy of the
// credentials (AUTH_SYNC), logged, so that it survives a restart; an
// equal push logs nothing; the root refuses a copy; a token of the copy
// is checked in the hello and a credential left out of a later copy is
// refused on the open connection.
func TestAuthSyncCopy(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dir: t.TempDir(), Partition: 1}
	srv, addr := openAndServe(t, cfg)
	token, hash, err := auth.NewToken("u")
	if err != nil {
		t.Fatal(err)
	}
	cred := &auth.Credential{Name: "u", Path: "/", UIDs: []auth.Range{{Lo: 1000, Hi: 1999}}, SquashUID: 65534, SquashGID: 65534, Hash: hash, Generation: 1}
	// Before the copy, a token cannot be checked: the hello is taken as
	// one without a token.
	before, err := rpc.Dial(addr, rpc.ClientConfig{Token: token, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("hello with a token before the copy: %v", err)
	}
	before.Close()
	admin := dialRaw(t, addr)
	push := &pb.AuthSyncRequest{Ino: 1<<48 | 1, Credentials: []*pb.Credential{cred.ToWire(true)}}
	admin.must(pb.Method_AUTH_SYNC, push, nil)
	lsn := srv.stats.lsn.Load()
	admin.must(pb.Method_AUTH_SYNC, push, nil)
	if got := srv.stats.lsn.Load(); got != lsn {
		t.Errorf("an equal copy logged: lsn %d -> %d", lsn, got)
	}
	srv.Close()

	_, addr = openAndServe(t, cfg)
	u, err := client.Dial(addr, client.Options{Token: token, Cred: &client.Cred{UID: 1500, GID: 1500}, OpTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("token of the copy after a restart: %v", err)
	}
	defer u.Close()
	if _, err := u.Stat(ctx, "/"); err != nil {
		t.Fatalf("stat under the copied credential: %v", err)
	}
	if _, err := rpc.Dial(addr, rpc.ClientConfig{Token: "cnpy.u." + fakeSecret, CallTimeout: 5 * time.Second}); err == nil {
		t.Error("a forged token accepted once the partition holds a copy")
	}
	admin = dialRaw(t, addr)
	admin.must(pb.Method_AUTH_SYNC, &pb.AuthSyncRequest{Ino: 1<<48 | 1}, nil)
	if _, err := u.Stat(ctx, "/"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("stat after the credential left the copy: %v, want EACCES", err)
	}

	_, rootAddr := openAndServe(t, Config{Dir: t.TempDir()})
	rc := dialRaw(t, rootAddr)
	if errno := rc.call(pb.Method_AUTH_SYNC, &pb.AuthSyncRequest{Ino: 1, Credentials: []*pb.Credential{cred.ToWire(true)}}, nil); errno != syscall.EOPNOTSUPP {
		t.Errorf("AUTH_SYNC at the root: %v, want EOPNOTSUPP", errno)
	}
}

const fakeSecret = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
