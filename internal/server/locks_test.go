package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
)

// Lock owners of the table tests: A1 and A2 are two owners (processes) of
// client A, B1 is an owner of client B.
var (
	clientA = rpc.ClientID{1}
	clientB = rpc.ClientID{2}
	ownerA1 = lockOwner{client: clientA, owner: 1}
	ownerA2 = lockOwner{client: clientA, owner: 2}
	ownerB1 = lockOwner{client: clientB, owner: 1}
)

func ownerName(o lockOwner) string {
	switch o {
	case ownerA1:
		return "A1"
	case ownerA2:
		return "A2"
	case ownerB1:
		return "B1"
	}
	return "?"
}

// lockStep is one call in a table test: set (SETLK), get (GETLK) or
// release (the owner's close).
type lockStep struct {
	op         string // "set", "get", "release"
	owner      lockOwner
	typ        uint32
	start, end uint64
	flock      bool
	err        syscall.Errno // set: the errno expected (0 = success)
	conflict   string        // get: the lock reported, as "OWNER TYPE START-END", or "" for none
}

// describe lists the table's POSIX locks on ino 1 as "OWNER TYPE START-END",
// sorted, then its flocks as "OWNER flock TYPE".
func describe(t *lockTable) []string {
	f := t.files[1]
	if f == nil {
		return nil
	}
	var out []string
	for _, l := range f.posix {
		out = append(out, fmt.Sprintf("%s %s %d-%s", ownerName(l.owner), typeName(l.typ), l.start, endName(l.end)))
	}
	for _, l := range f.flocks {
		out = append(out, fmt.Sprintf("%s flock %s", ownerName(l.owner), typeName(l.typ)))
	}
	sort.Strings(out)
	return out
}

func typeName(typ uint32) string {
	switch typ {
	case lockRead:
		return "R"
	case lockWrite:
		return "W"
	}
	return "U"
}

func endName(end uint64) string {
	if end == LockEOF {
		return "EOF"
	}
	return fmt.Sprint(end)
}

