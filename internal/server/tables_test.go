package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/vfs"
	"github.com/canopyfs/canopy/internal/wal"
)

// waitUntil polls cond until it holds, failing the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

var sampleUpdate = client.TablesUpdate{
	SetMounts: []client.MountEntry{
		{Prefix: "/p1", VPart: 1, Target: "/"},
		{Prefix: "/arch", VPart: 2, Target: "/cold", ReadOnly: true},
	},
	SetRoutes: []client.Route{{VPart: 0, Addrs: []string{"127.0.0.1:1"}}, {VPart: 1, Addrs: []string{"127.0.0.1:2", "127.0.0.1:3"}}},
}

func TestTablesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	for _, every := range []int{1_000_000, 1} { // from the log, and from a checkpoint
		t.Run(map[int]string{1_000_000: "log", 1: "checkpoint"}[every], func(t *testing.T) {
			cfg := Config{Dir: filepath.Join(dir, t.Name()), CheckpointEvery: every}
			s, c := serveOn(t, cfg)
			ctx := context.Background()
			fresh, err := c.Tables(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := &client.Tables{Mounts: []client.MountEntry{{Prefix: "/", Target: "/"}}, Routes: []client.Route{}}
			if !reflect.DeepEqual(fresh, want) {
				t.Fatalf("fresh tables = %+v, want %+v", fresh, want)
			}
			if _, err := c.UpdateTables(ctx, sampleUpdate); err != nil {
				t.Fatal(err)
			}
			u := client.TablesUpdate{ExpectedVersion: 1, RemoveMounts: []string{"/arch"}, SetRoutes: []client.Route{{VPart: 0}}}
			before, err := c.UpdateTables(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			if before.Version != 2 || len(before.Mounts) != 2 || len(before.Routes) != 1 {
				t.Fatalf("after two updates: %+v", before)
			}
			s.Close() // no graceful shutdown: only what is durable remains

			_, c = serveOn(t, cfg)
			after, err := c.Tables(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after, before) {
				t.Fatalf("after restart: %+v, want %+v", after, before)
			}
		})
	}
}

func TestTablesUpdateRefusalsCarryDetail(t *testing.T) {
	_, addr := openAndServe(t, Config{Dir: t.TempDir()})
	c := dial(t, addr, client.Cred{})
	ctx := context.Background()
	if _, err := c.UpdateTables(ctx, sampleUpdate); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		u    client.TablesUpdate
		want syscall.Errno
		says string
	}{
		{client.TablesUpdate{ExpectedVersion: 5, RemoveMounts: []string{"/p1"}}, syscall.ESTALE, "version 1, not 5"},
		{client.TablesUpdate{RemoveMounts: []string{"/"}}, syscall.EINVAL, "cannot be unmounted"},
		{client.TablesUpdate{RemoveMounts: []string{"/nope"}}, syscall.ENOENT, "not mounted"},
		{client.TablesUpdate{SetMounts: []client.MountEntry{{Prefix: "/x", VPart: 4096, Target: "/"}}}, syscall.EINVAL, "out of range"},
		{client.TablesUpdate{SetRoutes: []client.Route{{VPart: 3, Addrs: []string{"a", "a"}}}}, syscall.EINVAL, "twice"},
	}
	for _, tc := range cases {
		_, err := c.UpdateTables(ctx, tc.u)
		if !errors.Is(err, tc.want) {
			t.Errorf("update %+v: %v, want %v", tc.u, err, tc.want)
			continue
		}
		var d *client.DetailError
		if !errors.As(err, &d) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("update %+v: error %q does not explain itself (want %q)", tc.u, err, tc.says)
		}
	}
	got, err := c.Tables(ctx)
	if err != nil || got.Version != 1 {
		t.Fatalf("refused updates changed the tables: %+v, %v", got, err)
	}

	// Only the superuser changes the tables; anyone may read them.
	user := dial(t, addr, client.Cred{UID: 1000, GID: 1000})
	if _, err := user.UpdateTables(ctx, client.TablesUpdate{RemoveMounts: []string{"/p1"}}); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("update by uid 1000: %v, want EPERM", err)
	}
	if _, err := user.Tables(ctx); err != nil {
		t.Fatalf("read by uid 1000: %v", err)
	}
}

