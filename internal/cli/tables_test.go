package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

func mountTable(t *testing.T, addr string) mountTableJSON {
	t.Helper()
	var m mountTableJSON
	if out := mustCanopy(t, addr, "mounttable", "ls", "--json"); json.Unmarshal([]byte(out), &m) != nil {
		t.Fatalf("mounttable ls --json printed %q", out)
	}
	return m
}

func routingTable(t *testing.T, addr string) routingJSON {
	t.Helper()
	var r routingJSON
	if out := mustCanopy(t, addr, "routing", "ls", "--json"); json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("routing ls --json printed %q", out)
	}
	return r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestTableCommands administers the tables of a root partition and a
// second partition, directly and through a router.
func TestTableCommands(t *testing.T) {
	_, root := servertest.Start(t, server.Config{})
	_, p5 := servertest.Start(t, server.Config{Partition: 5})

	fresh := mountTable(t, root)
	if want := []client.MountEntry{{Prefix: "/", Target: "/"}}; fresh.Version != 0 || !reflect.DeepEqual(fresh.Mounts, want) {
		t.Fatalf("fresh mount table %+v, want version 0 and %+v", fresh, want)
	}
	mustCanopy(t, root, "routing", "set", "0", root)
	mustCanopy(t, root, "routing", "set", "5", p5)
	mustCanopy(t, root, "mounttable", "add", "/user/alice/", "5:/home/alice")
	mustCanopy(t, root, "mounttable", "add", "/archive", "5", "--read-only")

	// The target was made in partition 5, with its parents.
	c5, err := client.Dial(p5, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	fi, err := c5.Stat(context.Background(), "/home/alice")
	if err != nil || !fi.IsDir() || protocol.PartitionOf(uint64(fi.Sys().(*client.Attr).Ino)) != 5 {
		t.Fatalf("target in partition 5: %v, %v", fi, err)
	}

	got := mountTable(t, root)
	wantMounts := []client.MountEntry{
		{Prefix: "/", Target: "/"},
		{Prefix: "/archive", VPart: 5, Target: "/", ReadOnly: true},
		{Prefix: "/user/alice", VPart: 5, Target: "/home/alice"},
	}
	if got.Version != 4 || !reflect.DeepEqual(got.Mounts, wantMounts) {
		t.Fatalf("mount table %+v, want version 4 and %+v", got, wantMounts)
	}
	wantRoutes := []client.Route{{VPart: 0, Addrs: []string{root}}, {VPart: 5, Addrs: []string{p5}}}
	if r := routingTable(t, root); r.Version != 4 || !reflect.DeepEqual(r.Routes, wantRoutes) {
		t.Fatalf("routing table %+v, want %+v", r, wantRoutes)
	}
	ls := mustCanopy(t, root, "mounttable", "ls")
	for _, line := range []string{"/archive     5      /            ro", "/user/alice  5      /home/alice  rw", "version 4"} {
		if !strings.Contains(ls, line+"\n") {
			t.Errorf("mounttable ls:\n%s\nlacks %q", ls, line)
		}
	}

	// Refusals say why, in one line.
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"mounttable", "rm", "/nope"}, `mounttable rm /nope: mount: table: "/nope" is not mounted: no such file or directory`},
		{[]string{"mounttable", "rm", "/"}, "cannot be unmounted"},
		{[]string{"mounttable", "add", "/q", "9"}, "virtual partition 9 has no route"},
		{[]string{"mounttable", "add", "/q", "4096"}, "want a number below 4096"},
		{[]string{"mounttable", "add", "q", "5"}, "not absolute"},
		{[]string{"routing", "set", "7", "a:1,a:1"}, `lists "a:1" twice`},
	} {
		_, err := canopy(t, root, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("canopy %s: %v, want one line saying %q", strings.Join(tc.args, " "), err, tc.says)
		}
	}

	// Through a router (given after an address nobody serves, so the
	// commands fail over to it): the router follows the change.
	r, err := router.Start(context.Background(), router.Config{Listen: "127.0.0.1:0", Root: []string{root}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	via := dead + "," + r.Addr()
	mustCanopy(t, via, "mounttable", "rm", "/archive")
	if m := mountTable(t, via); m.Version != 5 || len(m.Mounts) != 2 {
		t.Fatalf("mount table through the router after rm: %+v", m)
	}
	waitFor(t, "the router to take version 5", func() bool { return r.Version() == 5 })
	mustCanopy(t, via, "touch", "/user/alice/notes")
	if _, err := c5.Stat(context.Background(), "/home/alice/notes"); err != nil {
		t.Fatalf("a file made through the router under /user/alice is not in partition 5: %v", err)
	}
}

// startUpArgs runs `canopy ARGS...` as a child process and waits for its
// ready line.
func startUpArgs(t *testing.T, args ...string) *upProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, "\x1f"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "canopy: ready at ")
	if err != nil || !ok {
		t.Fatalf("ready line %q (%v), want \"canopy: ready at ADDR\"", line, err)
	}
	return &upProcess{cmd: cmd, addr: addr}
}

