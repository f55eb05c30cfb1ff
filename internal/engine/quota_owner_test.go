package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"syscall"
	"testing"
)

func mustOwnerQuota(t *testing.T, e *Engine, kind QuotaKind, id uint32, files, bytes uint64) {
	t.Helper()
	q, err := e.GetOwnerQuota(kind, id)
	if err != nil {
		t.Fatalf("quota of %v %d: %v", kind, id, err)
	}
	if q.Files != files || q.Bytes != bytes {
		t.Fatalf("quota of %v %d: %d files %d bytes, want %d and %d", kind, id, q.Files, q.Bytes, files, bytes)
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerQuotaCreateSizeChown: a user quota limits what its uid creates
// and writes, and nothing else; chown moves a node and its bytes, and is
// refused when the new owner would pass a limit; links and renames change
// nothing; a removal frees.
func TestOwnerQuotaCreateSizeChown(t *testing.T) {
	e, _, _, _ := quotaFixture(t)
	if _, err := e.SetOwnerQuota(credU1, QuotaUser, 1000, 3, 100); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("set by a user: %v", err)
	}
	if _, err := e.SetOwnerQuota(credRoot, QuotaKind(9), 1000, 3, 100); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("set of kind 9: %v", err)
	}
	if _, err := e.SetOwnerQuota(credRoot, QuotaUser, 1000, 3, 100); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 0, 0)
	for i := range 3 {
		if _, err := pathMknod(e, credU1, fmt.Sprint("/q/f", i), S_IFREG|0o644, 0, 3); err != nil {
			t.Fatal(err)
		}
	}
	_, err := pathMknod(e, credU1, "/q/f3", S_IFREG|0o644, 0, 3)
	wantErrno(t, "fourth file", err, syscall.EDQUOT)
	_, err = pathMkdir(e, credU1, "/out/d", 0o755, 3)
	wantErrno(t, "a directory past the limit", err, syscall.EDQUOT)
	// Root and other users are not counted.
	if _, err := pathMknod(e, credU2, "/q/other", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := pathMknod(e, credRoot, "/q/root", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 3, 0)
	// Bytes: up to the limit exactly, not one byte more.
	if _, err := pathSetAttr(e, credU1, "/q/f0", false, SetAttr{Valid: SetSize, Size: 60}, 4); err != nil {
		t.Fatal(err)
	}
	_, err = pathSetAttr(e, credU1, "/q/f1", false, SetAttr{Valid: SetSize, Size: 41}, 4)
	wantErrno(t, "a byte past the limit", err, syscall.EDQUOT)
	if _, err := pathSetAttr(e, credU1, "/q/f1", false, SetAttr{Valid: SetSize, Size: 40}, 4); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 3, 100)
	// Links and renames change no owner.
	if _, err := pathLink(e, credU1, "/q/f0", "/out/f0", 5); err != nil && !errors.Is(err, syscall.EXDEV) {
		t.Fatal(err)
	}
	if err := pathRename(e, credU1, "/q/f1", "/q/in/f1", 0, 5); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 3, 100)
	// chown to 1000 of root's empty file: one file too many.
	_, err = pathSetAttr(e, credRoot, "/q/root", false, SetAttr{Valid: SetUID, UID: 1000}, 6)
	wantErrno(t, "chown past the file limit", err, syscall.EDQUOT)
	if a, _ := e.Resolve(credRoot, "/q/root", false); a.UID != 0 {
		t.Fatalf("refused chown changed the owner: %+v", a)
	}
	// chown away frees the node and its bytes; chown back takes them.
	if _, err := pathSetAttr(e, credRoot, "/q/f0", false, SetAttr{Valid: SetUID, UID: 1001}, 6); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 2, 40)
	if _, err := pathSetAttr(e, credRoot, "/q/root", false, SetAttr{Valid: SetUID | SetSize, UID: 1000, Size: 61}, 6); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("chown with a size past the byte limit: %v", err)
	}
	if _, err := pathSetAttr(e, credRoot, "/q/root", false, SetAttr{Valid: SetUID | SetSize, UID: 1000, Size: 60}, 6); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 3, 100)
	// A limit below the usage is refused; a removal frees.
	_, err = e.SetOwnerQuota(credRoot, QuotaUser, 1000, 2, 0)
	wantErrno(t, "limit below usage", err, syscall.EDQUOT)
	if err := pathUnlink(e, credU1, "/q/in/f1", 7); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 2, 60)
	if err := e.RemoveOwnerQuota(credRoot, QuotaUser, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetOwnerQuota(QuotaUser, 1000); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("get after rm: %v", err)
	}
	wantErrno(t, "second rm", e.RemoveOwnerQuota(credRoot, QuotaUser, 1000), syscall.ENODATA)
}

