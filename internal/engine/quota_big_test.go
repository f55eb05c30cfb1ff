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
// thousand to a directory, three levels of nested quotas, a third of the
// files owned by uid 1000 under a user quota and all in group 0 under a
// group quota), changes it at random (sizes, renames across the quotas,
// removals, chowns), and requires every quota's kept usage to equal both
// the check's full count and an independent one: the content summary for
// directory quotas, the files' attributes for the user and group quotas.
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
		s := SetAttr{Valid: SetSize, Size: uint64(rng.Intn(10000))}
		if i%3 == 0 {
			s.Valid, s.UID = s.Valid|SetUID, 1000
		}
		if _, err := e.SetAttr(credRoot, a.Ino, s, now); err != nil {
			t.Fatal(err)
		}
		files, fileDirs, names = append(files, a.Ino), append(fileDirs, d), append(names, name)
	}
	for _, kind := range []QuotaKind{QuotaUser, QuotaGroup} {
		if _, err := e.SetOwnerQuota(credRoot, kind, map[QuotaKind]uint32{QuotaUser: 1000, QuotaGroup: 0}[kind], 0, 0); err != nil {
			t.Fatal(err)
		}
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
		switch rng.Intn(4) {
		case 3:
			if _, err := e.SetAttr(credRoot, files[k], SetAttr{Valid: SetUID, UID: uint32(rng.Intn(2)) * 1000}, now); err != nil {
				t.Fatal(err)
			}
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
	start = time.Now()
	if bad := e.CheckOwnerQuotas(); len(bad) > 0 {
		t.Fatalf("owner check: %+v", bad)
	}
	t.Logf("check of the user and group quotas over %d files in %v", len(files), time.Since(start).Round(time.Millisecond))
	var userFiles, userBytes uint64
	for _, ino := range files {
		if a, err := e.GetAttr(ino); err != nil {
			t.Fatal(err)
		} else if a.UID == 1000 {
			userFiles++
			userBytes += a.Size
		}
	}
	if q, _ := e.GetOwnerQuota(QuotaUser, 1000); q.Files != userFiles || q.Bytes != userBytes {
		t.Fatalf("user quota %+v, the files of uid 1000 are %d with %d bytes", q, userFiles, userBytes)
	}
	if q, _ := e.GetOwnerQuota(QuotaGroup, 0); q.Files != uint64(e.Len()) || q.Bytes != e.Statfs().UsedBytes {
		t.Fatalf("group quota %+v, the partition has %d nodes and %d bytes", q, e.Len(), e.Statfs().UsedBytes)
	}
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
