package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"testing"
)

// quotaFixture is an engine with directories /q and /q/in and /out, all
// 0777.
func quotaFixture(t testing.TB) (e *Engine, q, in, out Ino) {
	t.Helper()
	e = New(3, 1)
	for _, p := range []string{"/q", "/q/in", "/out"} {
		if _, err := pathMkdir(e, credRoot, p, 0o777, 2); err != nil {
			t.Fatal(err)
		}
	}
	ino := func(p string) Ino {
		a, err := e.Resolve(credRoot, p, true)
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	return e, ino("/q"), ino("/q/in"), ino("/out")
}

func mustQuota(t *testing.T, e *Engine, dir Ino, files, bytes uint64) {
	t.Helper()
	q, err := e.GetQuota(dir)
	if err != nil {
		t.Fatalf("quota of %d: %v", dir, err)
	}
	if q.Files != files || q.Bytes != bytes {
		t.Fatalf("quota of %d: %d files %d bytes, want %d and %d", dir, q.Files, q.Bytes, files, bytes)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestQuotaCreateAndSize(t *testing.T) {
	e, q, in, _ := quotaFixture(t)
	if _, err := e.SetQuota(credU1, q, 4, 100); err != syscall.EPERM {
		t.Fatalf("set by a user: %v, want EPERM", err)
	}
	if _, err := e.SetQuota(credRoot, q, 4, 100); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 1, 0) // /q/in
	f, err := e.Mknod(credU1, in, "f", S_IFREG|0o644, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Symlink(credU1, q, "s", "target", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Mkdir(credU1, in, "d", 0o755, 3); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 4, 0)
	_, err = e.Mknod(credU1, q, "g", S_IFREG|0o644, 0, 3)
	wantErrno(t, "fifth node", err, syscall.EDQUOT)
	_, err = e.Mkdir(credU1, q, "g", 0o755, 3)
	wantErrno(t, "fifth node (mkdir)", err, syscall.EDQUOT)
	if _, err := e.SetAttr(credU1, f.Ino, SetAttr{Valid: SetSize, Size: 100}, 4); err != nil {
		t.Fatal(err)
	}
	_, err = e.SetAttr(credU1, f.Ino, SetAttr{Valid: SetSize, Size: 101}, 4)
	wantErrno(t, "101 bytes", err, syscall.EDQUOT)
	mustQuota(t, e, q, 4, 100)
	if _, err := e.SetAttr(credU1, f.Ino, SetAttr{Valid: SetSize, Size: 40}, 5); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 4, 40)

	// Commit and Concat grow files under the same limit.
	id := allocOne(t, e)
	_, err = e.Commit(credU1, f.Ino, []SliceWrite{{Chunk: 0, Slice: Slice{ID: id, Size: 101, Len: 101}}}, 0, 0, 6)
	wantErrno(t, "commit of 101 bytes", err, syscall.EDQUOT)
	if _, err := e.Commit(credU1, f.Ino, []SliceWrite{{Chunk: 0, Slice: Slice{ID: id, Size: 60, Len: 60}}}, 0, 0, 6); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 4, 60)
	if err := e.Unlink(credU1, in, "f", 7); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 3, 0)

	// Limits below usage are refused with a sentence; raising them works.
	_, err = e.SetQuota(credRoot, q, 2, 0)
	wantErrno(t, "limit below usage", err, syscall.EDQUOT)
	if _, err := e.SetQuota(credRoot, q, 3, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveQuota(credRoot, q); err != nil {
		t.Fatal(err)
	}
	_, err = e.GetQuota(q)
	wantErrno(t, "removed quota", err, syscall.ENODATA)
	wantErrno(t, "remove again", e.RemoveQuota(credRoot, q), syscall.ENODATA)
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestQuotaNestedAndRename(t *testing.T) {
	e, q, in, out := quotaFixture(t)
	if _, err := e.SetQuota(credRoot, q, 10, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetQuota(credRoot, in, 2, 50); err != nil {
		t.Fatal(err)
	}
	// A tree outside: /out/t with three files of 20 bytes.
	tdir, err := e.Mkdir(credRoot, out, "t", 0o777, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f, err := e.Mknod(credRoot, tdir.Ino, fmt.Sprint("f", i), S_IFREG|0o644, 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.SetAttr(credRoot, f.Ino, SetAttr{Valid: SetSize, Size: 20}, 3); err != nil {
			t.Fatal(err)
		}
	}
	// Into /q/in: 4 nodes and 60 bytes break both of its limits.
	wantErrno(t, "rename into the inner quota", e.Rename(credRoot, out, "t", in, "t", 0, 4), syscall.EDQUOT)
	// Into /q: fits.
	if err := e.Rename(credRoot, out, "t", q, "t", 0, 4); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 5, 60)
	mustQuota(t, e, in, 0, 0)
	// A file moves from /q/t into /q/in: the inner quota gains it, the outer
	// one stays.
	if err := e.Rename(credRoot, tdir.Ino, "f0", in, "f0", 0, 5); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, in, 1, 20)
	mustQuota(t, e, q, 5, 60)
	// Growing it past the inner limit fails though the outer has room.
	f0, _ := e.Lookup(credRoot, in, "f0")
	_, err = e.SetAttr(credRoot, f0.Ino, SetAttr{Valid: SetSize, Size: 51}, 6)
	wantErrno(t, "inner byte limit", err, syscall.EDQUOT)
	// Replacing a file counts what the replaced file frees: /q/t/f1 over
	// /q/in/f0 leaves one file of 20 bytes.
	if err := e.Rename(credRoot, tdir.Ino, "f1", in, "f0", 0, 6); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, in, 1, 20)
	mustQuota(t, e, q, 4, 40)
	// Exchange across the inner quota's edge.
	if err := e.Rename(credRoot, tdir.Ino, "f2", in, "f0", RenameExchange, 7); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, in, 1, 20)
	// Out of both: /q/t (now holding one file) leaves /q.
	if err := e.Rename(credRoot, q, "t", out, "t", 0, 8); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 2, 20)
	// A directory with a quota moves with its usage: /q/in to /out.
	if err := e.Rename(credRoot, q, "in", out, "in", 0, 9); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 0, 0)
	mustQuota(t, e, in, 1, 20)
	// Removing the inner quota hands its files to the quota above (none).
	if err := e.RemoveQuota(credRoot, in); err != nil {
		t.Fatal(err)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	if k := e.regionCount(); k != 0 {
		t.Fatalf("%d tags left under no quota", k)
	}
}

