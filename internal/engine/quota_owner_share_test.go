package engine

import (
	"bytes"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

// TestOwnerQuotaShare: a share of a namespace quota may be 0, which
// allows nothing more; its limits move up and down, never below the
// usage; the refusal names the quota and what the change wanted; a
// share survives a checkpoint, and a partition's own quota cannot be
// adjusted.
func TestOwnerQuotaShare(t *testing.T) {
	e, _, _, _ := quotaFixture(t)
	if _, err := e.SetOwnerQuota(credRoot, QuotaUser, 1000, 5, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AdjustOwnerQuota(QuotaUser, 1000, 1, 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("adjust of a partition's own quota: %v", err)
	}
	if _, err := e.SetOwnerQuotaShare(credU1, QuotaUser, 1000, 0, NoShareLimit); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("share set by a user: %v", err)
	}
	if _, err := e.SetOwnerQuotaShare(credRoot, QuotaUser, 1000, 0, NoShareLimit); err != nil {
		t.Fatal(err)
	}
	_, err := pathMknod(e, credU1, "/q/f0", S_IFREG|0o644, 0, 3)
	wantErrno(t, "a file under a share of 0", err, syscall.EDQUOT)
	if r := e.TakeOwnerRefusal(); r != (OwnerRefusal{Kind: QuotaUser, ID: 1000, Files: 1}) {
		t.Fatalf("refusal %+v", r)
	}
	if r := e.TakeOwnerRefusal(); r.Kind != 0 {
		t.Fatalf("refusal taken twice: %+v", r)
	}
	if _, err := e.AdjustOwnerQuota(QuotaUser, 1000, 2, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := pathMknod(e, credU1, fmt.Sprint("/q/f", i), S_IFREG|0o644, 0, 3); err != nil {
			t.Fatal(err)
		}
	}
	_, err = pathMknod(e, credU1, "/q/f2", S_IFREG|0o644, 0, 3)
	wantErrno(t, "a third file under a share of 2", err, syscall.EDQUOT)
	if _, err := e.AdjustOwnerQuota(QuotaUser, 1000, -1, 0); !errors.Is(err, syscall.EDQUOT) {
		t.Fatalf("a share taken below its usage: %v", err)
	}
	if _, err := e.AdjustOwnerQuota(QuotaUser, 1000, 0, 10); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("a move of no limit: %v", err)
	}
	if _, err := e.AdjustOwnerQuota(QuotaUser, 1001, 1, 0); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("adjust of no quota: %v", err)
	}
	q, err := e.AdjustOwnerQuota(QuotaUser, 1000, 3, 0)
	if err != nil || q.MaxFiles != 5 || !q.Share || q.Files != 2 {
		t.Fatalf("share after +3: %+v, %v", q, err)
	}
	mustOwnerQuota(t, e, QuotaUser, 1000, 2, 0)
	if _, err := e.NewOwnerQuotaShare(credRoot, QuotaUser, 1000); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("a new share where there is one: %v", err)
	}
	// A new share holds what the id holds and allows nothing more.
	if _, err := pathMknod(e, credRoot, "/q/g", S_IFREG|0o644, 0, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := e.NewOwnerQuotaShare(credU1, QuotaGroup, 0); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("a new share made by a user: %v", err)
	}
	g, err := e.NewOwnerQuotaShare(credRoot, QuotaGroup, 0)
	if err != nil || !g.Share || g.MaxFiles != g.Files || g.MaxBytes != g.Bytes || g.Files == 0 {
		t.Fatalf("new share of gid 0: %+v, %v", g, err)
	}
	_, err = pathMknod(e, credRoot, "/q/g2", S_IFREG|0o644, 0, 3)
	wantErrno(t, "a file under a new share", err, syscall.EDQUOT)
	if err := e.RemoveOwnerQuota(credRoot, QuotaGroup, 0); err != nil {
		t.Fatal(err)
	}

	var bin bytes.Buffer
	if err := e.WriteCheckpoint(&bin); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(bin.Bytes(), []byte(ownerSharesMagic)) {
		t.Fatal("no shares section in the checkpoint")
	}
	var js bytes.Buffer
	if err := CheckpointToJSON(bytes.NewReader(bin.Bytes()), &js, nil); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`"owner_quotas":[[1,1000,5,%d,1]]`, uint64(NoShareLimit)); !bytes.Contains(js.Bytes(), []byte(want)) {
		t.Fatalf("no %s in the JSON dump", want)
	}
	var back bytes.Buffer
	if err := JSONToCheckpoint(bytes.NewReader(js.Bytes()), &back, nil); err != nil || !bytes.Equal(back.Bytes(), bin.Bytes()) {
		t.Fatalf("binary -> JSON -> binary differs (%v)", err)
	}
	got, err := Load(bytes.NewReader(bin.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	mustOwnerQuota(t, got, QuotaUser, 1000, 2, 0)
	if q, _ := got.GetOwnerQuota(QuotaUser, 1000); !q.Share || q.MaxFiles != 5 || q.MaxBytes != NoShareLimit {
		t.Fatalf("loaded share %+v", q)
	}
}
