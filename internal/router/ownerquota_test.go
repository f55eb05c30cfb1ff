package router

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	metaserver "github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// openDirs makes /d, /p1/d and /p2/d, which everyone may write.
func openDirs(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx := testCtx(t)
	dirs := []string{"/d", "/p1/d", "/p2/d"}
	for _, d := range dirs {
		if _, err := c.Mkdir(ctx, d, 0o777); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Chmod(ctx, d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	return dirs
}

// shares returns each partition's share of kind and id's quota, asked of
// the partitions directly.
func (f *xfixture) shares(t *testing.T, kind, id uint32) []client.OwnerQuota {
	t.Helper()
	var out []client.OwnerQuota
	for p, c := range f.direct {
		q, err := c.GetOwnerQuota(testCtx(t), "/", kind, id)
		if err != nil {
			t.Fatalf("share of partition %d: %v", p, err)
		}
		if !q.Share {
			t.Fatalf("partition %d holds %+v, not a share", p, q)
		}
		out = append(out, q)
	}
	return out
}

// sumOf adds the shares' file limits and files up.
func sumOf(shares []client.OwnerQuota) (maxFiles, files uint64) {
	for _, q := range shares {
		maxFiles += q.MaxFiles
		files += q.Files
	}
	return maxFiles, files
}

// TestOwnerQuotaAcrossPartitions: through a router a user quota is the
// whole namespace's. Each of three partitions holds a share; 16 writers,
// most of them in one partition, create files until EDQUOT; the router
// moves unused shares to where they are needed, so the user ends with
// exactly the limit, never one file more, and the shares still add up to
// the limit. Bytes hold the same way, and a quota below usage, or set by
// a user, is refused.
func TestOwnerQuotaAcrossPartitions(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	dirs := openDirs(t, f.c)
	const limit = 1000
	q, err := f.c.SetOwnerQuota(ctx, "/", client.QuotaUser, 1000, limit, 0)
	if err != nil {
		t.Fatal(err)
	}
	if q.MaxFiles != limit || q.MaxBytes != 0 || q.Files != 0 {
		t.Fatalf("set: %+v", q)
	}
	if max, _ := sumOf(f.shares(t, client.QuotaUser, 1000)); max != limit {
		t.Fatalf("shares add up to %d files, want %d", max, limit)
	}
	u := dialAs(t, f.r.Addr(), "", client.Cred{UID: 1000, GID: 1000})
	for _, files := range []uint64{limit, 2 * limit} { // the same limits too: every partition checks
		if _, err := u.SetOwnerQuota(ctx, "/", client.QuotaUser, 1000, files, 0); !errors.Is(err, syscall.EPERM) {
			t.Fatalf("set of %d files by the user: %v", files, err)
		}
	}
	if err := u.RemoveOwnerQuota(ctx, "/", client.QuotaUser, 1000); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("remove by the user: %v", err)
	}
	if st, _ := rawCall(t, f.r.Addr(), pb.Method_OWNER_QUOTA_ADJUST, &pb.OwnerQuotaAdjustRequest{Kind: client.QuotaUser, Id: 1000, Files: 1000}); st != uint32(syscall.EPERM) {
		t.Fatalf("a client's OWNER_QUOTA_ADJUST through the router: status %d, want EPERM", st)
	}

	var made atomic.Int64
	create := func(dir, name string) bool {
		_, err := u.Create(ctx, dir+"/"+name, 0o644)
		if errors.Is(err, syscall.EDQUOT) {
			return false
		}
		if err != nil {
			t.Errorf("create %s/%s: %v", dir, name, err)
			return false
		}
		if n := made.Add(1); n > limit {
			t.Errorf("file %d made, past the limit of %d", n, limit)
		}
		return true
	}
	var wg sync.WaitGroup
	for w := range 16 {
		dir := dirs[1] // most writers in one partition
		if w >= 12 {
			dir = dirs[w%3]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; create(dir, fmt.Sprintf("w%d-%d", w, i)); i++ {
			}
		}()
	}
	wg.Wait()
	// What concurrent writers may leave unused, one writer takes.
	for _, dir := range dirs {
		for i := 0; create(dir, fmt.Sprintf("last-%d", i)); i++ {
		}
	}
	if made.Load() != limit {
		t.Fatalf("%d files made under a limit of %d", made.Load(), limit)
	}
	if q, err := f.c.GetOwnerQuota(ctx, "/", client.QuotaUser, 1000); err != nil || q.Files != limit || q.MaxFiles != limit {
		t.Fatalf("namespace quota %+v, %v", q, err)
	}
	shares := f.shares(t, client.QuotaUser, 1000)
	if max, files := sumOf(shares); max != limit || files != limit {
		t.Fatalf("shares %+v: %d files of %d", shares, files, max)
	}
	if n, bad, err := f.c.CheckOwnerQuotas(ctx, "/", false); err != nil || n != 1 || len(bad) != 0 {
		t.Fatalf("check: %d quotas, %v, %v", n, bad, err)
	}
	// A file removed in one partition lets one be made in another.
	ents, err := u.ReadDir(ctx, "/p2/d")
	if err != nil || len(ents) == 0 {
		t.Fatalf("/p2/d: %d entries, %v", len(ents), err)
	}
	if err := u.Remove(ctx, "/p2/d/"+ents[0].Name()); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Create(ctx, "/p1/d/again", 0o644); err != nil {
		t.Fatalf("create after a removal in another partition: %v", err)
	}
	if _, err := f.c.SetOwnerQuota(ctx, "/", client.QuotaUser, 1000, limit-1, 0); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("set below usage: %v", err)
	}

	// Bytes: a limit of 3000 over three partitions, 1000 in each.
	v := dialAs(t, f.r.Addr(), "", client.Cred{UID: 1001, GID: 1001})
	for _, dir := range dirs {
		if _, err := v.Create(ctx, dir+"/b", 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.c.SetOwnerQuota(ctx, "/", client.QuotaUser, 1001, 0, 3000); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Truncate(ctx, "/p1/d/b", 2500); err != nil {
		t.Fatalf("2500 bytes where 1000 were the share: %v", err)
	}
	if _, err := v.Truncate(ctx, "/p2/d/b", 501); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("a byte past the namespace's limit: %v", err)
	}
	if _, err := v.Truncate(ctx, "/p2/d/b", 500); err != nil {
		t.Fatalf("the last 500 bytes: %v", err)
	}
	if _, err := v.Truncate(ctx, "/d/b", 1); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("a byte past the namespace's limit: %v", err)
	}
	if q, err := f.c.GetOwnerQuota(ctx, "/", client.QuotaUser, 1001); err != nil || q.Bytes != 3000 || q.MaxBytes != 3000 || q.MaxFiles != 0 {
		t.Fatalf("namespace quota %+v, %v", q, err)
	}

	list, err := f.c.OwnerQuotas(ctx, "/")
	if err != nil || len(list) != 2 || list[0].ID != 1000 || list[1].ID != 1001 || list[0].MaxFiles != limit || list[1].MaxBytes != 3000 {
		t.Fatalf("list %+v, %v", list, err)
	}
	if err := f.c.RemoveOwnerQuota(ctx, "/", client.QuotaUser, 1001); err != nil {
		t.Fatal(err)
	}
	for p, c := range f.direct {
		if _, err := c.GetOwnerQuota(ctx, "/", client.QuotaUser, 1001); !errors.Is(err, syscall.ENODATA) {
			t.Fatalf("partition %d after remove: %v", p, err)
		}
	}
	if err := f.c.RemoveOwnerQuota(ctx, "/", client.QuotaUser, 1001); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("second remove: %v", err)
	}
	f.verify(t)
}

