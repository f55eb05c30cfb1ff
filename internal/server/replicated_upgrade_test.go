package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/testaddr"
	"github.com/canopyfs/canopy/internal/vfs"
)

// writeUpgradeNamespace writes, through the single-replica server, what
// TestReplicatedUpgradeFromSingle checks later, and returns it: the names
// of /a and the modes of a few of its files.
func writeUpgradeNamespace(t *testing.T, cl *client.Client) (names []string, modes map[string]uint32) {
	t.Helper()
	ctx := context.Background()
	if _, err := cl.Mkdir(ctx, "/a", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/a/f%03d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.Rename(ctx, "/a/f001", "/a/renamed"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Unlink(ctx, "/a/f002"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Symlink(ctx, "f003", "/a/link"); err != nil {
		t.Fatal(err)
	}
	modes = map[string]uint32{"/a/f007": 0o600, "/a/f150": 0o640}
	for p, m := range modes {
		if _, err := cl.Chmod(ctx, p, m); err != nil {
			t.Fatal(err)
		}
	}
	return listNames(t, cl, "/a"), modes
}

func listNames(t *testing.T, cl *client.Client, dir string) []string {
	t.Helper()
	ents, err := cl.ReadDir(context.Background(), dir)
	if err != nil {
		t.Fatalf("readdir %s: %v", dir, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// checkUpgradeNamespace checks that cl sees what the single-replica
// server held.
func checkUpgradeNamespace(t *testing.T, cl *client.Client, names []string, modes map[string]uint32) {
	t.Helper()
	if got := listNames(t, cl, "/a"); !slices.Equal(got, names) {
		t.Fatalf("/a holds %d names after the upgrade, %d before", len(got), len(names))
	}
	for p, m := range modes {
		fi, err := cl.Stat(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Attr().Mode&0o7777 != m {
			t.Fatalf("%s: mode %o after the upgrade, %o before", p, fi.Attr().Mode&0o7777, m)
		}
	}
}

// TestReplicatedUpgradeFromSingle: a directory written by a single-replica
// server, opened as a replica of a group of one, is upgraded once: the
// namespace is all there, the single-replica files are moved into
// pre-raft/, a replica added with --join catches up from the upgraded
// state to byte-identical checkpoints, and a restart neither upgrades
// again nor loses anything. Asked to become one of several voters
// straight away, the directory is refused.
func TestReplicatedUpgradeFromSingle(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "r1")
	single, addr := openAndServe(t, Config{Dir: dir})
	names, modes := writeUpgradeNamespace(t, dial(t, addr, client.Cred{}))
	shutdown(t, single)
	single.Close()

	p1 := Peer{ID: 1, Addr: testaddr.Free(t), RaftAddr: testaddr.Free(t)}
	p2 := Peer{ID: 2, Addr: testaddr.Free(t), RaftAddr: testaddr.Free(t)}
	// Straight into a group of two: refused, and nothing moved.
	_, err := Open(Config{Dir: dir, Peers: []Peer{p1, p2}, ReplicaID: 1, Logger: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, errUpgradeGroup) {
		t.Fatalf("open as one of two voters: %v", err)
	}
	if files, _ := singleFiles(&Config{Dir: dir, FS: vfs.Default}); len(files) == 0 {
		t.Fatal("the refused upgrade moved the single-replica files")
	}

	g := &group{t: t, srvs: []*Server{nil}, peers: []Peer{p1}, dirs: []string{dir}}
	t.Cleanup(func() {
		for _, s := range g.srvs {
			if s != nil {
				s.Close()
			}
		}
	})
	g.start(0)
	g.leader()
	cl := dial(t, p1.Addr, client.Cred{})
	checkUpgradeNamespace(t, cl, names, modes)
	if files, _ := singleFiles(&Config{Dir: dir, FS: vfs.Default}); len(files) != 0 {
		t.Fatalf("single-replica files left in %s: %v", dir, files)
	}
	kept, err := vfs.Default.ReadDir(filepath.Join(dir, preRaftDir))
	if err != nil || !slices.ContainsFunc(kept, func(n string) bool { return strings.HasPrefix(n, "log-") }) {
		t.Fatalf("%s holds %v, %v: no single-replica log", preRaftDir, kept, err)
	}
	if _, err := cl.Create(ctx, "/a/after", 0o644); err != nil {
		t.Fatal(err)
	}
	names = append(names, "after")
	slices.Sort(names)

	// A second replica joins and catches up from the upgraded state.
	g.peers = append(g.peers, p2)
	g.dirs = append(g.dirs, filepath.Join(t.TempDir(), "r2"))
	g.srvs = append(g.srvs, nil)
	g.startJoin(1)
	groupChange(t, []string{p1.Addr}, pb.Method_GROUP_ADD, &pb.GroupAddRequest{Id: p2.ID, Addr: p2.Addr, RaftAddr: p2.RaftAddr})
	g.waitSame(0, 1)

	// Restarted, replica 1 is not upgraded again and holds everything.
	g.stop(0)
	g.start(0)
	lead := g.leader()
	cl2 := dial(t, g.peers[lead].Addr, client.Cred{})
	checkUpgradeNamespace(t, cl2, names, modes)
	g.waitSame(0, 1)
}
