package router

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// routerChildEnv makes the test binary a router (routerChild) in front of
// the partitions it names: "ROOT,PART1".
const routerChildEnv = "CANOPY_TEST_ROUTER_CHILD"

// routerChild runs a router for the test of the process that started it,
// says where it listens, and waits for SIGKILL.
func routerChild(addrs string) error {
	root, part1, ok := strings.Cut(addrs, ",")
	if !ok {
		return fmt.Errorf("%s=%q: want ROOT,PART1", routerChildEnv, addrs)
	}
	src := twoParts(root, []string{part1})
	r, err := start(context.Background(), Config{Listen: "127.0.0.1:0", Root: []string{root}, TablesWait: time.Second,
		Logger: slog.New(slog.DiscardHandler)}, src)
	if err != nil {
		return err
	}
	fmt.Println("ready", r.Addr())
	select {} // wait for SIGKILL
}

// twoParts is the tables of the router tests with a holder: / in
// partition 0, /p1 in partition 1.
func twoParts(root string, part1 []string) *memTables {
	return newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {root}, 1: part1})
}

// startChild runs the test binary as a child for the current test with
// env set, and returns it with the first line it prints, once it has.
func startChild(t *testing.T, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	select {
	case line := <-lines:
		return cmd, line
	case <-time.After(time.Minute):
		t.Fatal("the child did not start in time")
	}
	return nil, ""
}

// killChild kills cmd with SIGKILL and waits for it.
func killChild(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestRouterDeath: two routers, A (a process of its own) and B, in front
// of two partitions whose lock timeout is 2 s. Client H (a process)
// reaches the partitions through A only; client C through A, or B when
// A cannot be reached. Both hold a lock and an open unlinked file in
// partition 1. A is killed with SIGKILL, so no router ends a session,
// and then H is killed too. H's session ends at its lease's expiry
// (another client gets its lock, its file's space is freed), while C,
// alive and reconnected through B, keeps its lock and its file: its
// heartbeats renew its lease through B.
func TestRouterDeath(t *testing.T) {
	if addrs := os.Getenv(routerChildEnv); addrs != "" {
		if err := routerChild(addrs); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		return
	}
	if addr := os.Getenv(holderAddrEnv); addr != "" {
		if err := lockHolder(addr); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		return
	}
	const lockTimeout = 2 * time.Second
	store := "file://" + t.TempDir()
	_, root := servertest.Start(t, metaserver.Config{Partition: 0, Storage: store, LockTimeout: lockTimeout})
	_, part1 := servertest.Start(t, metaserver.Config{Partition: 1, Storage: store, LockTimeout: lockTimeout})
	direct := dial(t, part1)

	routerA, line := startChild(t, routerChildEnv+"="+root+","+part1)
	addrA, ok := strings.CutPrefix(line, "ready ")
	if !ok {
		t.Fatalf("router child said %q", line)
	}
	b := startRouter(t, twoParts(root, []string{part1}), Config{Root: []string{root}})
	other := dial(t, b.Addr())
	ctx := testCtx(t)

	// C, through A first.
	c, err := client.Dial(addrA, client.Options{Addrs: []string{b.Addr()}, Cred: &client.Cred{}, OpTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, err := c.OpenFile(ctx, "/p1/kept", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetLk(ctx, f.Ino(), 3, client.Lock{Type: client.WriteLock, End: client.LockEOF}); err != nil {
		t.Fatal(err)
	}
	if err := c.Unlink(ctx, "/p1/kept"); err != nil {
		t.Fatal(err)
	}
	kept, _ := sliceSets(t, direct)

	// H, through A only.
	holder, hino := startHolder(t, addrA)
	all, garbage := sliceSets(t, direct)
	if len(kept) == 0 || len(all) <= len(kept) || len(garbage) != 0 {
		t.Fatalf("before the kills: %d slices of C's file, %d in all, %d garbage", len(kept), len(all), len(garbage))
	}
	want := client.Lock{Type: client.WriteLock, End: client.LockEOF}
	for _, ino := range []client.Ino{f.Ino(), hino} {
		if err := other.SetLk(ctx, ino, 7, want); !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("lock on %#x while it is held: %v, want EAGAIN", ino, err)
		}
	}

	killChild(t, routerA)
	killChild(t, holder)
	killed := time.Now()

	// H's lock is free and its file's space freed once its lease ends.
	deadline := killed.Add(4 * lockTimeout)
	for {
		err := other.SetLk(ctx, hino, 7, want)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EAGAIN) {
			t.Fatalf("lock after the kills: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("H's lock still held %v after its router and it were killed", time.Since(killed))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		_, garbage = sliceSets(t, direct)
		freed := 0
		for id := range all {
			if !kept[id] && garbage[id] {
				freed++
			}
		}
		if freed == len(all)-len(kept) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of H's %d slices freed %v after the kills", freed, len(all)-len(kept), time.Since(killed))
		}
		time.Sleep(10 * time.Millisecond)
	}
	ended := time.Since(killed)
	t.Logf("H's session ended %v after the kills", ended.Round(time.Millisecond))
	// H was last heard up to a heartbeat (a third of its lease, later on a
	// loaded machine) before the kills, so how long after them its lease
	// ran out is reported, not checked.

	// C, meanwhile silent but for its heartbeats (now through B), keeps
	// its session: its file and its lock.
	inUse, garbage := sliceSets(t, direct)
	for id := range kept {
		if !inUse[id] || garbage[id] {
			t.Fatalf("C's slice %d: in use %v, garbage %v; want kept", id, inUse[id], garbage[id])
		}
	}
	if err := other.SetLk(ctx, f.Ino(), 7, want); !errors.Is(err, syscall.EAGAIN) {
		t.Fatalf("C's lock after its router died: %v, want EAGAIN (still held)", err)
	}
	buf := make([]byte, 4096)
	if n, err := f.ReadAt(buf, 0); err != nil || n != len(buf) {
		t.Fatalf("read C's file after its router died: %d, %v", n, err)
	}
	// C leaving through B ends its session there.
	f.Close()
	c.Close()
	deadline = time.Now().Add(bound)
	for {
		_, garbage = sliceSets(t, direct)
		freed := 0
		for id := range kept {
			if garbage[id] {
				freed++
			}
		}
		if freed == len(kept) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of C's %d slices freed after it closed", freed, len(kept))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