func TestOtherPartitionsRefuseTables(t *testing.T) {
	_, c := serveOn(t, Config{Dir: t.TempDir(), Partition: 3})
	_, err := c.Tables(context.Background())
	if !errors.Is(err, syscall.EOPNOTSUPP) || !strings.Contains(err.Error(), "partition 0") {
		t.Fatalf("tables from partition 3: %v, want EOPNOTSUPP naming partition 0", err)
	}
}

func TestTablesLongPollWakesOnChange(t *testing.T) {
	s, c := serveOn(t, Config{Dir: t.TempDir()})
	ctx := context.Background()
	got := make(chan *client.Tables, 1)
	errc := make(chan error, 1)
	go func() {
		tb, err := c.WatchTables(ctx, 0, 8*time.Second)
		got <- tb
		errc <- err
	}()
	waitUntil(t, "the watch is parked", func() bool { return s.watch.waiting() == 1 })
	if _, err := c.UpdateTables(ctx, sampleUpdate); err != nil {
		t.Fatal(err)
	}
	tb := <-got
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if tb.Version != 1 || len(tb.Mounts) != 3 || tb.Mounts[2].Prefix != "/p1" {
		t.Fatalf("woken watch got %+v, want version 1 with /p1", tb)
	}

	// A watch that already knows an older version returns at once.
	tb, err := c.WatchTables(ctx, 0, 8*time.Second)
	if err != nil || tb.Version != 1 {
		t.Fatalf("watch from an old version: %+v, %v", tb, err)
	}
	// The woken call leaves the parked set once its reply is on its way,
	// which may be a moment after the client has it.
	waitUntil(t, "no call is parked", func() bool { return s.watch.waiting() == 0 })
}

