package engine

import (
	"flag"
	"fmt"
	"math/rand"
	"testing"
	"time"
)

var flagQuotaFiles = flag.Int("quota.files", 20_000, "TestQuotaCheckAgreesWithRecount: files in the tree (1000000 for the full run)")

// TestQuotaCheckAgreesWithRecount builds a tree of -quota.files files (a
// thousand to a directory, three levels of nested quotas), changes it at
// random (sizes, renames across the quotas, removals), and requires every
// quota's kept usage to equal both the check's full count and the content
// summary, an independent walk.
func TestQuotaCheckAgreesWithRecount(t *testing.T) {
	nfiles := *flagQuotaFiles
	e := New(4, 1)
	now := int64(2)
	mk := func(parent Ino, name string) Ino {
		a, err := e.Mkdir(credRoot, parent, name, 0o755, now)
		if err != nil {
			t.Fatal(err)
		}
		return a.Ino
	}
	top := mk(e.Root(), "top")
	if _, err := e.SetQuota(credRoot, top, 0, 0); err != nil {
		t.Fatal(err)
	}
	var groups, dirs []Ino
	for g := range 10 {
		gi := mk(top, fmt.Sprint("g", g))
		groups = append(groups, gi)
	}
	start := time.Now()
	rng := rand.New(rand.NewSource(1))
	var files []Ino
	var fileDirs []Ino
	var names []string
	for i := 0; i < nfiles; i++ {
		if i%1000 == 0 {
			dirs = append(dirs, mk(groups[len(dirs)%len(groups)], fmt.Sprint("d", len(dirs))))
		}
		d := dirs[len(dirs)-1]
		name := fmt.Sprint("f", i)
		a, err := e.Mknod(credRoot, d, name, S_IFREG|0o644, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.SetAttr(credRoot, a.Ino, SetAttr{Valid: SetSize, Size: uint64(rng.Intn(10000))}, now); err != nil {
			t.Fatal(err)
		}
		files, fileDirs, names = append(files, a.Ino), append(fileDirs, d), append(names, name)
	}
	t.Logf("%d files built in %v", nfiles, time.Since(start).Round(time.Millisecond))
	// Quotas on every group and on every other directory, set once the
	// tree is there (each counts its subtree once).
	start = time.Now()
	for _, g := range groups {
		if _, err := e.SetQuota(credRoot, g, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(dirs); i += 2 {
		if _, err := e.SetQuota(credRoot, dirs[i], 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d quotas set in %v", len(e.Quotas()), time.Since(start).Round(time.Millisecond))
	for range nfiles / 10 {
		now++
		k := rng.Intn(len(files))
		switch rng.Intn(3) {
		case 0:
			if _, err := e.SetAttr(credRoot, files[k], SetAttr{Valid: SetSize, Size: uint64(rng.Intn(20000))}, now); err != nil {
				t.Fatal(err)
			}
		case 1:
			to := dirs[rng.Intn(len(dirs))]
			if err := e.Rename(credRoot, fileDirs[k], names[k], to, names[k], 0, now); err != nil {
				t.Fatal(err)
			}
			fileDirs[k] = to
		default:
			if err := e.Unlink(credRoot, fileDirs[k], names[k], now); err != nil {
				t.Fatal(err)
			}
			last := len(files) - 1
			files[k], fileDirs[k], names[k] = files[last], fileDirs[last], names[last]
			files, fileDirs, names = files[:last], fileDirs[:last], names[:last]
		}
	}
	// Whole directories move between groups too.
	for i := 1; i < len(dirs); i += 3 {
		if err := e.Rename(credRoot, e.parentOf(e.node(dirs[i])), fmt.Sprint("d", i), groups[(i+1)%len(groups)], fmt.Sprint("d", i), 0, now); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	bad, err := e.CheckQuotas()
	if err != nil || len(bad) > 0 {
		t.Fatalf("check: %v %+v", err, bad)
	}
	t.Logf("check of %d quotas over %d files in %v", len(e.Quotas()), len(files), time.Since(start).Round(time.Millisecond))
	for _, q := range e.Quotas() {
		s, err := e.Summary(credRoot, q.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if s.Dirs+s.Files-1 != q.Files || s.Bytes != q.Bytes {
			t.Fatalf("quota on %d: %d files %d bytes, summary %+v", q.Dir, q.Files, q.Bytes, s)
		}
	}
	if q, _ := e.GetQuota(top); q.Files != uint64(len(files)+len(dirs)+len(groups)) {
		t.Fatalf("top quota %d files, the tree has %d", q.Files, len(files)+len(dirs)+len(groups))
	}
}
