package fuse

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestParseGroups(t *testing.T) {
	status := []byte("Name:\tbash\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nFDSize:\t256\nGroups:\t4 24 27 1000 \nNgid:\t0\n")
	got, err := parseGroups(status)
	if err != nil || !slices.Equal(got, []uint32{4, 24, 27, 1000}) {
		t.Errorf("got %v %v", got, err)
	}
	if got, err := parseGroups([]byte("Groups:\t\n")); err != nil || len(got) != 0 {
		t.Errorf("empty groups: %v %v", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "Groups:\t1 x\n", "Groups:\t99999999999\n"} {
		if _, err := parseGroups([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestReadOwnGroups(t *testing.T) {
	got, err := readGroups(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]uint32, len(own))
	for i, g := range own {
		want[i] = uint32(g)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("read %v, getgroups says %v", got, want)
	}
}

// TestGroupCache checks a process's groups are read once within the TTL
// and again after it, and that the cache stays bounded.
func TestGroupCache(t *testing.T) {
	now := time.Unix(1000, 0)
	reads := 0
	g := newGroupCache()
	g.now = func() time.Time { return now }
	g.read = func(pid uint32) ([]uint32, error) {
		reads++
		return []uint32{pid, uint32(reads)}, nil
	}
	if got := g.groups(0); got != nil || reads != 0 {
		t.Errorf("pid 0: %v after %d reads", got, reads)
	}
	first := g.groups(42)
	if again := g.groups(42); !slices.Equal(again, first) || reads != 1 {
		t.Errorf("within the TTL: %v, %d reads", again, reads)
	}
	now = now.Add(groupTTL)
	if later := g.groups(42); slices.Equal(later, first) || reads != 2 {
		t.Errorf("after the TTL: %v, %d reads", later, reads)
	}
	for pid := range uint32(3 * maxCachedPids) {
		g.groups(pid + 100)
	}
	if n := len(g.m); n > maxCachedPids {
		t.Errorf("cache holds %d pids, bound %d", n, maxCachedPids)
	}
}