// TestGroupQuotaChgrpAndSetgid: a group quota counts the nodes of its gid,
// including those that get it from a set-group-id directory; chgrp moves
// them.
func TestGroupQuotaChgrpAndSetgid(t *testing.T) {
	e, q, _, _ := quotaFixture(t)
	if _, err := e.SetAttr(credRoot, q, SetAttr{Valid: SetGID | SetMode, GID: 2000, Mode: 0o2777}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetOwnerQuota(credRoot, QuotaGroup, 2000, 2, 0); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaGroup, 2000, 1, 0) // /q itself
	if _, err := pathMknod(e, credU2, "/q/a", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err) // group 2000 from the directory
	}
	_, err := pathMknod(e, credU2, "/q/b", S_IFREG|0o644, 0, 3)
	wantErrno(t, "a third node of group 2000", err, syscall.EDQUOT)
	if _, err := pathMknod(e, credU1, "/out/c", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err)
	}
	_, err = pathSetAttr(e, credU1, "/out/c", false, SetAttr{Valid: SetGID, GID: 2000}, 4)
	wantErrno(t, "chgrp into a full group", err, syscall.EDQUOT)
	if _, err := pathSetAttr(e, credRoot, "/q/a", false, SetAttr{Valid: SetGID, GID: 1001}, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := pathSetAttr(e, credU1, "/out/c", false, SetAttr{Valid: SetGID, GID: 2000}, 4); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaGroup, 2000, 2, 0)
}

// TestOwnerQuotaTrashAndOpenFiles: what the trash holds still counts for
// its owner until purged; a file whose last link goes stops counting at
// once even while it stays open, and its later growth counts nowhere.
func TestOwnerQuotaTrashAndOpenFiles(t *testing.T) {
	e, _, _, _ := quotaFixture(t)
	e.SetTrashDays(1)
	if _, err := e.SetOwnerQuota(credRoot, QuotaUser, 1000, 0, 0); err != nil {
		t.Fatal(err)
	}
	a, err := pathMknod(e, credU1, "/out/t", S_IFREG|0o644, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetAttr(credU1, a.Ino, SetAttr{Valid: SetSize, Size: 7}, 3); err != nil {
		t.Fatal(err)
	}
	if err := pathUnlink(e, credU1, "/out/t", 4); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 1, 7) // in the trash
	if _, _, err := e.TrashPurge(credRoot, 1<<62, 5); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 0, 0)

	e.SetTrashDays(0)
	b, err := pathMknod(e, credU1, "/out/o", S_IFREG|0o644, 0, 6)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Open(credU1, b.Ino, 1); err != nil {
		t.Fatal(err)
	}
	if err := pathUnlink(e, credU1, "/out/o", 7); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 0, 0)
	if _, err := e.SetAttr(credU1, b.Ino, SetAttr{Valid: SetSize | SetOpenFile, Size: 9}, 8); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 0, 0)
}

