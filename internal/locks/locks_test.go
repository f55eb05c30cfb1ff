package locks

import (
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
)

// Lock owners of the table tests: A1 and A2 are two owners (processes) of
// client A, B1 is an owner of client B.
var (
	clientA = ClientID{1}
	clientB = ClientID{2}
	ownerA1 = Owner{Client: clientA, ID: 1}
	ownerA2 = Owner{Client: clientA, ID: 2}
	ownerB1 = Owner{Client: clientB, ID: 1}
)

func ownerName(o Owner) string {
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
	owner      Owner
	typ        uint32
	start, end uint64
	flock      bool
	err        syscall.Errno // set: the errno expected (0 = success)
	conflict   string        // get: the lock reported, as "OWNER TYPE START-END", or "" for none
}

// describe lists the table's POSIX locks on ino 1 as "OWNER TYPE START-END",
// sorted, then its flocks as "OWNER flock TYPE".
func describe(t *Table) []string {
	f := t.files[1]
	if f == nil {
		return nil
	}
	var out []string
	for _, l := range f.posix {
		out = append(out, fmt.Sprintf("%s %s %d-%s", ownerName(l.Owner), typeName(l.Type), l.Start, endName(l.End)))
	}
	for _, l := range f.flocks {
		out = append(out, fmt.Sprintf("%s flock %s", ownerName(l.Owner), typeName(l.Type)))
	}
	sort.Strings(out)
	return out
}

func typeName(typ uint32) string {
	switch typ {
	case Read:
		return "R"
	case Write:
		return "W"
	}
	return "U"
}

func endName(end uint64) string {
	if end == EOF {
		return "EOF"
	}
	return fmt.Sprint(end)
}

