package engine

import (
	"strings"
	"testing"
)

// TestValidEntryNameAgrees: the bytes form Check uses accepts exactly the
// names checkSyntax, checkLen and isDot accept.
func TestValidEntryNameAgrees(t *testing.T) {
	names := []string{"", "a", ".", "..", "...", ".a", "a/b", "/", "a\x00", "\x00",
		strings.Repeat("x", MaxNameLen), strings.Repeat("x", MaxNameLen+1),
		strings.Repeat("/", MaxNameLen+1), "naïve", " ", "a b"}
	for _, name := range names {
		want := checkSyntax(name) == nil && checkLen(name) == nil && !isDot(name)
		if got := validEntryName([]byte(name)); got != want {
			t.Errorf("validEntryName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestOwnersLastReleased: the id refIn remembers is forgotten when its
// last node goes, so that the pair, coming back, is counted under its map
// entry again and its old id is not handed to another pair meanwhile.
func TestOwnersLastReleased(t *testing.T) {
	var o owners
	a := o.ref(1000, 1000)
	if o.ref(1000, 1000) != a {
		t.Fatal("the same pair got two ids")
	}
	o.unref(a)
	o.unref(a) // a is free now
	again := o.ref(1000, 1000)
	other := o.ref(2000, 2000)
	if other == again {
		t.Fatalf("pairs 1000:1000 and 2000:2000 share id %d", again)
	}
	for id, want := range map[uint32]uint32{again: 1000, other: 2000} {
		if got := o.get(id); got.uid != want {
			t.Errorf("id %d is uid %d, want %d", id, got.uid, want)
		}
	}
	if err := o.check(map[uint32]uint64{0: 0, again: 1, other: 1}); err != nil {
		t.Error(err)
	}
}