// TestOwnerQuotaCheckpoint: a checkpoint without owner quotas is the bytes
// it was before they existed (set and removed, no trace); with them it
// carries the limits, Load counts the usage again, and the reloaded
// engine writes the same bytes, as does a freeze.
func TestOwnerQuotaCheckpoint(t *testing.T) {
	e, _, _, _ := quotaFixture(t)
	if _, err := pathMknod(e, credU1, "/q/f", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err)
	}
	ckpt := func(e *Engine) []byte {
		var b bytes.Buffer
		if err := e.WriteCheckpoint(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	before := ckpt(e)
	if bytes.Contains(before, []byte(ownerQuotasMagic)) {
		t.Fatal("a checkpoint with no owner quota has the owner section")
	}
	if _, err := e.SetOwnerQuota(credRoot, QuotaUser, 1000, 5, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveOwnerQuota(credRoot, QuotaUser, 1000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ckpt(e), before) {
		t.Fatal("setting and removing an owner quota changed the checkpoint")
	}
	for _, l := range []OwnerQuotaLimit{{Kind: QuotaGroup, ID: 1000, MaxBytes: 99}, {Kind: QuotaUser, ID: 1000, MaxFiles: 5}, {Kind: QuotaUser, ID: 7, MaxFiles: 1, MaxBytes: 1}} {
		if _, err := e.SetOwnerQuota(credRoot, l.Kind, l.ID, l.MaxFiles, l.MaxBytes); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.SetAttr(credU1, e.mustResolve(t, "/q/f"), SetAttr{Valid: SetSize, Size: 12}, 4); err != nil {
		t.Fatal(err)
	}
	with := ckpt(e)
	fz := e.Freeze()
	var fb bytes.Buffer
	if err := fz.WriteCheckpoint(&fb); err != nil {
		t.Fatal(err)
	}
	fz.Release()
	if !bytes.Equal(fb.Bytes(), with) {
		t.Fatal("the frozen checkpoint differs")
	}
	got, err := Load(bytes.NewReader(with))
	if err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, got, QuotaUser, 1000, 1, 12)
	mustOwnerQuota(t, got, QuotaGroup, 1000, 1, 12)
	mustOwnerQuota(t, got, QuotaUser, 7, 0, 0)
	if q := got.OwnerQuotas(); len(q) != 3 || q[0].Kind != QuotaUser || q[0].ID != 7 || q[2].Kind != QuotaGroup {
		t.Fatalf("loaded quotas %+v", q)
	}
	if !bytes.Equal(ckpt(got), with) {
		t.Fatal("the reloaded engine writes other bytes")
	}
	// With the intents section present too, both load.
	if _, err := pathMknod(got, credU1, "/q/g", S_IFREG|0o644, 0, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bytes.NewReader(ckpt(got))); err != nil {
		t.Fatal(err)
	}
}

func (e *Engine) mustResolve(t *testing.T, p string) Ino {
	t.Helper()
	a, err := e.Resolve(credRoot, p, false)
	if err != nil {
		t.Fatal(err)
	}
	return a.Ino
}

// TestOwnerQuotaCheckFindsDrift: usage that drifted from the nodes is
// found by the check and set right by the repair.
func TestOwnerQuotaCheckFindsDrift(t *testing.T) {
	e, _, _, _ := quotaFixture(t)
	if _, err := pathMknod(e, credU1, "/q/f", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetOwnerQuota(credRoot, QuotaUser, 1000, 0, 0); err != nil {
		t.Fatal(err)
	}
	e.oq.users[1000].files += 5
	bad := e.CheckOwnerQuotas()
	if len(bad) != 1 || bad[0].Files != 6 || bad[0].CountFiles != 1 {
		t.Fatalf("check: %+v", bad)
	}
	if e.Check() == nil {
		t.Fatal("the invariant check passes drifted usage")
	}
	if _, err := e.RepairOwnerQuotas(credU1); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("repair by a user: %v", err)
	}
	if _, err := e.RepairOwnerQuotas(credRoot); err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 1, 0)
}

// TestOwnerQuotaRandom runs random creates, writes, chowns, chgrps, links,
// renames and removals by three users under user and group quotas (and a
// directory quota, with the trash on in odd seeds): after every step the
// invariant check (usage against a full count) holds and no quota is past
// a limit; the mix must reach EDQUOT.
func TestOwnerQuotaRandom(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { ownerQuotaRandom(t, seed, 2500) })
	}
}

func ownerQuotaRandom(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	e := New(1, 1)
	if seed%2 == 1 {
		e.SetTrashDays(1)
	}
	if _, err := e.SetAttr(credRoot, e.Root(), SetAttr{Valid: SetMode, Mode: 0o777}, 1); err != nil {
		t.Fatal(err)
	}
	creds := []Cred{credRoot, credU1, credU2}
	ids := []uint32{0, 1000, 1001, 2000}
	dirs := []string{"/"}
	join := func(d, name string) string {
		if d == "/" {
			return "/" + name
		}
		return d + "/" + name
	}
	pick := func() string { return join(dirs[rng.Intn(len(dirs))], fmt.Sprint("n", rng.Intn(6))) }
	errs := map[syscall.Errno]int{}
	for step := 0; step < steps; step++ {
		now := int64(step+2) * 1e9
		c := creds[rng.Intn(len(creds))]
		p := pick()
		var err error
		switch k := rng.Intn(22); {
		case k < 3:
			_, err = pathMkdir(e, c, p, 0o777, now)
			if err == nil {
				dirs = append(dirs, p)
			}
		case k < 7:
			_, err = pathMknod(e, c, p, S_IFREG|0o666, 0, now)
		case k < 10:
			_, err = pathSetAttr(e, c, p, false, SetAttr{Valid: SetSize, Size: uint64(rng.Intn(300))}, now)
		case k < 12:
			s := SetAttr{Valid: SetUID, UID: ids[rng.Intn(3)]}
			if rng.Intn(2) == 0 {
				s = SetAttr{Valid: SetGID, GID: ids[rng.Intn(len(ids))]}
			}
			if rng.Intn(4) == 0 {
				s.Valid |= SetSize
				s.Size = uint64(rng.Intn(300))
			}
			_, err = pathSetAttr(e, credRoot, p, false, s, now)
		case k < 13:
			_, err = pathLink(e, c, p, pick(), now)
		case k < 16:
			err = pathUnlink(e, c, p, now)
		case k < 17:
			err = pathRmdir(e, c, p, now)
		case k < 19:
			err = pathRename(e, c, p, pick(), 0, now)
		case k < 21:
			kind := QuotaKind(1 + rng.Intn(2))
			_, err = e.SetOwnerQuota(credRoot, kind, ids[rng.Intn(len(ids))], uint64(rng.Intn(60)), uint64(rng.Intn(5000)))
		default:
			if rng.Intn(3) == 0 {
				a, rerr := e.Resolve(credRoot, dirs[rng.Intn(len(dirs))], true)
				if rerr == nil {
					_, err = e.SetQuota(credRoot, a.Ino, uint64(rng.Intn(40)), 0)
				}
			} else {
				err = e.RemoveOwnerQuota(credRoot, QuotaKind(1+rng.Intn(2)), ids[rng.Intn(len(ids))])
			}
		}
		var errno syscall.Errno
		errors.As(err, &errno)
		errs[errno]++
		if cerr := e.Check(); cerr != nil {
			t.Fatalf("step %d: %v", step, cerr)
		}
		for _, q := range e.OwnerQuotas() {
			if q.MaxFiles > 0 && q.Files > q.MaxFiles || q.MaxBytes > 0 && q.Bytes > q.MaxBytes {
				t.Fatalf("step %d: %v %d past its limits: %+v", step, q.Kind, q.ID, q)
			}
		}
		live := dirs[:0]
		for _, d := range dirs {
			if a, err := e.Resolve(credRoot, d, false); err == nil && a.IsDir() {
				live = append(live, d)
			}
		}
		dirs = live
		if step%500 == 499 {
			var b bytes.Buffer
			if err := e.WriteCheckpoint(&b); err != nil {
				t.Fatal(err)
			}
			want := b.Bytes()
			if e, err = Load(bytes.NewReader(want)); err != nil {
				t.Fatalf("step %d: reload: %v", step, err)
			}
			var again bytes.Buffer
			if err := e.WriteCheckpoint(&again); err != nil || !bytes.Equal(again.Bytes(), want) {
				t.Fatalf("step %d: the reloaded engine writes other bytes (%v)", step, err)
			}
		}
	}
	if errs[syscall.EDQUOT] == 0 || errs[0] < steps/8 {
		t.Fatalf("seed %d: results %v: no EDQUOT", seed, errs)
	}
}

