package router

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/rpc"
)

// fixture is three partitions behind one router:
//
//	/       -> vpart 0 /
//	/p1     -> vpart 1 /
//	/deep   -> vpart 2 /inside/here
//	/ro     -> vpart 1 /rodir, read-only
type fixture struct {
	direct []*client.Client // straight to partition 0, 1, 2
	addrs  []string
	src    *memTables
	r      *Router
	c      *client.Client // through the router
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := testCtx(t)
	f := &fixture{}
	for p := range uint16(3) {
		_, addr := startPartition(t, p)
		f.addrs = append(f.addrs, addr)
		f.direct = append(f.direct, dial(t, addr))
	}
	if err := f.direct[1].MkdirAll(ctx, "/rodir", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := f.direct[1].Create(ctx, "/rodir/f", 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.direct[2].MkdirAll(ctx, "/inside/here", 0o755); err != nil {
		t.Fatal(err)
	}
	f.src = newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/deep", Vpart: 2, Target: "/inside/here"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
		{Prefix: "/ro", Vpart: 1, Target: "/rodir", ReadOnly: true},
	}, map[uint32][]string{0: {f.addrs[0]}, 1: {f.addrs[1]}, 2: {f.addrs[2]}})
	f.r = startRouter(t, f.src, Config{Root: []string{f.addrs[0]}, Registry: prometheus.NewRegistry()})
	f.c = dial(t, f.r.Addr())
	return f
}

func partOf(ino client.Ino) uint16 { return ino.Partition() }

