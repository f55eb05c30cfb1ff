package router

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// xfixture is three partitions sharing one object store, mounted at /
// (0), /p1 (1) and /p2 (2), behind one router.
type xfixture struct {
	servers []*metaserver.Server
	cfgs    []metaserver.Config
	direct  []*client.Client
	addrs   []string // the partitions'
	src     *memTables
	r       *Router
	c       *client.Client
}

func newXFixture(t *testing.T, cfg Config) *xfixture {
	t.Helper()
	f := &xfixture{}
	store := "file://" + t.TempDir()
	var addrs []string
	for p := range uint16(3) {
		c := metaserver.Config{Partition: p, Storage: store, Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
		s, addr := servertest.Start(t, c)
		f.servers, f.cfgs = append(f.servers, s), append(f.cfgs, c)
		addrs = append(addrs, addr)
		f.direct = append(f.direct, dial(t, addr))
	}
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
		{Prefix: "/p2", Vpart: 2, Target: "/"},
	}, map[uint32][]string{0: {addrs[0]}, 1: {addrs[1]}, 2: {addrs[2]}})
	f.addrs, f.src = addrs, src
	cfg.Root = []string{addrs[0]}
	cfg.Registry = prometheus.NewRegistry()
	f.r = startRouter(t, src, cfg)
	f.c = dial(t, f.r.Addr())
	return f
}

// intents returns the intents partition vp holds, asked of it directly
// (a router refuses the protocol's steps from clients).
func (f *xfixture) intents(t *testing.T, vp uint16) []*pb.XIntent {
	t.Helper()
	status, out := rawCall(t, f.addrs[vp], pb.Method_XRENAME_LIST, &pb.XIntentRequest{Ino: protocol.RootIno(vp)})
	var list pb.XIntentListReply
	if status != 0 || proto.Unmarshal(out, &list) != nil {
		t.Fatalf("list intents of vpart %d: status %d", vp, status)
	}
	return list.Intents
}

// verify stops the partitions and checks each one's invariants from what
// it left on disk.
func (f *xfixture) verify(t *testing.T) {
	t.Helper()
	for p, s := range f.servers {
		s.Close()
		if _, err := metaserver.Verify(f.cfgs[p]); err != nil {
			t.Errorf("partition %d: %v", p, err)
		}
	}
}

