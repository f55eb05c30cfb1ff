package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
	"github.com/canopyfs/canopy/internal/testaddr"
)

// startGroup starts partition p as a group of three in-process replicas
// storing file data in store, closed when the test ends.
func startGroup(t *testing.T, p uint16, store string) ([]*metaserver.Server, []string) {
	t.Helper()
	return startGroupWith(t, p, store, 0)
}

// startGroupWith is startGroup with the replicas' lock timeout (0: the
// default).
func startGroupWith(t *testing.T, p uint16, store string, lockTimeout time.Duration) ([]*metaserver.Server, []string) {
	t.Helper()
	var peers []metaserver.Peer
	var addrs []string
	// The client listeners are held from the start, so no connection the
	// replicas make meanwhile can take their ports.
	var lns []net.Listener
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		peers = append(peers, metaserver.Peer{ID: uint64(i + 1), Addr: ln.Addr().String(), RaftAddr: testaddr.Free(t)})
		addrs = append(addrs, peers[i].Addr)
	}
	root := t.TempDir()
	srvs := make([]*metaserver.Server, 3)
	for i := range peers {
		s, err := metaserver.Open(metaserver.Config{Dir: filepath.Join(root, fmt.Sprint(i+1)), Partition: p, Storage: store,
			Peers: peers, ReplicaID: peers[i].ID, RaftTick: 10 * time.Millisecond, LockTimeout: lockTimeout,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			for _, ln := range lns[i:] {
				ln.Close()
			}
			t.Fatalf("open replica %d: %v", i+1, err)
		}
		go s.Serve(lns[i])
		srvs[i] = s
		t.Cleanup(func() { s.Close() })
	}
	return srvs, addrs
}

// leaderOf waits for the replica of srvs that leads and returns its index.
func leaderOf(t *testing.T, srvs []*metaserver.Server) int {
	t.Helper()
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		for i, s := range srvs {
			if s == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			g, err := s.Group(ctx)
			cancel()
			if err == nil && g.Leader != 0 && g.Leader == g.Id {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no leader elected")
	return -1
}

// TestDepartedClientBehindRouterGroup is TestDepartedClientBehindRouter
// with partition 1 a group of three replicas: the session end is logged
// and replicated, so once the leader is stopped the new leader has the
// file freed too.
func TestDepartedClientBehindRouterGroup(t *testing.T) {
	if addr := os.Getenv(holderAddrEnv); addr != "" {
		if err := lockHolder(addr); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		return
	}
	store := "file://" + t.TempDir()
	_, root := servertest.Start(t, metaserver.Config{Partition: 0, Storage: store})
	srvs, addrs := startGroup(t, 1, store)
	lead := leaderOf(t, srvs)
	direct := dial(t, addrs[lead])
	used := departs(t, root, addrs, direct)

	srvs[lead].Close()
	srvs[lead] = nil
	next := leaderOf(t, srvs)
	after, err := client.Dial(addrs[next], client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	inUse, garbage := sliceSets(t, after)
	for id := range used {
		if !garbage[id] || inUse[id] {
			t.Fatalf("after the failover slice %d: garbage %v, in use %v; want freed", id, garbage[id], inUse[id])
		}
	}
}

// TestFailoverSessionsBehindRouterGroup: a client process holds a lock
// and an open unlinked file, through a router, in a partition of three
// replicas whose lock timeout is 2 s, and the leader is stopped. The new
// leader knows the client's open (replicated state: the file's slices
// stay in use) and, within a few heartbeats, its lock, which the client
// takes again when the new leader's heartbeat answer shows it fewer
// locks than it holds. The client is then killed with SIGKILL: another
// client gets the lock within a second and the file's space is freed.
func TestFailoverSessionsBehindRouterGroup(t *testing.T) {
	if addr := os.Getenv(holderAddrEnv); addr != "" {
		if err := lockHolder(addr); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		return
	}
	// Long enough that a lock freed by the holder's departure (within
	// seconds) is told apart from one freed by the timeout.
	const lockTimeout = 10 * time.Second
	store := "file://" + t.TempDir()
	_, root := servertest.Start(t, metaserver.Config{Partition: 0, Storage: store})
	srvs, addrs := startGroupWith(t, 1, store, lockTimeout)
	lead := leaderOf(t, srvs)
	r := startRouter(t, twoParts(root, addrs), Config{Root: []string{root}})
	other := dial(t, r.Addr())
	direct, err := client.Dial(strings.Join(addrs, ","), client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	cmd, ino := startHolder(t, r.Addr())
	ctx := testCtx(t)
	want := client.Lock{Type: client.WriteLock, End: client.LockEOF}
	if err := other.SetLk(ctx, ino, 7, want); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock while the child holds it: %v, want EAGAIN", err)
	}
	used, garbage := sliceSets(t, direct)
	if len(used) == 0 || len(garbage) != 0 {
		t.Fatalf("before the failover: %d slices in use, %d garbage", len(used), len(garbage))
	}

	srvs[lead].Close()
	srvs[lead] = nil
	next := leaderOf(t, srvs)
	failed := time.Now()
	deadline := failed.Add(4 * lockTimeout)
	for {
		l, err := other.GetLk(ctx, ino, 7, want)
		if err == nil && l.Type == client.WriteLock && l.Pid == 42 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new leader does not know the child's lock %v after the failover: %+v, %v", time.Since(failed), l, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("lock known to the new leader %v after the failover", time.Since(failed).Round(time.Millisecond))
	if err := other.SetLk(ctx, ino, 7, want); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock after the failover while the child holds it: %v, want EAGAIN", err)
	}
	inUse, garbage := sliceSets(t, direct)
	for id := range used {
		if !inUse[id] || garbage[id] {
			t.Fatalf("after the failover slice %d: in use %v, garbage %v; want in use (the file is open)", id, inUse[id], garbage[id])
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	for {
		err := other.SetLk(ctx, ino, 7, want)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("lock after the kill: %v", err)
		}
		if time.Since(killed) > lockTimeout/2 {
			t.Fatalf("the lock is still held %v after the holder was killed", time.Since(killed))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("lock taken %v after the kill", time.Since(killed).Round(time.Millisecond))
	waitFreed(t, direct, used, killed, fmt.Sprintf("the file's, at replica %d,", next+1))
}
