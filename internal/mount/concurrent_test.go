package mount

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// versionedTable returns a table whose every target names version v, and
// whose shape also depends on v: only "/m<v%5>" of "/m0".."/m4" is mounted.
// A lookup that mixed two versions would show it in the target or the
// owner.
func versionedTable(v uint64) Table {
	tag := fmt.Sprintf("/v%d", v)
	t := Table{Version: v, Entries: []Entry{
		{Prefix: "/", Target: tag},
		{Prefix: "/a", VPart: 1, Target: tag + "/a"},
		{Prefix: "/a/b", VPart: 2, Target: tag + "/ab", ReadOnly: v%2 == 0},
		{Prefix: fmt.Sprintf("/m%d", v%5), VPart: 3, Target: tag + "/m"},
	}}
	sortEntries(t.Entries)
	return t
}

// checkVersioned looks paths up in s and reports the first answer that is
// not the one version s.Version() must give.
func checkVersioned(s *Snapshot) error {
	v := s.Version()
	tag := fmt.Sprintf("/v%d", v)
	check := func(path, prefix, inner string) error {
		e, got, ok := s.Lookup(path)
		if !ok || e.Prefix != prefix || got != inner {
			return fmt.Errorf("version %d: Lookup(%q) = %v %q, want %q %q", v, path, e, got, prefix, inner)
		}
		if !strings.HasPrefix(e.Target, tag) {
			return fmt.Errorf("version %d: entry %+v of another version", v, e)
		}
		return nil
	}
	if err := check("/x/y", "/", tag+"/x/y"); err != nil {
		return err
	}
	if err := check("/a/y", "/a", tag+"/a/y"); err != nil {
		return err
	}
	if err := check("/a/b/z", "/a/b", tag+"/ab/z"); err != nil {
		return err
	}
	if e, _ := s.Owner("/a/b"); e.ReadOnly != (v%2 == 0) {
		return fmt.Errorf("version %d: read-only flag %v", v, e.ReadOnly)
	}
	for k := range uint64(5) {
		m := fmt.Sprintf("/m%d", k)
		var err error
		if k == v%5 {
			err = check(m+"/q", m, tag+"/m/q")
		} else {
			err = check(m+"/q", "/", tag+m+"/q")
		}
		if err != nil {
			return err
		}
	}
	if got := s.Children("/"); len(got) != 2 || got[0] != "a" || got[1] != fmt.Sprintf("m%d", v%5) {
		return fmt.Errorf("version %d: Children(/) = %q", v, got)
	}
	return nil
}

// TestConcurrentSwap runs readers against writers that keep storing new
// snapshots, in order and out of order. Run it with -race.
func TestConcurrentSwap(t *testing.T) {
	const versions = 400
	snaps := make([]*Snapshot, versions+1)
	for v := uint64(1); v <= versions; v++ {
		snaps[v] = mustCompile(versionedTable(v))
	}
	var c Current
	c.Store(snaps[1])

	var done atomic.Bool
	var writers, readers sync.WaitGroup
	errs := make(chan error, 4)
	var lookups, changes atomic.Int64
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			last := uint64(0)
			for n := 0; !done.Load() || n < 100; n++ {
				s := c.Load()
				if s.Version() < last {
					errs <- fmt.Errorf("version went back from %d to %d", last, s.Version())
					return
				}
				if s.Version() != last {
					changes.Add(1)
				}
				last = s.Version()
				if err := checkVersioned(s); err != nil {
					errs <- err
					return
				}
				lookups.Add(1)
				runtime.Gosched() // let the writers in, even on few cores
			}
		}()
	}
	// pace lets the readers do a few checks between two stores, so that
	// they meet many versions; it gives up if they have all stopped.
	pace := func() {
		target := lookups.Load() + 8
		for lookups.Load() < target && len(errs) == 0 {
			runtime.Gosched()
		}
	}
	// Writer 1 stores every version in order.
	writers.Add(2)
	go func() {
		defer writers.Done()
		for v := 2; v <= versions; v++ {
			c.Store(snaps[v])
			pace()
		}
	}()
	// Writer 2 stores random versions near the live one, mostly older;
	// those must be refused.
	go func() {
		defer writers.Done()
		r := rand.New(rand.NewPCG(1, 2))
		for range versions {
			v := min(versions, max(1, int(c.Load().Version())-4+r.IntN(6)))
			s := snaps[v]
			before := c.Load().Version()
			if c.Store(s) && s.Version() <= before {
				t.Errorf("Store accepted version %d over %d", s.Version(), before)
			}
			pace()
		}
	}()

	writers.Wait()
	done.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if v := c.Load().Version(); v != versions {
		t.Errorf("final version %d, want %d", v, versions)
	}
	t.Logf("%d consistent snapshot checks; readers saw the version change %d times", lookups.Load(), changes.Load())
}
