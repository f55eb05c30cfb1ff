package router

import "testing"

// TestStatfsBelowQuotaThroughRouter: STATFS of a directory below a quota
// reaches its partition and shows the quota; STATFS of / still adds up
// the partitions.
func TestStatfsBelowQuotaThroughRouter(t *testing.T) {
	f := newFixture(t)
	ctx := testCtx(t)
	if _, err := f.c.Mkdir(ctx, "/qdir", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Create(ctx, "/qdir/a", 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.SetQuota(ctx, "/qdir", 10, 1<<20); err != nil {
		t.Fatal(err)
	}
	s, err := f.c.Statfs(ctx, "/qdir")
	if err != nil || s.TotalInodes != 10 || s.UsedInodes != 1 || s.TotalBytes != 1<<20 {
		t.Fatalf("statfs of /qdir through the router: %+v %v", s, err)
	}
	var want uint64
	for _, d := range f.direct {
		ds, err := d.Statfs(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		want += ds.TotalInodes
	}
	if s, err := f.c.Statfs(ctx, "/"); err != nil || s.TotalInodes != want {
		t.Fatalf("statfs of /: %+v %v, want %d inodes in total", s, err, want)
	}
}