func TestRenameAcrossPartitions(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	c := f.c
	for _, d := range []string{"/p1/d", "/p2/d", "/top"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := bytes.Repeat([]byte("canopy "), 100_000)
	if err := c.WriteFile(ctx, "/p1/d/f", data, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := c.SetXattr(ctx, "/p1/d/f", "user.tag", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Stat(ctx, "/p1/d/f")

	// A file moves, with its content, mode and xattrs.
	if err := c.Rename(ctx, "/p1/d/f", "/p2/d/g"); err != nil {
		t.Fatalf("rename across partitions: %v", err)
	}
	if _, err := c.Stat(ctx, "/p1/d/f"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("source after the rename: %v, want ENOENT", err)
	}
	after, err := c.Stat(ctx, "/p2/d/g")
	if err != nil || after.Ino().Partition() != 2 || after.Size() != before.Size() || after.Mode() != before.Mode() ||
		after.ModTime() != before.ModTime() {
		t.Fatalf("target after the rename: %v %v (before %v)", after, err, before)
	}
	if got, err := c.ReadFile(ctx, "/p2/d/g"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("content after the rename: %d bytes, %v", len(got), err)
	}
	if v, err := c.GetXattr(ctx, "/p2/d/g", "user.tag"); err != nil || string(v) != "v1" {
		t.Fatalf("xattr after the rename: %q %v", v, err)
	}
	// It can be written there and moved on to a third partition.
	if err := c.WriteFile(ctx, "/p2/d/g", []byte("second"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/p2/d/g", "/top/g"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadFile(ctx, "/top/g"); err != nil || string(got) != "second" {
		t.Fatalf("content after the second rename: %q, %v", got, err)
	}

	// Replacing: the old target goes.
	if err := c.WriteFile(ctx, "/p1/d/old", []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Rename(ctx, "/top/g", "/p1/d/old"); err != nil {
		t.Fatalf("replacing rename: %v", err)
	}
	if got, err := c.ReadFile(ctx, "/p1/d/old"); err != nil || string(got) != "second" {
		t.Fatalf("replaced target: %q, %v", got, err)
	}
	// No-replace refuses an existing target and changes nothing.
	if _, err := c.Create(ctx, "/p2/d/x", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.RenameFlags(ctx, "/p1/d/old", "/p2/d/x", client.RenameNoReplace); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("no-replace onto an existing target: %v, want EEXIST", err)
	}
	if err := c.RenameFlags(ctx, "/p1/d/old", "/p2/d/y", client.RenameNoReplace); err != nil {
		t.Fatalf("no-replace onto a free name: %v", err)
	}
	// Exchange swaps the two nodes.
	if err := c.WriteFile(ctx, "/p1/d/e", []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteFile(ctx, "/p2/d/e", []byte("two!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.RenameFlags(ctx, "/p1/d/e", "/p2/d/e", client.RenameExchange); err != nil {
		t.Fatalf("exchange: %v", err)
	}
	a, _ := c.ReadFile(ctx, "/p1/d/e")
	b, _ := c.ReadFile(ctx, "/p2/d/e")
	if string(a) != "two!" || string(b) != "one" {
		t.Fatalf("after the exchange: %q and %q", a, b)
	}
	if err := c.RenameFlags(ctx, "/p1/d/e", "/p2/d/none", client.RenameExchange); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("exchange with a missing target: %v, want ENOENT", err)
	}
	// Symlinks and by-inode renames.
	if _, err := c.Symlink(ctx, "/somewhere", "/p1/d/ln"); err != nil {
		t.Fatal(err)
	}
	d1, _ := c.Stat(ctx, "/p1/d")
	d2, _ := c.Stat(ctx, "/p2/d")
	if err := c.RenameAt(ctx, d1.Ino(), "ln", d2.Ino(), "ln2", 0); err != nil {
		t.Fatalf("rename by inode across partitions: %v", err)
	}
	if tgt, err := c.Readlink(ctx, "/p2/d/ln2"); err != nil || tgt != "/somewhere" {
		t.Fatalf("moved symlink: %q %v", tgt, err)
	}
	// Refusals: a file onto a directory, a directory into its own
	// subtree, permissions, a missing source.
	if err := c.Rename(ctx, "/p2/d/x", "/p1/d"); !errors.Is(err, syscall.EISDIR) {
		t.Fatalf("file onto a directory: %v, want EISDIR", err)
	}
	if err := c.Rename(ctx, "/", "/p1/d/root"); err == nil {
		t.Fatal("rename of / succeeded")
	}
	if err := c.Rename(ctx, "/p2/d/none", "/p1/d/none"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("missing source: %v, want ENOENT", err)
	}
	user, err := client.Dial(f.r.Addr(), client.Options{Cred: &client.Cred{UID: 1000, GID: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if err := user.Rename(ctx, "/p2/d/x", "/p1/d/x"); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("rename without write permission: %v, want EACCES", err)
	}
	// The sources forget their intents after the replies.
	deadline := time.Now().Add(bound)
	for vp := range uint16(3) {
		for in := f.intents(t, vp); len(in) != 0; in = f.intents(t, vp) {
			if time.Now().After(deadline) {
				t.Fatalf("vpart %d holds %d intents after the renames", vp, len(in))
			}
			time.Sleep(time.Millisecond)
		}
	}
	f.verify(t)
}

// TestRouterRefusesRenameSteps: the steps of a rename across partitions
// carry node images, so a client cannot send them through a router: the
// router answers EPERM and nothing changes.
func TestRouterRefusesRenameSteps(t *testing.T) {
	f := newXFixture(t, Config{})
	image := &pb.XIntentRequest{Ino: protocol.RootIno(1), Id: make([]byte, 32)}
	for _, m := range []pb.Method{pb.Method_XRENAME_LIST, pb.Method_XRENAME_STATE, pb.Method_XRENAME_PREPARE_DST,
		pb.Method_XRENAME_COMMIT_DST, pb.Method_XRENAME_ABORT, pb.Method_XRENAME_FORGET} {
		if status, _ := rawCall(t, f.r.Addr(), m, image); status != uint32(syscall.EPERM) {
			t.Errorf("%s through the router: status %d, want EPERM", m, status)
		}
	}
	if n := len(f.intents(t, 1)); n != 0 {
		t.Fatalf("%d intents after refused steps", n)
	}
}

func TestRenameAcrossPartitionsCycleAndDirectories(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	if err := f.c.MkdirAll(ctx, "/p1/d/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	// The root partition's directory holding the mount point /p1 cannot
	// move into it: a directory into its own subtree.
	if _, err := f.c.Mkdir(ctx, "/a", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Rename(ctx, "/", "/p1/d/x"); err == nil {
		t.Fatal("/ moved below itself")
	}
	status, _ := rawCall(t, f.r.Addr(), pb.Method_RENAME, &pb.RenameRequest{Path: "/", NewPath: "/p1/d/x"})
	if status != uint32(syscall.EINVAL) && status != uint32(syscall.EBUSY) {
		t.Fatalf("/ into its own subtree: status %d", status)
	}
	if err := f.c.Rename(ctx, "/p1", "/p1/d/p1"); !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("a mount point into its own subtree: %v", err)
	}
	f.verify(t)
}

// treeOf lists the subtree at dir through c: each node's path below dir,
// mode, size and, for a file, its bytes' checksum.
func treeOf(t *testing.T, c *client.Client, dir string) []string {
	t.Helper()
	ctx := testCtx(t)
	var out []string
	var walk func(at string)
	walk = func(at string) {
		ents, err := c.ReadDir(ctx, dir+at)
		if err != nil {
			t.Fatalf("readdir %s: %v", dir+at, err)
		}
		for _, e := range ents {
			p := at + "/" + e.Name()
			fi, err := c.Lstat(ctx, dir+p)
			if err != nil {
				t.Fatal(err)
			}
			line := fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size())
			switch {
			case fi.IsDir():
				walk(p)
			case fi.Mode().IsRegular():
				b, err := c.ReadFile(ctx, dir+p)
				if err != nil {
					t.Fatalf("read %s: %v", dir+p, err)
				}
				line += fmt.Sprintf(" %x", sha256.Sum256(b))
			}
			out = append(out, line)
		}
	}
	walk("")
	slices.Sort(out)
	return out
}

// TestDirectoryRenameAcrossPartitions: a directory moves between
// partitions with its subtree, by path and by inode, onto a new name or an
// empty directory; contents read back the same; a directory that is not
// empty is not replaced, and one with a mount point below it, named by
// inode where the router cannot see the path, does not move.
func TestDirectoryRenameAcrossPartitions(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	c := f.c
	for _, d := range []string{"/p1/d/tree/a/b", "/p1/d/tree/c", "/p2/d/full", "/p2/d/empty"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range []string{"/p1/d/tree/x", "/p1/d/tree/a/y", "/p1/d/tree/a/b/z", "/p2/d/full/keep"} {
		if err := c.WriteFile(ctx, p, bytes.Repeat([]byte{byte('a' + i)}, 1000*(i+1)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("canopy "), 200_000) // in the object store, not inline
	if err := c.WriteFile(ctx, "/p1/d/tree/c/big", big, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Symlink(ctx, "a/y", "/p1/d/tree/sym"); err != nil {
		t.Fatal(err)
	}
	want := treeOf(t, c, "/p1/d/tree")

	if err := c.Rename(ctx, "/p1/d/tree", "/p2/d/full"); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("onto a directory that is not empty: %v", err)
	}
	if err := c.Rename(ctx, "/p1/d/tree", "/p2/d/moved"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "/p1/d/tree"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("source after the move: %v", err)
	}
	if got := treeOf(t, c, "/p2/d/moved"); !slices.Equal(got, want) {
		t.Fatalf("moved tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// On by inode, onto an empty directory of the root partition.
	if err := c.MkdirAll(ctx, "/top/empty", 0o755); err != nil {
		t.Fatal(err)
	}
	p2d, err := c.Stat(ctx, "/p2/d")
	if err != nil {
		t.Fatal(err)
	}
	top, err := c.Stat(ctx, "/top")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RenameAt(ctx, p2d.Ino(), "moved", top.Ino(), "empty", 0); err != nil {
		t.Fatal(err)
	}
	if got := treeOf(t, c, "/top/empty"); !slices.Equal(got, want) {
		t.Fatalf("tree moved on by inode:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A mount point below: /top/empty/a is mounted from partition 2.
	version := f.src.edit(func(rep *pb.TablesReply) {
		setMount(rep, &pb.MountEntry{Prefix: "/top/empty/a", Vpart: 2, Target: "/d"})
	})
	waitVersion(t, version, f.r)
	err = c.RenameAt(ctx, top.Ino(), "empty", p2d.Ino(), "again", 0)
	if !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("a directory with a mount point below it, by inode: %v, want EBUSY", err)
	}
	if err := c.Rename(ctx, "/top/empty", "/p1/again"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("a directory with a mount point below it, by path: %v, want EBUSY", err)
	}
	for vp := range uint16(3) {
		if n := len(f.intents(t, vp)); n != 0 {
			t.Fatalf("vpart %d: %d intents left", vp, n)
		}
	}
	f.verify(t)
}

// TestRenameAcrossPartitionsRecovers leaves intents half done, as a router
// that stopped between the steps would, and checks that the recovery pass
// settles each to all or nothing.
func TestRenameAcrossPartitionsRecovers(t *testing.T) {
	f := newXFixture(t, Config{XRenameEvery: -1, XRenameGrace: time.Millisecond})
	ctx := testCtx(t)
	for _, d := range []string{"/p1/d", "/p2/d"} {
		if err := f.c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The steps go to the partitions directly, as a router sends them (a
	// router refuses them from clients): a path /pN/rest to partition N as
	// /rest, an intent to the partition of its inode.
	var rcs []*rpc.Client
	for _, addr := range f.addrs {
		rc, err := rpc.Dial(addr, rpc.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		rcs = append(rcs, rc)
	}
	call := func(m pb.Method, req, out proto.Message) uint32 {
		t.Helper()
		var vp uint16
		switch r := req.(type) {
		case *pb.XPrepareRequest:
			vp = uint16(r.Path[2] - '0')
			r.Path = r.Path[3:]
		case *pb.XIntentRequest:
			vp = protocol.PartitionOf(r.Ino)
		}
		b, _ := proto.Marshal(req)
		st, reply, err := rcs[vp].Call(ctx, uint16(m), rpc.Cred{}, b)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil && st == 0 {
			if err := proto.Unmarshal(reply, out); err != nil {
				t.Fatal(err)
			}
		}
		return st
	}
	// stop runs the protocol for /p1/d/NAME -> /p2/d/NAME up to step n.
	stop := func(name string, n int) {
		t.Helper()
		if err := f.c.WriteFile(ctx, "/p1/d/"+name, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		id := []byte(fmt.Sprintf("%-16s", name))
		if n >= 1 && call(pb.Method_XRENAME_PREPARE_SRC, &pb.XPrepareRequest{Path: "/p1/d/" + name, Id: id, Peer: 2}, nil) != 0 {
			t.Fatal("prepare source")
		}
		if n >= 2 && call(pb.Method_XRENAME_PREPARE_DST, &pb.XPrepareRequest{Path: "/p2/d/" + name, Id: id, Peer: 1}, nil) != 0 {
			t.Fatal("prepare target")
		}
		if n >= 3 && call(pb.Method_XRENAME_COMMIT_SRC, &pb.XIntentRequest{Ino: protocol.RootIno(1), Id: id}, nil) != 0 {
			t.Fatal("commit source")
		}
	}
	stop("one", 1)   // source prepared: rolls back
	stop("two", 2)   // both prepared: rolls back
	stop("three", 3) // committed at the source: rolls forward
	// While the target entry is reserved, nothing else may take it.
	if _, err := f.c.Create(ctx, "/p2/d/two", 0o644); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("create at a reserved name: %v, want EBUSY", err)
	}
	// A target intent whose source holds nothing was aborted.
	lone := []byte("lone-target-----")
	if call(pb.Method_XRENAME_PREPARE_DST, &pb.XPrepareRequest{Path: "/p2/d/lone", Id: lone, Peer: 1}, nil) != 0 {
		t.Fatal("prepare lone target")
	}
	// A late prepare at the target of a rename already done (a retry of the
	// client's call that prepared the source before the first attempt
	// finished) leaves a target intent whose source says "done": it is
	// aborted too, or its name would stay reserved for ever.
	if err := f.c.WriteFile(ctx, "/p1/d/late", []byte("late"), 0o644); err != nil {
		t.Fatal(err)
	}
	late := []byte("late-prepare----")
	var img pb.XPrepareReply
	if call(pb.Method_XRENAME_PREPARE_SRC, &pb.XPrepareRequest{Path: "/p1/d/late", Id: late, Peer: 2}, nil) != 0 ||
		call(pb.Method_XRENAME_PREPARE_DST, &pb.XPrepareRequest{Path: "/p2/d/late", Id: late, Peer: 1}, nil) != 0 ||
		call(pb.Method_XRENAME_COMMIT_SRC, &pb.XIntentRequest{Ino: protocol.RootIno(1), Id: late}, &img) != 0 ||
		call(pb.Method_XRENAME_COMMIT_DST, &pb.XIntentRequest{Ino: protocol.RootIno(2), Id: late, Image: img.Image}, nil) != 0 ||
		call(pb.Method_XRENAME_FORGET, &pb.XIntentRequest{Ino: protocol.RootIno(1), Id: late}, nil) != 0 {
		t.Fatal("the steps of a rename")
	}
	if call(pb.Method_XRENAME_PREPARE_DST, &pb.XPrepareRequest{Path: "/p2/d/other", Id: late, Peer: 1}, nil) != 0 {
		t.Fatal("late prepare of the target")
	}
	time.Sleep(2 * time.Millisecond) // past the grace of 1 ms, by the partitions' clocks
	for i := 0; ; i++ {
		f.r.RecoverOnce(ctx, time.Millisecond)
		if len(f.intents(t, 1))+len(f.intents(t, 2)) == 0 {
			break
		}
		if i > 100 {
			t.Fatalf("intents left: %v %v", f.intents(t, 1), f.intents(t, 2))
		}
	}
	if _, err := f.c.Create(ctx, "/p2/d/other", 0o644); err != nil {
		t.Fatalf("the name a late prepare reserved, after recovery: %v", err)
	}
	for name, at := range map[string]string{"one": "/p1/d/", "two": "/p1/d/", "three": "/p2/d/", "late": "/p2/d/"} {
		got, err := f.c.ReadFile(ctx, at+name)
		if err != nil || string(got) != name {
			t.Errorf("%s: %q %v, want it in %s", name, got, err, at)
		}
		other := "/p2/d/"
		if at == other {
			other = "/p1/d/"
		}
		if _, err := f.c.Stat(ctx, other+name); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("%s also in %s: %v", name, other, err)
		}
	}
	// The committed source refuses to be aborted; the aborted one to commit.
	if st := call(pb.Method_XRENAME_COMMIT_SRC, &pb.XIntentRequest{Ino: protocol.RootIno(1), Id: []byte(fmt.Sprintf("%-16s", "one"))}, nil); st != uint32(syscall.ETIMEDOUT) {
		t.Fatalf("commit of an aborted intent: status %d, want ETIMEDOUT", st)
	}
	f.verify(t)
}

// xrenameBenchEnv makes TestRenameAcrossPartitionsSpeed run: 16 callers
// rename files back and forth within partition 1, then between
// partitions 1 and 2, each for the given duration (e.g. 5s), and print
// both rates and their ratio.
const xrenameBenchEnv = "CANOPY_XRENAME_BENCH"

func TestRenameAcrossPartitionsSpeed(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(xrenameBenchEnv))
	if err != nil || d <= 0 {
		t.Skipf("set %s to a duration to measure", xrenameBenchEnv)
	}
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	for _, dir := range []string{"/p1/d", "/p2/d"} {
		if err := f.c.MkdirAll(ctx, dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const callers = 16
	for i := range callers {
		if _, err := f.c.Create(ctx, fmt.Sprintf("/p1/d/f%d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(a, b string) float64 {
		var ops atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		start := time.Now()
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				from, to := fmt.Sprintf(a, i), fmt.Sprintf(b, i)
				for time.Now().Before(end) {
					if err := f.c.Rename(ctx, from, to); err != nil {
						t.Error(err)
						return
					}
					from, to = to, from
					ops.Add(1)
				}
				if from != fmt.Sprintf(a, i) { // leave it where it started
					if err := f.c.Rename(ctx, from, fmt.Sprintf(a, i)); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		wg.Wait()
		return float64(ops.Load()) / time.Since(start).Seconds()
	}
	within := run("/p1/d/f%d", "/p1/d/g%d")
	across := run("/p1/d/f%d", "/p2/d/f%d")
	t.Logf("16 callers, %v each: rename within a partition %.0f ops/s, across partitions %.0f ops/s, ratio %.2f",
		d, within, across, across/within)
}

// TestDirectoryMoveAcrossPartitionsSpeed measures moves of a directory
// between two partitions, back and forth, with subtrees of 10, 100 and
// 1,000 files in directories of 10 (and of 9,000 files, 9,901 nodes, near the limit
// of one move): the milliseconds one move takes and the nodes it moves a
// second. It runs only with CANOPY_XRENAME_BENCH set to a duration
// (spent on each size).
func TestDirectoryMoveAcrossPartitionsSpeed(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(xrenameBenchEnv))
	if err != nil || d <= 0 {
		t.Skipf("set %s to a duration to measure", xrenameBenchEnv)
	}
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	for _, files := range xbenchSizes() {
		top := fmt.Sprintf("/p1/t%d", files)
		nodes := 1
		for i := range files {
			dir := fmt.Sprintf("%s/d%d", top, i/10)
			if i%10 == 0 {
				if err := f.c.MkdirAll(ctx, dir, 0o755); err != nil {
					t.Fatal(err)
				}
				nodes++
			}
			if err := f.c.WriteFile(ctx, fmt.Sprintf("%s/f%d", dir, i), []byte("small"), 0o644); err != nil {
				t.Fatal(err)
			}
			nodes++
		}
		from, to := top, fmt.Sprintf("/p2/t%d", files)
		moves := 0
		start := time.Now()
		for time.Since(start) < d || moves%2 == 1 {
			if err := f.c.Rename(ctx, from, to); err != nil {
				t.Fatalf("move %d of %s: %v", moves, from, err)
			}
			from, to = to, from
			moves++
		}
		el := time.Since(start)
		t.Logf("a directory of %d nodes across partitions: %d moves, %.1f ms a move, %.0f nodes/s",
			nodes, moves, float64(el.Microseconds())/1000/float64(moves), float64(nodes*moves)/el.Seconds())
	}
	f.verify(t)
}

// xbenchSizes returns the subtree sizes (files) TestDirectoryMoveAcrossPartitionsSpeed
// measures: CANOPY_XRENAME_BENCH_FILES, or 10, 100, 1,000 and 9,000.
func xbenchSizes() []int {
	if n, err := strconv.Atoi(os.Getenv("CANOPY_XRENAME_BENCH_FILES")); err == nil && n > 0 {
		return []int{n}
	}
	return []int{10, 100, 1000, 9000}
}