func TestTablesLongPollTimesOut(t *testing.T) {
	s, c := serveOn(t, Config{Dir: t.TempDir()})
	tb, err := c.WatchTables(context.Background(), 0, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Version != 0 || len(tb.Mounts) != 1 {
		t.Fatalf("timed-out watch got %+v, want the unchanged tables", tb)
	}
	waitUntil(t, "no call is parked", func() bool { return s.watch.waiting() == 0 })
}

// rawTablesCall sends one TABLES_GET on its own connection and returns the
// client, so that a test can drop the connection.
func rawTablesCall(t *testing.T, addr string, req *pb.TablesRequest) (*rpc.Client, chan error) {
	t.Helper()
	rc, err := rpc.Dial(addr, rpc.ClientConfig{MaxRetries: -1, CallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := proto.Marshal(req)
	done := make(chan error, 1)
	go func() {
		_, _, err := rc.Call(context.Background(), uint16(pb.Method_TABLES_GET), rpc.Cred{}, data)
		done <- err
	}()
	return rc, done
}

func TestTablesLongPollDroppedWithItsConnection(t *testing.T) {
	s, addr := openAndServe(t, Config{Dir: t.TempDir()})
	rc, done := rawTablesCall(t, addr, &pb.TablesRequest{Ino: 1, WaitMs: 50_000})
	waitUntil(t, "the watch is parked", func() bool { return s.watch.waiting() == 1 })
	rc.Close()
	if err := <-done; !errors.Is(err, rpc.ErrClosed) {
		t.Fatalf("call on a closed client: %v", err)
	}
	waitUntil(t, "the parked call is dropped", func() bool { return s.watch.waiting() == 0 })
}

func TestTablesLongPollBounded(t *testing.T) {
	s, addr := openAndServe(t, Config{Dir: t.TempDir(), TableWatches: 2})
	for i := range 2 {
		rc, _ := rawTablesCall(t, addr, &pb.TablesRequest{Ino: 1, WaitMs: 50_000})
		defer rc.Close()
		waitUntil(t, "the watch is parked", func() bool { return s.watch.waiting() == i+1 })
	}
	_, done := rawTablesCall(t, addr, &pb.TablesRequest{Ino: 1, WaitMs: 50_000})
	if err := <-done; !errors.Is(err, rpc.ErrBusy) {
		t.Fatalf("third long poll over a limit of 2: %v, want ErrBusy", err)
	}
	// A plain read is not a long poll and is still answered.
	_, plain := rawTablesCall(t, addr, &pb.TablesRequest{Ino: 1})
	if err := <-plain; err != nil {
		t.Fatal(err)
	}
}

func TestShutdownAnswersParkedLongPolls(t *testing.T) {
	s, addr := openAndServe(t, Config{Dir: t.TempDir()})
	c := dial(t, addr, client.Cred{})
	got := make(chan error, 1)
	go func() {
		tb, err := c.WatchTables(context.Background(), 0, 9*time.Second)
		if err == nil && tb.Version != 0 {
			err = errors.New("tables changed")
		}
		got <- err
	}()
	waitUntil(t, "the watch is parked", func() bool { return s.watch.waiting() == 1 })
	shutdown(t, s) // bounded by 10 s; the poll's own wait would be 9
	if err := <-got; err != nil {
		t.Fatalf("parked watch at shutdown: %v", err)
	}
}

func TestRetriedTablesUpdateAppliedOnceAcrossRestart(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), CheckpointEvery: 1}
	s, addr := openAndServe(t, cfg)
	id := rpc.ClientID{1, 2, 3}
	req, _ := proto.Marshal(&pb.TablesUpdate{Ino: 1, SetRoutes: []*pb.Route{{Vpart: 7, Addrs: []string{"h:7"}}}})
	call := func(addr string) (uint32, []byte) {
		// A new client with the same id numbers its first call 1 again:
		// to the server it is a retry of the same call.
		rc, err := rpc.Dial(addr, rpc.ClientConfig{ClientID: id})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		st, reply, err := rc.Call(context.Background(), uint16(pb.Method_TABLES_UPDATE), rpc.Cred{}, req)
		if err != nil {
			t.Fatal(err)
		}
		return st, reply
	}
	st1, reply1 := call(addr)
	if st1 != 0 {
		t.Fatalf("update: status %d", st1)
	}
	// Mutate until a checkpoint past the update's record (LSN 1) is on
	// disk, so that recovery finds its outcome in the checkpoint's retry
	// cache, not by replaying the log.
	c := dial(t, addr, client.Cred{})
	for i := 0; ; i++ {
		if _, err := c.Mkdir(context.Background(), fmt.Sprintf("/d%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
		if lsn, body, ok, err := wal.OpenCheckpoint(vfs.Default, cfg.Dir); ok && err == nil {
			body.Close()
			if lsn >= 1 {
				break
			}
		}
		if i > 2000 {
			t.Fatal("no checkpoint past the update")
		}
		time.Sleep(5 * time.Millisecond)
	}
	shutdown(t, s)

	_, addr = openAndServe(t, cfg)
	st2, reply2 := call(addr)
	if st2 != 0 || !proto.Equal(decodeTables(t, reply1), decodeTables(t, reply2)) {
		t.Fatalf("retry after restart: status %d, reply %v; first reply %v", st2, decodeTables(t, reply2), decodeTables(t, reply1))
	}
	tb, err := dial(t, addr, client.Cred{}).Tables(context.Background())
	if err != nil || tb.Version != 1 {
		t.Fatalf("tables after the retry: %+v, %v; want version 1 (the retry not applied again)", tb, err)
	}
}

func decodeTables(t *testing.T, data []byte) *pb.TablesReply {
	t.Helper()
	var r pb.TablesReply
	if err := proto.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