func TestPathRewriteToTargetInsidePartition(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	if _, err := f.c.Mkdir(ctx, "/deep/a", 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := f.c.Create(ctx, "/deep/a/x", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if partOf(fi.Ino()) != 2 {
		t.Fatalf("/deep/a/x has inode %#x, not in partition 2", fi.Ino())
	}
	in, err := f.direct[2].Stat(ctx, "/inside/here/a/x")
	if err != nil {
		t.Fatalf("the file is not at its target inside partition 2: %v", err)
	}
	if in.Ino() != fi.Ino() {
		t.Fatalf("inode %#x inside the partition, %#x through the router", in.Ino(), fi.Ino())
	}
	// Paths are normalized before lookup.
	if got, err := f.c.Stat(ctx, "//deep/./a/../a//x"); err != nil || got.Ino() != fi.Ino() {
		t.Fatalf("stat of an unnormalized path: %v, %v", got, err)
	}
	if _, err := f.direct[0].Stat(ctx, "/deep/a/x"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the root partition has /deep/a/x: %v", err)
	}
	// Rename within the mount rewrites both paths.
	if err := f.c.Rename(ctx, "/deep/a/x", "/deep/y"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.direct[2].Stat(ctx, "/inside/here/y"); err != nil {
		t.Fatalf("renamed file not at its target: %v", err)
	}
}

func TestInodeCallsReachTheirPartition(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	fi, err := f.c.Create(ctx, "/p1/file", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if partOf(fi.Ino()) != 1 {
		t.Fatalf("/p1/file has inode %#x, not in partition 1", fi.Ino())
	}
	got, err := f.c.GetAttr(ctx, fi.Ino())
	if err != nil || got.Ino() != fi.Ino() {
		t.Fatalf("getattr by inode: %v, %v", got, err)
	}
	root1 := client.Ino(protocol.RootIno(1))
	l, err := f.c.Lookup(ctx, root1, "file")
	if err != nil || l.Ino() != fi.Ino() {
		t.Fatalf("lookup in partition 1's root by inode: %v, %v", l, err)
	}
	if _, err := f.c.SetAttrIno(ctx, fi.Ino(), client.SetAttr{Valid: client.SetMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	d, err := f.direct[1].Stat(ctx, "/file")
	if err != nil || d.Mode().Perm() != 0o600 {
		t.Fatalf("setattr by inode did not reach partition 1: %v, %v", d, err)
	}
	// Data-path calls are routed by their inode as well: only partition 1
	// has the file, and answers READ_CHUNKS for it. (Counting partition
	// 0's calls did not tell: a CI run saw one reach it meanwhile.)
	req, _ := proto.Marshal(&pb.ReadChunksRequest{Ino: uint64(fi.Ino()), Count: 1})
	rc, err := rpc.Dial(f.r.Addr(), rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	calls := func(vp string) float64 { return testutil.ToFloat64(f.r.metrics.partCalls.WithLabelValues(vp)) }
	before1 := calls("1")
	status, _, err := rc.Call(ctx, uint16(pb.Method_READ_CHUNKS), rpc.Cred{}, req)
	if status != 0 || err != nil {
		t.Fatalf("data-path call by inode: status %d, %v", status, err)
	}
	if calls("1") < before1+1 {
		t.Fatalf("data-path call by inode: partition 1 got %v calls, want 1", calls("1")-before1)
	}
	// An inode of a partition nobody routes is stale.
	if _, err := f.c.GetAttr(ctx, client.Ino(protocol.RootIno(77))); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("getattr in an unrouted partition: %v, want ESTALE", err)
	}
}

// rawCall makes one call through the router and returns status and
// payload.
func rawCall(t *testing.T, addr string, m pb.Method, req proto.Message) (uint32, []byte) {
	t.Helper()
	rc, err := rpc.Dial(addr, rpc.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := proto.Marshal(req)
	status, out, err := rc.Call(testCtx(t), uint16(m), rpc.Cred{}, b)
	if err != nil {
		t.Fatal(err)
	}
	return status, out
}

func TestCrossMountLinkFailsWithEXDEV(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	if _, err := f.c.Create(ctx, "/p1/a", 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Mkdir(ctx, "/top", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		m       pb.Method
		req     proto.Message
		mounts  []string
		errno   syscall.Errno
		comment string
	}{
		{pb.Method_LINK, &pb.LinkRequest{Path: "/p1/a", NewPath: "/top/b"}, []string{"/p1", "/"}, syscall.EXDEV, "link"},
		// Two entries of the same partition are still two mounts.
		{pb.Method_LINK, &pb.LinkRequest{Path: "/p1/a", NewPath: "/ro/a"}, []string{"/p1", "/ro"}, syscall.EXDEV, "same partition"},
	} {
		status, out := rawCall(t, f.r.Addr(), tc.m, tc.req)
		if status != uint32(tc.errno) {
			t.Fatalf("%s: status %d, want %v", tc.comment, status, tc.errno)
		}
		var d pb.ErrorDetail
		if err := proto.Unmarshal(out, &d); err != nil {
			t.Fatalf("%s: reply payload is not an ErrorDetail: %v", tc.comment, err)
		}
		for _, mp := range tc.mounts {
			if !strings.Contains(d.Message, " "+mp+" ") && !strings.HasSuffix(d.Message, " "+mp) {
				t.Fatalf("%s: message %q does not name mount point %s", tc.comment, d.Message, mp)
			}
		}
	}
	// By inode, across partitions.
	a, _ := f.c.Stat(ctx, "/p1/a")
	if _, err := f.c.LinkAt(ctx, a.Ino(), client.RootIno, "l"); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("link by inode across partitions: %v, want EXDEV", err)
	}
	// A rename between two mounts of one partition is one rename there.
	if err := f.c.Rename(ctx, "/p1/a", "/ro/a"); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("rename into a read-only mount: %v, want EROFS", err)
	}
	if err := f.c.Rename(ctx, "/p1/a", "/p1/rodir/a"); err != nil {
		t.Fatalf("rename within /p1: %v", err)
	}
	if _, err := f.direct[1].Stat(ctx, "/rodir/a"); err != nil {
		t.Fatalf("renamed file not in partition 1: %v", err)
	}
	// A mount point cannot be renamed away.
	if err := f.c.Rename(ctx, "/p1", "/p2"); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("rename of a mount point: %v, want EBUSY", err)
	}
}

func TestReadOnlyMountRefusesWrites(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	if _, err := f.c.Stat(ctx, "/ro/f"); err != nil {
		t.Fatalf("read under a read-only mount: %v", err)
	}
	if _, err := f.c.ReadDir(ctx, "/ro"); err != nil {
		t.Fatalf("listing a read-only mount: %v", err)
	}
	for name, op := range map[string]func() error{
		"create":   func() error { _, err := f.c.Create(ctx, "/ro/new", 0o644); return err },
		"mkdir":    func() error { _, err := f.c.Mkdir(ctx, "/ro/d", 0o755); return err },
		"unlink":   func() error { return f.c.Unlink(ctx, "/ro/f") },
		"chmod":    func() error { _, err := f.c.Chmod(ctx, "/ro/f", 0o600); return err },
		"rename":   func() error { return f.c.Rename(ctx, "/ro/f", "/ro/g") },
		"setxattr": func() error { return f.c.SetXattr(ctx, "/ro/f", "user.a", []byte("b"), 0) },
	} {
		if err := op(); !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s under a read-only mount: %v, want EROFS", name, err)
		}
	}
	if _, err := f.direct[1].Stat(ctx, "/rodir/f"); err != nil {
		t.Fatalf("file under the read-only mount is gone: %v", err)
	}
	// The same partition through a writable mount takes writes.
	if _, err := f.c.Create(ctx, "/p1/rodir/new", 0o644); err != nil {
		t.Fatalf("create through the writable mount of the same partition: %v", err)
	}
}

func TestListingShowsMountPoints(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	for _, n := range []string{"/a", "/m", "/z"} {
		if _, err := f.direct[0].Create(ctx, n, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A directory of the same name as a mount point, in the root
	// partition, is shadowed by the mount.
	if _, err := f.direct[0].Mkdir(ctx, "/p1", 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "deep", "m", "p1", "ro", "z"}
	ents, err := f.c.ReadDir(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		switch e.Name() {
		case "deep", "p1", "ro":
			if !e.IsDir() {
				t.Errorf("mount point %s is listed as %v", e.Name(), e.Type())
			}
			wantPart := map[string]uint16{"deep": 2, "p1": 1, "ro": 1}[e.Name()]
			if partOf(e.Ino()) != wantPart {
				t.Errorf("mount point %s has inode %#x, want one of partition %d", e.Name(), e.Ino(), wantPart)
			}
			if info, err := e.Info(); err != nil || !info.IsDir() {
				t.Errorf("mount point %s: attributes %v, %v", e.Name(), info, err)
			}
		}
	}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("listing of / = %v, want %v", names, want)
	}
	// Page by page, every name comes once, in order, whatever the page size.
	for limit := uint32(1); limit <= 4; limit++ {
		var paged []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatalf("limit %d: listing does not end", limit)
			}
			ents, next, eof, err := f.c.ReadDirPage(ctx, "/", cursor, limit, false)
			if err != nil {
				t.Fatal(err)
			}
			if uint32(len(ents)) > limit {
				t.Fatalf("limit %d: page of %d entries", limit, len(ents))
			}
			for _, e := range ents {
				paged = append(paged, e.Name())
			}
			if eof {
				break
			}
			cursor = next
		}
		if fmt.Sprint(paged) != fmt.Sprint(want) {
			t.Fatalf("limit %d: paged listing %v, want %v", limit, paged, want)
		}
	}
	// By the root inode, too.
	ents, _, _, err = f.c.ReadDirIno(ctx, client.RootIno, "", 0, false)
	if err != nil || len(ents) != len(want) {
		t.Fatalf("listing of the root inode: %d entries, %v; want %d", len(ents), err, len(want))
	}
	// A directory with nothing mounted below is the partition's listing.
	if _, err := f.c.Create(ctx, "/p1/only", 0o644); err != nil {
		t.Fatal(err)
	}
	ents, err = f.c.ReadDir(ctx, "/p1")
	if err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[only rodir]" {
		t.Fatalf("listing of /p1 = %v", names)
	}
}

func TestStatfsAndSummarySpanPartitions(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	for _, p := range []string{"/x", "/p1/y", "/deep/z", "/deep/w"} {
		if _, err := f.c.Create(ctx, p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var want client.Statfs
	for _, d := range f.direct {
		s, err := d.Statfs(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		want.UsedInodes += s.UsedInodes
		want.TotalInodes += s.TotalInodes
		want.UsedBytes += s.UsedBytes
	}
	got, err := f.c.Statfs(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if got.UsedInodes != want.UsedInodes || got.TotalInodes != want.TotalInodes || got.UsedBytes != want.UsedBytes {
		t.Fatalf("statfs through the router %+v, sum of the partitions %+v", got, want)
	}
	// The root's summary counts what each mount holds: vpart 0's tree, all
	// of vpart 1 (mounted at /p1; /ro is inside it, counted again as its
	// own mount) and /inside/here of vpart 2.
	var wantSum client.Summary
	for _, part := range []struct {
		c *client.Client
		p string
	}{{f.direct[0], "/"}, {f.direct[1], "/"}, {f.direct[1], "/rodir"}, {f.direct[2], "/inside/here"}} {
		s, err := part.c.Summary(ctx, part.p)
		if err != nil {
			t.Fatal(err)
		}
		wantSum.Dirs += s.Dirs
		wantSum.Files += s.Files
		wantSum.Bytes += s.Bytes
	}
	sum, err := f.c.Summary(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if sum != wantSum {
		t.Fatalf("summary of / %+v, want %+v", sum, wantSum)
	}
	if sum.Files < 4 {
		t.Fatalf("summary of / counts %d files, created 4", sum.Files)
	}
	// Below a mount point, only its partition counts.
	sub, err := f.c.Summary(ctx, "/deep")
	if err != nil || sub.Files != 2 {
		t.Fatalf("summary of /deep: %+v, %v; want 2 files", sub, err)
	}
}

// A lookup by the root's inode of a mount point's name (what a FUSE mount
// sends for /p1) finds the mounted directory, not the root partition's
// ENOENT; other names are the root partition's.
func TestLookupOfAMountPointByInode(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	fi, err := f.c.Lookup(ctx, client.RootIno, "p1")
	if err != nil || fi.Ino() != client.Ino(protocol.RootIno(1)) || !fi.IsDir() {
		t.Fatalf("lookup of /p1 by the root's inode: %v, %v; want partition 1's root", fi, err)
	}
	inner, err := f.direct[2].Stat(ctx, "/inside/here")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := f.c.Lookup(ctx, client.RootIno, "deep"); err != nil || fi.Ino() != inner.Ino() {
		t.Fatalf("lookup of /deep by the root's inode: %v, %v; want %#x", fi, err, inner.Ino())
	}
	if _, err := f.c.Lookup(ctx, client.RootIno, "nothing-here"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup of a plain missing name: %v, want ENOENT", err)
	}
	if _, err := f.c.Mkdir(ctx, "/plain", 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := f.c.Lookup(ctx, client.RootIno, "plain"); err != nil || fi.Ino().Partition() != 0 {
		t.Fatalf("lookup of a directory of the root partition: %v, %v", fi, err)
	}
}
