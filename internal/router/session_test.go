package router

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// The departed-client test re-executes this test binary as a client of
// the router that opens a file in partition 1, writes it, takes a POSIX
// lock on it, unlinks it while it is open, says so, and is killed with
// SIGKILL.
const holderAddrEnv = "CANOPY_TEST_HOLDER_ROUTER"

// lockHolder is the child's side.
func lockHolder(addr string) error {
	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		return err
	}
	f, err := c.OpenFile(ctx, "/p1/held", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := c.SetLk(ctx, f.Ino(), 1, client.Lock{Type: client.WriteLock, End: client.LockEOF, Pid: 42}); err != nil {
		return err
	}
	if err := c.Unlink(ctx, "/p1/held"); err != nil {
		return err
	}
	fmt.Println("ready", uint64(f.Ino()))
	select {} // wait for SIGKILL
}

// startHolder runs lockHolder in a child process and returns it with the
// inode of its file, once it holds the lock.
func startHolder(t *testing.T, addr string) (*exec.Cmd, client.Ino) {
	t.Helper()
	cmd, line := startChild(t, holderAddrEnv+"="+addr)
	var ino uint64
	if _, err := fmt.Sscanf(line, "ready %d", &ino); err != nil {
		t.Fatalf("child said %q", line)
	}
	return cmd, client.Ino(ino)
}

// slices returns the ids of the slices partition 1's files use and of its
// garbage, read directly from the partition.
func sliceSets(t *testing.T, c *client.Client) (used, garbage map[uint64]bool) {
	t.Helper()
	ctx := testCtx(t)
	admin := clientdata.Admin(c, 1)
	list := func(what string, fn func() (*pb.ListSlicesReply, error)) map[uint64]bool {
		r, err := fn()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ids := map[uint64]bool{}
		for _, s := range r.Slices {
			ids[s.Id] = true
		}
		return ids
	}
	used = list("list slices", func() (*pb.ListSlicesReply, error) { return admin.ListSlices(ctx, 0, 1000) })
	garbage = list("list garbage", func() (*pb.ListSlicesReply, error) { return admin.ListGarbage(ctx, 0, 1000, math.MaxInt64) })
	return used, garbage
}

// TestDepartedClientBehindRouter: a client process holding a POSIX lock
// and an open unlinked file through the router is killed with SIGKILL.
// Another client of the router gets the lock within a second (the lock
// timeout is ten), and the file's slices become garbage, its space
// freed, without a restart.
func TestDepartedClientBehindRouter(t *testing.T) {
	if addr := os.Getenv(holderAddrEnv); addr != "" {
		if err := lockHolder(addr); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		return
	}
	store := "file://" + t.TempDir()
	var addrs []string
	for p := range uint16(2) {
		_, addr := servertest.Start(t, metaserver.Config{Partition: p, Storage: store})
		addrs = append(addrs, addr)
	}
	departs(t, addrs[0], addrs[1:], dial(t, addrs[1]))
}

// departs runs the departed-client test with partition 1 served by the
// replicas at part1, its slices read through direct.
func departs(t *testing.T, root string, part1 []string, direct *client.Client) (used map[uint64]bool) {
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: part1})
	r := startRouter(t, src, Config{Root: []string{root}})
	other := dial(t, r.Addr())

	cmd, ino := startHolder(t, r.Addr())
	if partOf(ino) != 1 {
		t.Fatalf("the child's file has inode %#x, not in partition 1", ino)
	}
	ctx := testCtx(t)
	want := client.Lock{Type: client.WriteLock, End: client.LockEOF}
	if err := other.SetLk(ctx, ino, 7, want); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("lock while the child holds it: %v, want EAGAIN", err)
	}
	used, garbage := sliceSets(t, direct)
	if len(used) == 0 || len(garbage) != 0 {
		t.Fatalf("before the kill: %d slices in use, %d garbage; want the open file's in use", len(used), len(garbage))
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
		if time.Since(killed) > time.Second {
			t.Fatalf("the lock is still held %v after the holder was killed", time.Since(killed))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("lock taken %v after the kill", time.Since(killed).Round(time.Millisecond))
	waitFreed(t, direct, used, killed, "the unlinked file's")
	if inUse, _ := sliceSets(t, direct); len(inUse) != 0 {
		t.Fatalf("slices still in use after the session end: %v", inUse)
	}
	return used
}

// waitFreed waits until every slice of used is garbage at the partition c
// reaches: the file's space is freed (within 10 s of since).
func waitFreed(t *testing.T, c *client.Client, used map[uint64]bool, since time.Time, whose string) {
	t.Helper()
	for {
		_, garbage := sliceSets(t, c)
		freed := 0
		for id := range used {
			if garbage[id] {
				freed++
			}
		}
		if freed == len(used) {
			return
		}
		if time.Since(since) > 10*time.Second {
			t.Fatalf("%d of %s %d slices freed %v after the kill", freed, whose, len(used), time.Since(since))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
