package engine

import (
	"syscall"
	"testing"
)

// CommitSetAttr against its definition: where it succeeds, the file ends
// as Commit and then SetAttr, called one after the other on a twin engine,
// leave it; where it fails, nothing changed, and the slice it named is
// still free to commit.
func TestCommitSetAttrIsCommitThenSetAttr(t *testing.T) {
	const now = 10
	cases := []struct {
		name   string
		cred   Cred
		mode   uint32 // the file's mode before
		writes bool   // commit one slice (else nothing: attributes alone)
		bad    bool   // the slice was never handed out
		s      SetAttr
		want   syscall.Errno
	}{
		{name: "root chown, chmod and times", cred: credRoot, writes: true,
			s: SetAttr{Valid: SetUID | SetGID | SetMode | SetAtime | SetMtime, UID: 7, GID: 8, Mode: 0o4755, Atime: 3, Mtime: 4}},
		{name: "root chown clears set-id bits of the mode before", cred: credRoot, mode: 0o6775, writes: true,
			s: SetAttr{Valid: SetUID | SetGID, UID: 7, GID: 8}},
		{name: "owner chmod and times", cred: credU1, writes: true,
			s: SetAttr{Valid: SetMode | SetMtime, Mode: 0o600, Mtime: 5}},
		{name: "owner chmod g+s outside the file's group", cred: Cred{UID: 1000, GID: 3000}, writes: true,
			s: SetAttr{Valid: SetMode, Mode: 0o2755}},
		{name: "owner write clears set-id, then chmod sets it", cred: credU1, mode: 0o4755, writes: true,
			s: SetAttr{Valid: SetMode, Mode: 0o4700}},
		{name: "attributes alone keep the mtime", cred: credU1,
			s: SetAttr{Valid: SetMode, Mode: 0o640}},
		{name: "another user's chmod", cred: credU2, writes: true,
			s: SetAttr{Valid: SetMode, Mode: 0o777}, want: syscall.EPERM},
		{name: "owner gives the file away", cred: credU1, writes: true,
			s: SetAttr{Valid: SetUID, UID: 1001}, want: syscall.EPERM},
		{name: "a size is not an attribute to commit", cred: credRoot, writes: true,
			s: SetAttr{Valid: SetSize, Size: 1}, want: syscall.EINVAL},
		{name: "a slice never handed out", cred: credRoot, writes: true, bad: true,
			s: SetAttr{Valid: SetMode, Mode: 0o600}, want: syscall.EINVAL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _, f := dataFixture(t)
			twin, _, _ := dataFixture(t)
			if tc.mode != 0 {
				for _, x := range []*Engine{e, twin} {
					if _, err := x.SetAttr(credRoot, f, SetAttr{Valid: SetMode, Mode: tc.mode}, 4); err != nil {
						t.Fatal(err)
					}
				}
			}
			var writes []SliceWrite
			var size uint64
			if tc.writes {
				id := allocOne(t, e)
				if twinID := allocOne(t, twin); twinID != id {
					t.Fatalf("twins handed out slice %d and %d", id, twinID)
				}
				if tc.bad {
					id += 100
				}
				writes, size = []SliceWrite{{Slice: Slice{ID: id, Size: 3, Len: 3}}}, 3
			}
			before, _ := e.GetAttr(f)
			got, err := e.CommitSetAttr(tc.cred, f, writes, size, 0, tc.s, now)
			if tc.want != 0 {
				wantErrno(t, "commit with attributes", err, tc.want)
				after, _ := e.GetAttr(f)
				if after != before {
					t.Fatalf("a refused commit with attributes changed the file:\n%+v\nto\n%+v", before, after)
				}
				if tc.writes && !tc.bad {
					if _, err := e.Commit(tc.cred, f, writes, size, 0, now); err != nil {
						t.Fatalf("the slice of the refused call no longer commits: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("commit with attributes: %v", err)
			}
			if len(writes) > 0 {
				if _, err := twin.Commit(tc.cred, f, writes, size, 0, now); err != nil {
					t.Fatalf("twin commit: %v", err)
				}
			}
			want, err := twin.SetAttr(tc.cred, f, tc.s, now)
			if err != nil {
				t.Fatalf("twin setattr: %v", err)
			}
			if got != want {
				t.Fatalf("commit with attributes gave\n%+v\nthe two calls\n%+v", got, want)
			}
			if !tc.writes && got.Mtime != before.Mtime {
				t.Fatalf("attributes alone moved the mtime from %d to %d", before.Mtime, got.Mtime)
			}
		})
	}
}

// With user or group quotas on, a commit cannot take an owner change (the
// new owner's usage depends on the bytes after the commit): EOPNOTSUPP,
// nothing changed, and the caller sends the two calls apart.
func TestCommitSetAttrOwnerQuotas(t *testing.T) {
	e, _, f := dataFixture(t)
	if _, err := e.SetOwnerQuota(credRoot, QuotaUser, 7, 100, 1<<20); err != nil {
		t.Fatal(err)
	}
	id := allocOne(t, e)
	writes := []SliceWrite{{Slice: Slice{ID: id, Size: 3, Len: 3}}}
	before, _ := e.GetAttr(f)
	_, err := e.CommitSetAttr(credRoot, f, writes, 3, 0, SetAttr{Valid: SetUID, UID: 7}, 10)
	wantErrno(t, "commit with a chown under owner quotas", err, syscall.EOPNOTSUPP)
	if after, _ := e.GetAttr(f); after != before {
		t.Fatalf("the refused call changed the file:\n%+v\nto\n%+v", before, after)
	}
	a, err := e.CommitSetAttr(credRoot, f, writes, 3, 0, SetAttr{Valid: SetMode, Mode: 0o600}, 11)
	if err != nil || a.Size != 3 || a.Mode&0o7777 != 0o600 {
		t.Fatalf("commit with a chmod under owner quotas: size %d mode %o %v", a.Size, a.Mode, err)
	}
}