func TestQuotaHardLinks(t *testing.T) {
	e, q, in, out := quotaFixture(t)
	f, err := e.Mknod(credRoot, out, "f", S_IFREG|0o644, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetQuota(credRoot, q, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err = e.Link(credRoot, f.Ino, q, "f", 4)
	wantErrno(t, "link into a quota", err, syscall.EXDEV)
	// Two links inside /q count once.
	g, err := e.Mknod(credRoot, in, "g", S_IFREG|0o644, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Link(credRoot, g.Ino, q, "g2", 4); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 2, 0)
	// A node with links inside and out of /q/in cannot get its own quota,
	// nor leave /q by one link.
	_, err = e.SetQuota(credRoot, in, 0, 0)
	wantErrno(t, "quota splitting links", err, syscall.EXDEV)
	wantErrno(t, "rename of a linked file out", e.Rename(credRoot, in, "g", out, "g", 0, 5), syscall.EXDEV)
	wantErrno(t, "rename of a dir holding it out", e.Rename(credRoot, q, "in", out, "in", 0, 5), syscall.EXDEV)
	if err := e.Unlink(credRoot, q, "g2", 6); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 2, 0)
	if err := e.Rename(credRoot, q, "in", out, "in", 0, 7); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 0, 0)
}

func TestQuotaStatfsAt(t *testing.T) {
	e, q, in, out := quotaFixture(t)
	if _, err := e.SetQuota(credRoot, q, 1000, 1<<20); err != nil {
		t.Fatal(err)
	}
	s := e.StatfsAt(in)
	if s.TotalBytes != 1<<20 || s.TotalInodes != 1000 || s.UsedInodes != 1 || s.UsedBytes != 0 {
		t.Fatalf("statfs in /q/in: %+v", s)
	}
	if s := e.StatfsAt(out); s.TotalBytes != nominalBytes {
		t.Fatalf("statfs outside any quota: %+v", s)
	}
}