// TestOwnerQuotaJSONDump: the JSON dump carries the user and group quotas
// in an "owner_quotas" record, and converts back to the same checkpoint.
func TestOwnerQuotaJSONDump(t *testing.T) {
	e := jsonTestEngine(t)
	for _, l := range []OwnerQuotaLimit{{Kind: QuotaUser, MaxFiles: 1000}, {Kind: QuotaGroup, ID: 7, MaxBytes: 5}} {
		if _, err := e.SetOwnerQuota(credRoot, l.Kind, l.ID, l.MaxFiles, l.MaxBytes); err != nil {
			t.Fatal(err)
		}
	}
	var bin bytes.Buffer
	if err := e.WriteCheckpoint(&bin); err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := CheckpointToJSON(bytes.NewReader(bin.Bytes()), &js, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(`{"t":"owner_quotas","owner_quotas":[[1,0,1000,0],[2,7,0,5]]}`)) {
		t.Fatalf("no owner_quotas record in:\n%s", js.String()[max(0, js.Len()-400):])
	}
	var back bytes.Buffer
	if err := JSONToCheckpoint(bytes.NewReader(js.Bytes()), &back, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Bytes(), bin.Bytes()) {
		t.Fatalf("binary -> JSON -> binary differs: %d bytes, %d before", back.Len(), bin.Len())
	}
	got, err := Load(bytes.NewReader(back.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, got, QuotaUser, 0, uint64(got.Len()), got.Statfs().UsedBytes)
	bad := bytes.Replace(js.Bytes(), []byte(`[2,7,0,5]`), []byte(`[9,7,0,5]`), 1)
	if err := JSONToCheckpoint(bytes.NewReader(bad), &bytes.Buffer{}, nil); err == nil {
		var b bytes.Buffer
		_ = JSONToCheckpoint(bytes.NewReader(bad), &b, nil)
		if _, err := Load(&b); err == nil {
			t.Fatal("an owner quota of kind 9 loads")
		}
	}
}

// ownerQuotasSeed is a checkpoint holding user and group quotas, for
// FuzzLoad.
func ownerQuotasSeed(tb testing.TB) []byte {
	e := New(1, 1)
	if _, err := e.Mknod(credRoot, e.Root(), "f", S_IFREG|0o644, 0, 2); err != nil {
		tb.Fatal(err)
	}
	// One of them a share of a namespace quota, for the shares section.
	for _, l := range []OwnerQuotaLimit{{Kind: QuotaUser, MaxFiles: 10}, {Kind: QuotaUser, ID: 1000, MaxBytes: 9, Share: true}, {Kind: QuotaGroup, MaxFiles: 3, MaxBytes: 4}} {
		if _, err := e.setOwnerQuota(credRoot, l); err != nil {
			tb.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := e.WriteCheckpoint(&b); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}
