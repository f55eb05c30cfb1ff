package server

import (
	"context"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
)

// forwarder makes calls for other clients, as a router does.
type forwarder struct {
	t  *testing.T
	c  *rpc.Client
	id uint64
}

// call forwards m for client from and returns the reply's status.
func (f *forwarder) call(from rpc.ClientID, m pb.Method, req, out proto.Message) uint32 {
	f.t.Helper()
	data, err := proto.Marshal(req)
	if err != nil {
		f.t.Fatal(err)
	}
	type result struct {
		status uint32
		reply  []byte
		err    error
	}
	ch := make(chan result, 1)
	f.id++
	f.c.Forward(nil, from, f.id, uint16(m), &rpc.Cred{}, data, func(status uint32, reply []byte, err error, _ *rpc.Batch) {
		ch <- result{status, append([]byte(nil), reply...), err}
	})
	select {
	case r := <-ch:
		if r.err != nil {
			f.t.Fatalf("%s for %v: %v", m, from, r.err)
		}
		if r.status == 0 && out != nil {
			if err := proto.Unmarshal(r.reply, out); err != nil {
				f.t.Fatal(err)
			}
		}
		return r.status
	case <-time.After(10 * time.Second):
		f.t.Fatalf("%s for %v: no reply", m, from)
		return 0
	}
}

// TestSessionEndForwarded: a client that reaches the partition only
// through another connection's forwarded calls (a router's) holds a lock
// and an open unlinked file; the forwarder's SESSION_END for it releases
// the lock at once and frees the file (its slice is garbage), while a
// client with a connection of its own keeps its session, and a client
// credential may not end anyone's.
func TestSessionEndForwarded(t *testing.T) {
	ctx := context.Background()
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	admin := dialRaw(t, addr)
	rc, err := rpc.Dial(addr, rpc.ClientConfig{CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	f := &forwarder{t: t, c: rc}
	behind := rpc.ClientID{1, 2, 3}

	ino := admin.create("/held")
	slice := admin.write(ino, 0, 100)
	if st := f.call(behind, pb.Method_OPEN, &pb.OpenRequest{Ino: ino, Flags: uint32(syscall.O_RDWR)}, nil); st != 0 {
		t.Fatalf("open for the client behind: %d", st)
	}
	admin.must(pb.Method_UNLINK, &pb.EntryRequest{Path: "/held"}, nil)
	lock := &pb.LockRequest{Ino: ino, Owner: 1, Type: uint32(syscall.F_WRLCK), End: LockEOF}
	if st := f.call(behind, pb.Method_SETLK, lock, nil); st != 0 {
		t.Fatalf("lock for the client behind: %d", st)
	}
	if errno := admin.call(pb.Method_SETLK, lock, nil); errno != syscall.EAGAIN {
		t.Fatalf("lock while the client behind holds it: %v, want EAGAIN", errno)
	}
	if admin.garbage()[slice] {
		t.Fatal("the open file's slice is garbage before its session ended")
	}

	// A token that is no router's may not end a session.
	root := dial(t, addr, client.Cred{})
	token, _, err := root.AddCredential(ctx, client.Credential{Name: "plain", AllowRoot: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rpc.Dial(addr, rpc.ClientConfig{Token: token, CallTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	pf := &forwarder{t: t, c: plain}
	if st := pf.call(behind, pb.Method_SESSION_END, &pb.Empty{}, nil); syscall.Errno(st) != syscall.EPERM {
		t.Fatalf("SESSION_END under a plain credential: %d, want EPERM", st)
	}
	if errno := admin.call(pb.Method_SETLK, lock, nil); errno != syscall.EAGAIN {
		t.Fatalf("lock after a refused SESSION_END: %v, want EAGAIN", errno)
	}

	// A client connected directly keeps its session.
	other := dialRaw(t, addr)
	ino2 := other.create("/mine")
	other.must(pb.Method_OPEN, &pb.OpenRequest{Ino: ino2, Flags: uint32(syscall.O_RDWR)}, nil)
	if st := f.call(other.c.ID(), pb.Method_SESSION_END, &pb.Empty{}, nil); st != 0 {
		t.Fatalf("SESSION_END for a connected client: %d", st)
	}
	other.must(pb.Method_CLOSE, &pb.NodeRequest{Ino: ino2}, nil)

	if st := f.call(behind, pb.Method_SESSION_END, &pb.Empty{}, nil); st != 0 {
		t.Fatalf("SESSION_END: %d", st)
	}
	if errno := admin.call(pb.Method_SETLK, lock, nil); errno != 0 {
		t.Fatalf("lock after the session end: %v", errno)
	}
	if !admin.garbage()[slice] {
		t.Fatalf("the unlinked file's slice %d is not garbage after its session ended", slice)
	}
	if st := f.call(behind, pb.Method_CLOSE, &pb.NodeRequest{Ino: ino}, nil); syscall.Errno(st) != syscall.EBADF {
		t.Fatalf("close after the session end: %d, want EBADF", st)
	}
}