func TestLockTableSemantics(t *testing.T) {
	const R, W, U = lockRead, lockWrite, lockUnlock
	tests := []struct {
		name  string
		steps []lockStep
		want  []string // the locks held afterwards
	}{
		{
			name: "read locks share",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, start: 0, end: 99},
				{op: "set", owner: ownerB1, typ: R, start: 50, end: 149},
				{op: "get", owner: ownerB1, typ: R, start: 0, end: LockEOF},
			},
			want: []string{"A1 R 0-99", "B1 R 50-149"},
		},
		{
			name: "write conflicts with read of another owner",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, start: 0, end: 99},
				{op: "set", owner: ownerB1, typ: W, start: 99, end: 99, err: syscall.EAGAIN},
				{op: "get", owner: ownerB1, typ: W, start: 90, end: 200, conflict: "A1 R 0-99"},
				{op: "get", owner: ownerB1, typ: R, start: 90, end: 200},
				{op: "set", owner: ownerB1, typ: W, start: 100, end: 200},
			},
			want: []string{"A1 R 0-99", "B1 W 100-200"},
		},
		{
			name: "owners of one client conflict like processes",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: W, start: 10, end: 19},
				{op: "set", owner: ownerA2, typ: R, start: 0, end: 10, err: syscall.EAGAIN},
				{op: "get", owner: ownerA2, typ: R, start: 0, end: LockEOF, conflict: "A1 W 10-19"},
				{op: "get", owner: ownerA1, typ: W, start: 0, end: LockEOF},
			},
			want: []string{"A1 W 10-19"},
		},
		{
			name: "unlock in the middle splits a range",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: W, start: 0, end: LockEOF},
				{op: "set", owner: ownerA1, typ: U, start: 100, end: 199},
				{op: "set", owner: ownerB1, typ: W, start: 100, end: 199},
				{op: "set", owner: ownerB1, typ: W, start: 99, end: 100, err: syscall.EAGAIN},
			},
			want: []string{"A1 W 0-99", "A1 W 200-EOF", "B1 W 100-199"},
		},
		{
			name: "adjacent and overlapping ranges of one type merge",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, start: 0, end: 9},
				{op: "set", owner: ownerA1, typ: R, start: 20, end: 29},
				{op: "set", owner: ownerA1, typ: R, start: 10, end: 19},
				{op: "set", owner: ownerA1, typ: R, start: 25, end: 40},
			},
			want: []string{"A1 R 0-40"},
		},
		{
			name: "a type change in the middle splits into three",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, start: 0, end: 99},
				{op: "set", owner: ownerA1, typ: W, start: 40, end: 59},
				{op: "get", owner: ownerB1, typ: R, start: 0, end: 39},
				{op: "get", owner: ownerB1, typ: R, start: 0, end: 45, conflict: "A1 W 40-59"},
			},
			want: []string{"A1 R 0-39", "A1 R 60-99", "A1 W 40-59"},
		},
		{
			name: "upgrade refused while another reads, allowed after",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, start: 0, end: 9},
				{op: "set", owner: ownerB1, typ: R, start: 5, end: 5},
				{op: "set", owner: ownerA1, typ: W, start: 0, end: 9, err: syscall.EAGAIN},
				{op: "set", owner: ownerB1, typ: U, start: 0, end: LockEOF},
				{op: "set", owner: ownerA1, typ: W, start: 0, end: 9},
			},
			want: []string{"A1 W 0-9"},
		},
		{
			name: "release removes all of an owner's POSIX locks, not its flock",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, start: 0, end: 9},
				{op: "set", owner: ownerA1, typ: W, start: 50, end: 59},
				{op: "set", owner: ownerA2, typ: R, start: 5, end: 6},
				{op: "set", owner: ownerA1, typ: W, flock: true},
				{op: "release", owner: ownerA1},
			},
			want: []string{"A1 flock W", "A2 R 5-6"},
		},
		{
			name: "flock shared and exclusive",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: R, flock: true},
				{op: "set", owner: ownerB1, typ: R, flock: true},
				{op: "set", owner: ownerB1, typ: W, flock: true, err: syscall.EAGAIN},
				{op: "set", owner: ownerA1, typ: U, flock: true},
				{op: "set", owner: ownerB1, typ: W, flock: true},
				{op: "set", owner: ownerA2, typ: R, flock: true, err: syscall.EAGAIN},
			},
			want: []string{"B1 flock W"},
		},
		{
			name: "flock and POSIX locks do not conflict",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: W, flock: true},
				{op: "set", owner: ownerB1, typ: W, start: 0, end: LockEOF},
			},
			want: []string{"A1 flock W", "B1 W 0-EOF"},
		},
		{
			name: "bad requests",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: 7, start: 0, end: 1, err: syscall.EINVAL},
				{op: "set", owner: ownerA1, typ: W, start: 5, end: 4, err: syscall.EINVAL},
				{op: "set", owner: ownerA1, typ: W, start: 0, end: LockEOF + 1, err: syscall.EINVAL},
				{op: "set", owner: ownerA1, typ: U, start: 0, end: 10},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := newLockTable(time.Minute, nil)
			for i, s := range tt.steps {
				r := lockReq{ino: 1, owner: s.owner, typ: s.typ, start: s.start, end: s.end, pid: uint32(100 + s.owner.owner), flock: s.flock}
				switch s.op {
				case "set":
					err := tab.setlk(r)
					if s.err == 0 && err != nil || s.err != 0 && !errors.Is(err, s.err) {
						t.Fatalf("step %d (%+v): setlk = %v, want %v", i, s, err, s.err)
					}
				case "get":
					l, ok, err := tab.getlk(r)
					if err != nil {
						t.Fatalf("step %d: getlk: %v", i, err)
					}
					got := ""
					if ok {
						got = fmt.Sprintf("%s %s %d-%s", ownerName(l.owner), typeName(l.typ), l.start, endName(l.end))
						if l.pid != uint32(100+l.owner.owner) {
							t.Errorf("step %d: getlk reports pid %d, want the holder's %d", i, l.pid, 100+l.owner.owner)
						}
					}
					if got != s.conflict {
						t.Fatalf("step %d: getlk = %q, want %q", i, got, s.conflict)
					}
				case "release":
					tab.release(1, s.owner, false)
				}
			}
			if got := describe(tab); !slices.Equal(got, tt.want) {
				t.Errorf("locks held:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(tt.want, ", "))
			}
			checkCounts(t, tab)
		})
	}
}

// checkCounts checks that every session's counts match the locks and
// waits in the table, and that no empty entry is kept.
func checkCounts(t *testing.T, tab *lockTable) {
	t.Helper()
	tab.mu.Lock()
	defer tab.mu.Unlock()
	for ino, f := range tab.files {
		if f.empty() {
			t.Errorf("inode %d: empty entry kept", ino)
		}
	}
	for client, s := range tab.sessions {
		total := 0
		for ino, f := range tab.files {
			n := f.count(client)
			if s.held[ino] != n {
				t.Errorf("client %x inode %d: session counts %d, table holds %d", client[0], ino, s.held[ino], n)
			}
			total += n
		}
		if total != s.total {
			t.Errorf("client %x: session total %d, table holds %d", client[0], s.total, total)
		}
	}
}