// TestQuotaRmdirDropsQuota: a directory's quota goes with the directory.
func TestQuotaRmdirDropsQuota(t *testing.T) {
	e, q, in, _ := quotaFixture(t)
	if _, err := e.SetQuota(credRoot, in, 5, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetQuota(credRoot, q, 5, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Rmdir(credRoot, q, "in", 3); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 0, 0)
	if got := len(e.Quotas()); got != 1 {
		t.Fatalf("%d quotas after rmdir, want 1", got)
	}
}

// TestQuotaCheckpoint: quotas survive a checkpoint, binary and JSON, with
// the same usage, and the bytes are the same after a reload.
func TestQuotaCheckpoint(t *testing.T) {
	e, q, in, _ := quotaFixture(t)
	if _, err := e.SetQuota(credRoot, q, 100, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetQuota(credRoot, in, 0, 500); err != nil {
		t.Fatal(err)
	}
	f, _ := e.Mknod(credRoot, in, "f", S_IFREG|0o644, 0, 3)
	if _, err := e.SetAttr(credRoot, f.Ino, SetAttr{Valid: SetSize, Size: 300}, 3); err != nil {
		t.Fatal(err)
	}
	var b1 bytes.Buffer
	if err := e.WriteCheckpoint(&b1); err != nil {
		t.Fatal(err)
	}
	l, err := Load(bytes.NewReader(b1.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	mustQuota(t, l, q, 2, 300)
	mustQuota(t, l, in, 1, 300)
	_, err = l.SetAttr(credRoot, f.Ino, SetAttr{Valid: SetSize, Size: 501}, 4)
	wantErrno(t, "loaded limit", err, syscall.EDQUOT)
	var b2 bytes.Buffer
	if err := l.WriteCheckpoint(&b2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("checkpoint of the loaded engine differs")
	}
	var js, back bytes.Buffer
	if err := CheckpointToJSON(bytes.NewReader(b1.Bytes()), &js, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(`{"t":"quotas","quotas":[[`)) {
		t.Fatalf("no quotas record in the JSON form:\n%s", js.Bytes())
	}
	if err := JSONToCheckpoint(&js, &back, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), back.Bytes()) {
		t.Fatal("JSON round trip changed the checkpoint")
	}
	// A freeze writes the quotas as they were at the freeze.
	fz := e.Freeze()
	if err := e.RemoveQuota(credRoot, in); err != nil {
		t.Fatal(err)
	}
	var b3 bytes.Buffer
	if err := fz.WriteCheckpoint(&b3); err != nil {
		t.Fatal(err)
	}
	fz.Release()
	if !bytes.Equal(b1.Bytes(), b3.Bytes()) {
		t.Fatal("frozen checkpoint differs from the one at the freeze")
	}
}

// TestQuotaCheckFindsDrift: CheckQuotas reports kept usage that a count
// disagrees with, and RepairQuotas fixes it.
func TestQuotaCheckFindsDrift(t *testing.T) {
	e, q, _, _ := quotaFixture(t)
	if _, err := e.SetQuota(credRoot, q, 0, 0); err != nil {
		t.Fatal(err)
	}
	e.quota.dirs[q].files += 3 // as a bug would
	bad, err := e.CheckQuotas()
	if err != nil || len(bad) != 1 || bad[0].Files != 4 || bad[0].CountFiles != 1 {
		t.Fatalf("check: %+v %v", bad, err)
	}
	if e.Check() == nil {
		t.Fatal("invariant check passed with a wrong usage")
	}
	if _, err := e.RepairQuotas(credRoot); err != nil {
		t.Fatal(err)
	}
	mustQuota(t, e, q, 1, 0)
}

// TestQuotaRandom runs random operations on a small tree with nested
// quotas: after every one, the invariant check (usage against a full
// count, tags) holds, and no quota is ever past its limits.
func TestQuotaRandom(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { quotaRandom(t, seed, 3000) })
	}
}

func quotaRandom(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	e := New(1, 1)
	dirs := []string{"/"}
	paths := func() string {
		return dirs[rng.Intn(len(dirs))]
	}
	join := func(d, name string) string {
		if d == "/" {
			return "/" + name
		}
		return d + "/" + name
	}
	name := func() string { return fmt.Sprint("n", rng.Intn(6)) }
	errs := map[syscall.Errno]int{}
	for step := 0; step < steps; step++ {
		now := int64(step + 2)
		p := join(paths(), name())
		var err error
		switch k := rng.Intn(20); {
		case k < 3:
			_, err = pathMkdir(e, credRoot, p, 0o777, now)
			if err == nil {
				dirs = append(dirs, p)
			}
		case k < 7:
			_, err = pathMknod(e, credRoot, p, S_IFREG|0o644, 0, now)
		case k < 9:
			_, err = pathSetAttr(e, credRoot, p, false, SetAttr{Valid: SetSize, Size: uint64(rng.Intn(400))}, now)
		case k < 10:
			_, err = pathLink(e, credRoot, p, join(paths(), name()), now)
		case k < 12:
			err = pathUnlink(e, credRoot, p, now)
		case k < 13:
			err = pathRmdir(e, credRoot, p, now)
		case k < 16:
			flags := uint32(0)
			if rng.Intn(4) == 0 {
				flags = RenameExchange
			}
			err = pathRename(e, credRoot, p, join(paths(), name()), flags, now)
		case k < 18:
			a, rerr := e.Resolve(credRoot, paths(), true)
			if rerr == nil {
				_, err = e.SetQuota(credRoot, a.Ino, uint64(rng.Intn(30)), uint64(rng.Intn(2000)))
			}
		default:
			a, rerr := e.Resolve(credRoot, paths(), true)
			if rerr == nil {
				err = e.RemoveQuota(credRoot, a.Ino)
			}
		}
		var errno syscall.Errno
		errors.As(err, &errno)
		errs[errno]++
		if cerr := e.Check(); cerr != nil {
			t.Fatalf("step %d: %v", step, cerr)
		}
		for _, q := range e.Quotas() {
			if q.MaxFiles > 0 && q.Files > q.MaxFiles || q.MaxBytes > 0 && q.Bytes > q.MaxBytes {
				t.Fatalf("step %d: quota on %d past its limits: %+v", step, q.Dir, q)
			}
		}
		// Directories that went away leave the list when tried.
		live := dirs[:0]
		for _, d := range dirs {
			if a, err := e.Resolve(credRoot, d, false); err == nil && a.IsDir() {
				live = append(live, d)
			}
		}
		dirs = live
	}
	// The mix must reach the quota rules, not only pass them by.
	if errs[syscall.EDQUOT] == 0 || errs[syscall.EXDEV] == 0 || errs[0] < steps/5 {
		t.Fatalf("seed %d: results %v: no EDQUOT or no EXDEV", seed, errs)
	}
	var b bytes.Buffer
	if err := e.WriteCheckpoint(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(&b); err != nil {
		t.Fatal(err)
	}
}

func TestDirPath(t *testing.T) {
	e, q, in, _ := quotaFixture(t)
	for ino, want := range map[Ino]string{e.Root(): "/", q: "/q", in: "/q/in"} {
		if got, err := e.DirPath(ino); err != nil || got != want {
			t.Fatalf("path of %d: %q %v, want %q", ino, got, err, want)
		}
	}
}