func statJSONOf(t *testing.T, addr, p string) statJSON {
	t.Helper()
	var s statJSON
	if out := mustCanopy(t, addr, "stat", "--json", p); json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("stat --json %s printed %q", p, out)
	}
	return s
}

// TestUpPartitions runs `canopy up --partitions 3` as a process: files
// under /pK live in partition K, and survive a kill and restart.
func TestUpPartitions(t *testing.T) {
	dir := t.TempDir()
	args := []string{"up", "--dir", dir, "--listen", "127.0.0.1:0", "--partitions", "3"}
	up := startUpArgs(t, args...)
	a := up.addr

	m := mountTable(t, a)
	want := []client.MountEntry{{Prefix: "/", Target: "/"}, {Prefix: "/p1", VPart: 1, Target: "/"}, {Prefix: "/p2", VPart: 2, Target: "/"}}
	if !reflect.DeepEqual(m.Mounts, want) {
		t.Fatalf("mount table of up --partitions 3: %+v, want %+v", m.Mounts, want)
	}
	mustCanopy(t, a, "mkdir", "-p", "/p1/data/x", "/p2/logs", "/top")
	mustCanopy(t, a, "touch", "/p1/data/x/f", "/p2/logs/l", "/top/t")
	check := func() map[string]statJSON {
		out := map[string]statJSON{}
		for p, part := range map[string]uint16{"/p1/data/x/f": 1, "/p1/data": 1, "/p2/logs/l": 2, "/top/t": 0} {
			s := statJSONOf(t, a, p)
			if protocol.PartitionOf(s.Ino) != part {
				t.Errorf("%s: inode %#x in partition %d, want %d", p, s.Ino, protocol.PartitionOf(s.Ino), part)
			}
			out[p] = s
		}
		if ls := strings.Fields(mustCanopy(t, a, "ls", "/")); !reflect.DeepEqual(ls, []string{"p1", "p2", "top"}) {
			t.Errorf("ls / = %v, want the mount points and /top", ls)
		}
		return out
	}
	before := check()

	up.cmd.Process.Signal(syscall.SIGKILL)
	up.cmd.Wait()
	up = startUpArgs(t, args...)
	a = up.addr
	after := check()
	if !reflect.DeepEqual(after, before) {
		t.Errorf("after kill -9 and restart:\n%+v\nbefore:\n%+v", after, before)
	}
	if m2 := mountTable(t, a); !reflect.DeepEqual(m2.Mounts, want) {
		t.Errorf("mount table after restart: %+v", m2.Mounts)
	}
	// The routes follow the partitions' new ports.
	for _, r := range routingTable(t, a).Routes {
		c, err := client.Dial(r.Addrs[0], client.Options{})
		if err != nil {
			t.Fatalf("route of vpart %d: %v", r.VPart, err)
		}
		c.Close()
	}
}

// TestRouterCommand runs `canopy router` as a process in front of a root
// partition and a second partition.
func TestRouterCommand(t *testing.T) {
	_, root := servertest.Start(t, server.Config{})
	_, p1 := servertest.Start(t, server.Config{Partition: 1})
	mustCanopy(t, root, "routing", "set", "1", p1)
	mustCanopy(t, root, "mounttable", "add", "/one", "1:/top")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join([]string{"router", "--listen", "127.0.0.1:0", "--root", root}, "\x1f"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "canopy: router ready at ")
	if err != nil || !ok {
		t.Fatalf("ready line %q (%v), want \"canopy: router ready at ADDR\"", line, err)
	}
	mustCanopy(t, addr, "touch", "/one/f")
	if s := statJSONOf(t, addr, "/one/f"); protocol.PartitionOf(s.Ino) != 1 {
		t.Fatalf("/one/f through the router: inode %#x, want partition 1", s.Ino)
	}
	if s := statJSONOf(t, p1, "/top/f"); protocol.PartitionOf(s.Ino) != 1 {
		t.Fatalf("/top/f in partition 1: %+v", s)
	}
	// SIGTERM stops it cleanly.
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("router after SIGTERM: %v", err)
	}
}