// waitResult collects a SETLKW's answer.
func waitResult() (func(uint32), <-chan uint32) {
	ch := make(chan uint32, 1)
	return func(st uint32) { ch <- st }, ch
}

func TestLockTableWaiters(t *testing.T) {
	tab := newLockTable(time.Minute, nil)
	w := func(o lockOwner, typ uint32, start, end uint64) lockReq {
		return lockReq{ino: 1, owner: o, typ: typ, start: start, end: end}
	}
	if err := tab.setlk(w(ownerA1, lockWrite, 0, 99)); err != nil {
		t.Fatal(err)
	}
	// B waits for bytes A holds; A2 waits for a flock nobody holds (granted at once).
	replyB, gotB := waitResult()
	tab.setlkw(w(ownerB1, lockWrite, 50, 59), 7, time.Minute, replyB)
	replyF, gotF := waitResult()
	tab.setlkw(lockReq{ino: 1, owner: ownerA2, typ: lockWrite, flock: true}, 8, time.Minute, replyF)
	if st := <-gotF; st != 0 {
		t.Fatalf("uncontended SETLKW = %d", st)
	}
	select {
	case st := <-gotB:
		t.Fatalf("SETLKW answered %d while the range is locked", st)
	default:
	}
	if _, waits, _ := tab.stats(); waits != 1 {
		t.Fatalf("waits = %d, want 1", waits)
	}
	// Unlocking elsewhere does not let B through; unlocking its bytes does.
	if err := tab.setlk(w(ownerA1, lockUnlock, 0, 9)); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-gotB:
		t.Fatalf("SETLKW answered %d while bytes 50-59 are still locked", st)
	default:
	}
	if err := tab.setlk(w(ownerA1, lockUnlock, 40, 69)); err != nil {
		t.Fatal(err)
	}
	if st := <-gotB; st != 0 {
		t.Fatalf("SETLKW = %d after the unlock, want 0", st)
	}
	if got, want := describe(tab), []string{"A1 W 10-39", "A1 W 70-99", "A2 flock W", "B1 W 50-59"}; !slices.Equal(got, want) {
		t.Fatalf("locks %v, want %v", got, want)
	}

	// A cancelled wait answers EINTR and leaves nothing behind; a second
	// cancel is harmless.
	replyC, gotC := waitResult()
	tab.setlkw(w(ownerA2, lockRead, 10, 10), 9, time.Minute, replyC)
	tab.cancel(clientA, 9)
	if st := <-gotC; st != uint32(syscall.EINTR) {
		t.Fatalf("cancelled SETLKW = %d, want EINTR", st)
	}
	tab.cancel(clientA, 9)

	// A cancel that comes before its SETLKW ends it at once.
	tab.cancel(clientA, 20)
	replyE, gotE := waitResult()
	tab.setlkw(w(ownerA2, lockRead, 10, 10), 20, time.Minute, replyE)
	if st := <-gotE; st != uint32(syscall.EINTR) {
		t.Fatalf("SETLKW after its cancel = %d, want EINTR", st)
	}

	// A wait that runs out answers EAGAIN.
	replyT, gotT := waitResult()
	tab.setlkw(w(ownerA2, lockRead, 10, 10), 10, time.Millisecond, replyT)
	if st := <-gotT; st != uint32(syscall.EAGAIN) {
		t.Fatalf("timed-out SETLKW = %d, want EAGAIN", st)
	}

	// Two waits: a client that goes releases its locks, which lets the
	// other client's wait through; its own waits are answered EAGAIN.
	replyA, gotA := waitResult()
	tab.setlkw(w(ownerA2, lockWrite, 50, 50), 11, time.Minute, replyA) // waits for B
	replyB2, gotB2 := waitResult()
	tab.setlkw(w(ownerB1, lockWrite, 0, 99), 12, time.Minute, replyB2) // waits for A1
	tab.releaseClient(clientA)
	if st := <-gotA; st != uint32(syscall.EAGAIN) {
		t.Fatalf("departed client's wait = %d, want EAGAIN", st)
	}
	if st := <-gotB2; st != 0 {
		t.Fatalf("wait of the remaining client = %d, want 0", st)
	}
	if got, want := describe(tab), []string{"B1 W 0-99"}; !slices.Equal(got, want) {
		t.Fatalf("locks %v, want %v", got, want)
	}
	if _, waits, _ := tab.stats(); waits != 0 {
		t.Fatalf("waits left: %d", waits)
	}
	checkCounts(t, tab)
}

func TestLockTableExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	tab := newLockTable(10*time.Second, func() time.Time { return now })
	if err := tab.setlk(lockReq{ino: 1, owner: ownerA1, typ: lockWrite, start: 0, end: LockEOF}); err != nil {
		t.Fatal(err)
	}
	if err := tab.setlk(lockReq{ino: 2, owner: ownerB1, typ: lockWrite, flock: true}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(8 * time.Second)
	if lost, held := tab.heartbeat(clientA); lost || held != 1 {
		t.Fatalf("heartbeat = lost %v, %d held; want false, 1", lost, held)
	}
	now = now.Add(8 * time.Second) // A heard from 8 s ago, B 16 s ago
	if n := tab.expire(now); n != 1 {
		t.Fatalf("expired %d sessions, want 1", n)
	}
	if err := tab.setlk(lockReq{ino: 2, owner: ownerA1, typ: lockWrite, flock: true}); err != nil {
		t.Fatalf("flock of the expired client still held: %v", err)
	}
	if err := tab.setlk(lockReq{ino: 1, owner: ownerB1, typ: lockRead, start: 0, end: 0}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock of the live client not held: %v", err)
	}
	if lost, held := tab.heartbeat(clientB); !lost || held != 0 {
		t.Fatalf("expired client's heartbeat = lost %v, %d held; want true, 0", lost, held)
	}
	if lost, _ := tab.heartbeat(clientB); lost {
		t.Fatal("loss reported twice")
	}
	if _, _, expired := tab.stats(); expired != 1 {
		t.Fatalf("expired counter = %d", expired)
	}
	checkCounts(t, tab)
}

// TestLocksOverRPC takes locks through two clients of a real server: they
// conflict, GETLK names the holder, a blocked SETLKW is let through by the
// unlock, and a client's locks go when its connection closes, or when it
// stops sending heartbeats.
func TestLocksOverRPC(t *testing.T) {
	srv, addr := openAndServe(t, Config{Dir: t.TempDir(), LockTimeout: 500 * time.Millisecond})
	a, b := dial(t, addr, client.Cred{}), dial(t, addr, client.Cred{})
	ctx := context.Background()
	fi, err := a.Create(ctx, "/f", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Ino()
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 0, End: 99, Pid: 4242}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 50, End: 50}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("conflicting SETLK = %v, want EAGAIN", err)
	}
	l, err := b.GetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 0, End: client.LockEOF})
	if err != nil || l != (client.Lock{Type: client.WriteLock, Start: 0, End: 99, Pid: 4242}) {
		t.Fatalf("GETLK = %+v, %v; want A's write lock 0-99 of pid 4242", l, err)
	}

	// A blocked SETLKW returns once A unlocks.
	done := make(chan error, 1)
	go func() { done <- b.SetLkw(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 10, End: 20}) }()
	waitFor(t, "SETLKW to wait in the server", func() bool {
		_, waits, _ := srv.locks.stats()
		return waits == 1
	})
	select {
	case err := <-done:
		t.Fatalf("SETLKW returned %v while the range is held", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.Unlock, Start: 0, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("SETLKW after the unlock: %v", err)
	}

	// An interrupted SETLKW answers EINTR.
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- a.SetLkw(cctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 15, End: 15}) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, syscall.EINTR) {
		t.Fatalf("cancelled SETLKW = %v, want EINTR", err)
	}

	// B holds 10-20 and sends heartbeats: after several timeouts it still
	// holds them.
	time.Sleep(1500 * time.Millisecond)
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 15, End: 15}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock of a client sending heartbeats was lost: SETLK = %v", err)
	}
	// B's connection closes: its locks go at once.
	b.Close()
	waitFor(t, "the departed client's lock to go", func() bool {
		return a.SetLk(ctx, ino, 1, client.Lock{Type: client.WriteLock, Start: 0, End: client.LockEOF}) == nil
	})

	// A client that holds a lock but stops sending heartbeats (a raw RPC
	// connection that stays open) loses it after the timeout.
	raw, err := rpc.Dial(addr, rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.Unlock, Start: 0, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	if st, _, err := raw.Call(ctx, uint16(pb.Method_SETLK), rpc.Cred{}, encodeLock(uint64(ino), 1, lockWrite)); err != nil || st != 0 {
		t.Fatalf("raw SETLK: status %d, %v", st, err)
	}
	if err := a.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 0, End: 0}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("raw client's lock not held: %v", err)
	}
	waitFor(t, "the silent client's lock to expire", func() bool {
		return a.SetLk(ctx, ino, 1, client.Lock{Type: client.ReadLock, Start: 0, End: 0}) == nil
	})
}