func TestLockTableSemantics(t *testing.T) {
	const R, W, U = Read, Write, Unlock
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
				{op: "get", owner: ownerB1, typ: R, start: 0, end: EOF},
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
				{op: "get", owner: ownerA2, typ: R, start: 0, end: EOF, conflict: "A1 W 10-19"},
				{op: "get", owner: ownerA1, typ: W, start: 0, end: EOF},
			},
			want: []string{"A1 W 10-19"},
		},
		{
			name: "unlock in the middle splits a range",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: W, start: 0, end: EOF},
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
				{op: "set", owner: ownerB1, typ: U, start: 0, end: EOF},
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
				{op: "set", owner: ownerB1, typ: W, start: 0, end: EOF},
			},
			want: []string{"A1 flock W", "B1 W 0-EOF"},
		},
		{
			name: "bad requests",
			steps: []lockStep{
				{op: "set", owner: ownerA1, typ: 7, start: 0, end: 1, err: syscall.EINVAL},
				{op: "set", owner: ownerA1, typ: W, start: 5, end: 4, err: syscall.EINVAL},
				{op: "set", owner: ownerA1, typ: W, start: 0, end: EOF + 1, err: syscall.EINVAL},
				{op: "set", owner: ownerA1, typ: U, start: 0, end: 10},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := New(time.Minute, nil)
			for i, s := range tt.steps {
				r := Request{Ino: 1, Owner: s.owner, Type: s.typ, Start: s.start, End: s.end, Pid: uint32(100 + s.owner.ID), Flock: s.flock}
				switch s.op {
				case "set":
					err := tab.Set(r)
					if s.err == 0 && err != nil || s.err != 0 && !errors.Is(err, s.err) {
						t.Fatalf("step %d (%+v): setlk = %v, want %v", i, s, err, s.err)
					}
				case "get":
					l, ok, err := tab.Get(r)
					if err != nil {
						t.Fatalf("step %d: getlk: %v", i, err)
					}
					got := ""
					if ok {
						got = fmt.Sprintf("%s %s %d-%s", ownerName(l.Owner), typeName(l.Type), l.Start, endName(l.End))
						if l.Pid != uint32(100+l.Owner.ID) {
							t.Errorf("step %d: getlk reports pid %d, want the holder's %d", i, l.Pid, 100+l.Owner.ID)
						}
					}
					if got != s.conflict {
						t.Fatalf("step %d: getlk = %q, want %q", i, got, s.conflict)
					}
				case "release":
					tab.Release(1, s.owner, false)
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
func checkCounts(t *testing.T, tab *Table) {
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
func waitResult() (func(syscall.Errno), <-chan syscall.Errno) {
	ch := make(chan syscall.Errno, 1)
	return func(st syscall.Errno) { ch <- st }, ch
}

func TestLockTableWaiters(t *testing.T) {
	tab := New(time.Minute, nil)
	w := func(o Owner, typ uint32, start, end uint64) Request {
		return Request{Ino: 1, Owner: o, Type: typ, Start: start, End: end}
	}
	if err := tab.Set(w(ownerA1, Write, 0, 99)); err != nil {
		t.Fatal(err)
	}
	// B waits for bytes A holds; A2 waits for a flock nobody holds (granted at once).
	replyB, gotB := waitResult()
	tab.SetWait(w(ownerB1, Write, 50, 59), 7, time.Minute, replyB)
	replyF, gotF := waitResult()
	tab.SetWait(Request{Ino: 1, Owner: ownerA2, Type: Write, Flock: true}, 8, time.Minute, replyF)
	if st := <-gotF; st != 0 {
		t.Fatalf("uncontended SETLKW = %d", st)
	}
	select {
	case st := <-gotB:
		t.Fatalf("SETLKW answered %d while the range is locked", st)
	default:
	}
	if _, waits, _ := tab.Stats(); waits != 1 {
		t.Fatalf("waits = %d, want 1", waits)
	}
	// Unlocking elsewhere does not let B through; unlocking its bytes does.
	if err := tab.Set(w(ownerA1, Unlock, 0, 9)); err != nil {
		t.Fatal(err)
	}
	select {
	case st := <-gotB:
		t.Fatalf("SETLKW answered %d while bytes 50-59 are still locked", st)
	default:
	}
	if err := tab.Set(w(ownerA1, Unlock, 40, 69)); err != nil {
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
	tab.SetWait(w(ownerA2, Read, 10, 10), 9, time.Minute, replyC)
	tab.Cancel(clientA, 9)
	if st := <-gotC; st != syscall.EINTR {
		t.Fatalf("cancelled SETLKW = %d, want EINTR", st)
	}
	tab.Cancel(clientA, 9)

	// A cancel that comes before its SETLKW ends it at once.
	tab.Cancel(clientA, 20)
	replyE, gotE := waitResult()
	tab.SetWait(w(ownerA2, Read, 10, 10), 20, time.Minute, replyE)
	if st := <-gotE; st != syscall.EINTR {
		t.Fatalf("SETLKW after its cancel = %d, want EINTR", st)
	}

	// A wait that runs out answers EAGAIN.
	replyT, gotT := waitResult()
	tab.SetWait(w(ownerA2, Read, 10, 10), 10, time.Millisecond, replyT)
	if st := <-gotT; st != syscall.EAGAIN {
		t.Fatalf("timed-out SETLKW = %d, want EAGAIN", st)
	}

	// Two waits: a client that goes releases its locks, which lets the
	// other client's wait through; its own waits are answered EAGAIN.
	replyA, gotA := waitResult()
	tab.SetWait(w(ownerA2, Write, 50, 50), 11, time.Minute, replyA) // waits for B
	replyB2, gotB2 := waitResult()
	tab.SetWait(w(ownerB1, Write, 0, 99), 12, time.Minute, replyB2) // waits for A1
	tab.ReleaseClient(clientA)
	if st := <-gotA; st != syscall.EAGAIN {
		t.Fatalf("departed client's wait = %d, want EAGAIN", st)
	}
	if st := <-gotB2; st != 0 {
		t.Fatalf("wait of the remaining client = %d, want 0", st)
	}
	if got, want := describe(tab), []string{"B1 W 0-99"}; !slices.Equal(got, want) {
		t.Fatalf("locks %v, want %v", got, want)
	}
	if _, waits, _ := tab.Stats(); waits != 0 {
		t.Fatalf("waits left: %d", waits)
	}
	checkCounts(t, tab)
}

func TestLockTableExpiry(t *testing.T) {
	now := time.Unix(1000, 0)
	tab := New(10*time.Second, func() time.Time { return now })
	if err := tab.Set(Request{Ino: 1, Owner: ownerA1, Type: Write, Start: 0, End: EOF}); err != nil {
		t.Fatal(err)
	}
	if err := tab.Set(Request{Ino: 2, Owner: ownerB1, Type: Write, Flock: true}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(8 * time.Second)
	if lost, held := tab.Heartbeat(clientA); lost || held != 1 {
		t.Fatalf("heartbeat = lost %v, %d held; want false, 1", lost, held)
	}
	now = now.Add(8 * time.Second) // A heard from 8 s ago, B 16 s ago
	if n := tab.Expire(now); n != 1 {
		t.Fatalf("expired %d sessions, want 1", n)
	}
	if err := tab.Set(Request{Ino: 2, Owner: ownerA1, Type: Write, Flock: true}); err != nil {
		t.Fatalf("flock of the expired client still held: %v", err)
	}
	if err := tab.Set(Request{Ino: 1, Owner: ownerB1, Type: Read, Start: 0, End: 0}); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock of the live client not held: %v", err)
	}
	if lost, held := tab.Heartbeat(clientB); !lost || held != 0 {
		t.Fatalf("expired client's heartbeat = lost %v, %d held; want true, 0", lost, held)
	}
	if lost, _ := tab.Heartbeat(clientB); lost {
		t.Fatal("loss reported twice")
	}
	if _, _, expired := tab.Stats(); expired != 1 {
		t.Fatalf("expired counter = %d", expired)
	}
	checkCounts(t, tab)
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
	seed(&pb.LockRequest{Ino: 1, Owner: 1, Type: Write, Start: 0, End: 99}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	seed(&pb.LockRequest{Ino: 1, Owner: 2, Type: Read, Start: 10, End: EOF, Flock: true}, []byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0})
	seed(&pb.LockRequest{Ino: 2, Type: 9, Start: 5, End: 4, WaitMs: 1 << 31, Token: 7}, []byte{0x31, 0x42, 0x53, 0x64, 0x75})
	f.Add([]byte{0xff, 0x01}, []byte{1, 1, 1})
	f.Fuzz(func(t *testing.T, payload, ops []byte) {
		base, err := decodeRequest(clientA, payload)
		if err != nil {
			return
		}
		now := time.Unix(1000, 0)
		tab := New(10*time.Second, func() time.Time { return now })
		clients := []ClientID{clientA, clientB}
		for i, op := range ops {
			r := base
			r.Owner = Owner{Client: clients[op&1], ID: uint64(op>>1&1) + base.Owner.ID}
			r.Ino = 1 + uint64(op>>7)
			if i%3 == 1 {
				r.Type = uint32(op>>2) % 4 // including a bad type
			}
			if i%4 == 2 {
				r.Start, r.End = uint64(op%16)*10, uint64(op%16)*10+uint64(op>>4)*7
			}
			switch op >> 4 % 8 {
			case 0, 1, 2:
				tab.Set(r)
			case 3:
				tab.Get(r)
			case 4:
				tab.SetWait(r, uint64(i), time.Hour, func(syscall.Errno) {})
			case 5:
				tab.Cancel(r.Owner.Client, uint64(op))
			case 6:
				tab.Release(r.Ino, r.Owner, r.Flock)
			case 7:
				if op&8 != 0 {
					tab.ReleaseClient(r.Owner.Client)
				} else {
					now = now.Add(time.Duration(op) * 100 * time.Millisecond)
					tab.Expire(now)
				}
			}
			checkLockInvariants(t, tab)
		}
		tab.Stop()
	})
}

// decodeRequest decodes a lock call's message as the metadata server does
// (the corpus holds such messages).
func decodeRequest(client ClientID, payload []byte) (Request, error) {
	var req pb.LockRequest
	if err := proto.Unmarshal(payload, &req); err != nil {
		return Request{}, err
	}
	return Request{
		Ino: req.Ino, Owner: Owner{Client: client, ID: req.Owner}, Type: req.Type,
		Start: req.Start, End: req.End, Pid: req.Pid, Flock: req.Flock,
	}, nil
}

func checkLockInvariants(t *testing.T, tab *Table) {
	t.Helper()
	checkCounts(t, tab)
	tab.mu.Lock()
	defer tab.mu.Unlock()
	for ino, f := range tab.files {
		for _, locks := range [][]Lock{f.posix, f.flocks} {
			for i, a := range locks {
				if a.Start > a.End || a.End > EOF || (a.Type != Read && a.Type != Write) {
					t.Fatalf("inode %d: bad lock %+v", ino, a)
				}
				for _, b := range locks[i+1:] {
					switch {
					case a.Owner != b.Owner && a.overlaps(b.Start, b.End) && (a.Type == Write || b.Type == Write):
						t.Fatalf("inode %d: conflicting locks held: %+v and %+v", ino, a, b)
					case a.Owner == b.Owner && a.overlaps(b.Start, b.End):
						t.Fatalf("inode %d: one owner's locks overlap: %+v and %+v", ino, a, b)
					case a.Owner == b.Owner && a.Type == b.Type && (a.End+1 == b.Start || b.End+1 == a.Start):
						t.Fatalf("inode %d: touching locks not merged: %+v and %+v", ino, a, b)
					}
				}
			}
		}
	}
}