// TestOwnerQuotaSpreadsToNewPartition: a partition mounted after a user
// quota was set gets a share of it from the router, and the namespace's
// limit stays what it was.
func TestOwnerQuotaSpreadsToNewPartition(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	openDirs(t, f.c)
	if _, err := f.c.SetOwnerQuota(ctx, "/", client.QuotaUser, 1000, 30, 1<<20); err != nil {
		t.Fatal(err)
	}
	_, addr := servertest.Start(t, metaserver.Config{Partition: 3, Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	direct := dial(t, addr)
	version := f.src.edit(func(rep *pb.TablesReply) {
		setMount(rep, &pb.MountEntry{Prefix: "/p3", Vpart: 3, Target: "/"})
		setRoute(rep, 3, addr)
	})
	waitVersion(t, version, f.r)
	// The new partition gets a share, and the shares are split again at
	// the old limits (on the way, the namespace allows less, never more).
	deadline := time.Now().Add(bound)
	for {
		share, err := direct.GetOwnerQuota(ctx, "/", client.QuotaUser, 1000)
		if err != nil && !errors.Is(err, syscall.ENODATA) {
			t.Fatalf("new partition's share: %v", err)
		}
		q, qerr := f.c.GetOwnerQuota(ctx, "/", client.QuotaUser, 1000)
		if qerr != nil || q.MaxFiles > 30 || q.MaxBytes > 1<<20 {
			t.Fatalf("namespace quota after the mount: %+v, %v", q, qerr)
		}
		if err == nil && share.Share && share.MaxFiles > 0 && q.MaxFiles == 30 && q.MaxBytes == 1<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new partition's share %+v (%v), namespace %+v", share, err, q)
		}
		time.Sleep(5 * time.Millisecond)
	}
	u := dialAs(t, f.r.Addr(), "", client.Cred{UID: 1000, GID: 1000})
	if _, err := f.c.Chmod(ctx, "/p3", 0o777); err != nil {
		t.Fatal(err)
	}
	made := 0
	for i := 0; ; i++ {
		_, err := u.Create(ctx, fmt.Sprintf("/p3/f%d", i), 0o644)
		if errors.Is(err, syscall.EDQUOT) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		made++
	}
	if made != 30 {
		t.Fatalf("%d files made in the new partition under a limit of 30", made)
	}
}

// TestOwnerQuotaSpreadAtStart: a router that starts in front of
// partitions of which only one holds a user quota (set there directly,
// before the namespace had more partitions) gives the others their shares
// of it, and the namespace's limit is the one set.
func TestOwnerQuotaSpreadAtStart(t *testing.T) {
	ctx := testCtx(t)
	var addrs []string
	var direct []*client.Client
	for p := range uint16(2) {
		_, addr := servertest.Start(t, metaserver.Config{Partition: p, Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
		addrs = append(addrs, addr)
		direct = append(direct, dial(t, addr))
	}
	if _, err := direct[0].SetOwnerQuota(ctx, "/", client.QuotaUser, 1000, 10, 0); err != nil {
		t.Fatal(err)
	}
	src := newMemTables([]*pb.MountEntry{
		{Prefix: "/", Vpart: 0, Target: "/"},
		{Prefix: "/p1", Vpart: 1, Target: "/"},
	}, map[uint32][]string{0: {addrs[0]}, 1: {addrs[1]}})
	startRouter(t, src, Config{Root: []string{addrs[0]}})
	deadline := time.Now().Add(bound)
	for {
		var sum uint64
		shares := 0
		for _, c := range direct {
			if q, err := c.GetOwnerQuota(ctx, "/", client.QuotaUser, 1000); err == nil && q.Share {
				sum += q.MaxFiles
				shares++
			}
		}
		if shares == 2 && sum == 10 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d partitions hold shares adding up to %d files, want 2 and 10", shares, sum)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSpreadOfANewShare: a quota the root partition holds as a share of
// nothing more than its usage (what a set makes first in each partition)
// is spread as that, a limit with no room, never as no limit: a sum of 0
// in a share's terms is not the 0 of "none" a client sends. Once spread, a
// file the user makes in any partition is refused.
func TestSpreadOfANewShare(t *testing.T) {
	f := newXFixture(t, Config{})
	ctx := testCtx(t)
	dirs := openDirs(t, f.c)
	u := dialAs(t, f.r.Addr(), "", client.Cred{UID: 1000, GID: 1000})
	req := &pb.OwnerQuotaSetRequest{Ino: protocol.RootIno(0), Kind: client.QuotaUser, Id: 1000, NewShare: true}
	if st, _ := rawCall(t, f.addrs[0], pb.Method_OWNER_QUOTA_SET, req); st != 0 {
		t.Fatalf("a new share in partition 0: status %d", st)
	}
	if err := f.r.spreadOnce(ctx, f.r.view.Load()); err != nil {
		t.Fatal(err)
	}
	for p, q := range f.shares(t, client.QuotaUser, 1000) {
		if q.MaxFiles != 0 || q.Files != 0 {
			t.Errorf("partition %d: share %+v, want a limit of 0 files", p, q)
		}
	}
	for _, dir := range dirs {
		if _, err := u.Create(ctx, dir+"/f", 0o644); !errors.Is(err, syscall.EDQUOT) {
			t.Errorf("create in %s under a quota with no room: %v", dir, err)
		}
	}
}