// encodeLock is a SETLK request for all of ino.
func encodeLock(ino, owner uint64, typ uint32) []byte {
	data, _ := proto.Marshal(&pb.LockRequest{Ino: ino, Owner: owner, Type: typ, End: LockEOF})
	return data
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// FuzzLocks decodes a lock request as one from the network would arrive
// and then drives the lock table with a sequence of variations of it
// (owners, types, ranges, flock or not, waits, cancels, releases, a
// client going, expiry) taken from ops. Nothing may panic, and after
// every step: no two owners hold conflicting locks that overlap, an
// owner's POSIX ranges neither overlap nor touch with the same type, and
// the sessions count what the table holds.
func FuzzLocks(f *testing.F) {
	seed := func(r *pb.LockRequest, ops []byte) {
		data, _ := proto.Marshal(r)
		f.Add(data, ops)
	}
	seed(&pb.LockRequest{Ino: 1, Owner: 1, Type: lockWrite, Start: 0, End: 99}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	seed(&pb.LockRequest{Ino: 1, Owner: 2, Type: lockRead, Start: 10, End: LockEOF, Flock: true}, []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0})
	seed(&pb.LockRequest{Ino: 2, Type: 9, Start: 5, End: 4, WaitMs: 1 << 31, Token: 7}, []byte{0x31, 0x42, 0x53, 0x64, 0x75})
	f.Add([]byte{0xff, 0x01}, []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, payload, ops []byte) {
		base, _, err := decodeLock(clientA, payload)
		if err != nil {
			return
		}
		now := time.Unix(1000, 0)
		tab := newLockTable(10*time.Second, func() time.Time { return now })
		clients := []rpc.ClientID{clientA, clientB}
		for i, op := range ops {
			r := base
			r.owner = lockOwner{client: clients[op&1], owner: uint64(op>>1&1) + base.owner.owner}
			r.ino = 1 + uint64(op>>7)
			if i%3 == 1 {
				r.typ = uint32(op>>2) % 4 // including a bad type
			}
			if i%4 == 2 {
				r.start, r.end = uint64(op%16)*10, uint64(op%16)*10+uint64(op>>4)*7
			}
			switch op >> 4 % 8 {
			case 0, 1, 2:
				tab.setlk(r)
			case 3:
				tab.getlk(r)
			case 4:
				tab.setlkw(r, uint64(i), time.Hour, func(uint32) {})
			case 5:
				tab.cancel(r.owner.client, uint64(op))
			case 6:
				tab.release(r.ino, r.owner, r.flock)
			case 7:
				if op&8 != 0 {
					tab.releaseClient(r.owner.client)
				} else {
					now = now.Add(time.Duration(op) * 100 * time.Millisecond)
					tab.expire(now)
				}
			}
			checkLockInvariants(t, tab)
		}
		tab.stop()
	})
}

func checkLockInvariants(t *testing.T, tab *lockTable) {
	t.Helper()
	checkCounts(t, tab)
	tab.mu.Lock()
	defer tab.mu.Unlock()
	for ino, f := range tab.files {
		for _, locks := range [][]heldLock{f.posix, f.flocks} {
			for i, a := range locks {
				if a.start > a.end || a.end > LockEOF || (a.typ != lockRead && a.typ != lockWrite) {
					t.Fatalf("inode %d: bad lock %+v", ino, a)
				}
				for _, b := range locks[i+1:] {
					switch {
					case a.owner != b.owner && a.overlaps(b.start, b.end) && (a.typ == lockWrite || b.typ == lockWrite):
						t.Fatalf("inode %d: conflicting locks held: %+v and %+v", ino, a, b)
					case a.owner == b.owner && a.overlaps(b.start, b.end):
						t.Fatalf("inode %d: one owner's locks overlap: %+v and %+v", ino, a, b)
					case a.owner == b.owner && a.typ == b.typ && (a.end+1 == b.start || b.end+1 == a.start):
						t.Fatalf("inode %d: touching locks not merged: %+v and %+v", ino, a, b)
					}
				}
			}
		}
	}
}
