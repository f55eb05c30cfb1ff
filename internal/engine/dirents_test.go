package engine

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestDirentsModel drives one directory's entries and a map with the same
// random adds, removes, replacements, packs and listings, through sizes
// that build, grow, shrink and drop the index and rewrite the buffer, and
// compares every lookup and the whole listing as it goes.
func TestDirentsModel(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			d := &dirents{}
			want := map[string]uint32{}
			pool := 3000
			if seed%2 == 0 {
				pool = 40 // hovers around smallDir
			}
			nextSlot := uint32(1)
			for step := range 12000 {
				name := fmt.Sprintf("file.%d", rng.Intn(pool))
				if rng.Intn(50) == 0 {
					name = fmt.Sprintf("%c%0*d", 'a'+rng.Intn(26), rng.Intn(250)+1, step) // long names
				}
				_, exists := want[name]
				if d.packed != nil {
					d.unpack() // as Engine.touch does before any use
				}
				switch r := rng.Intn(100); {
				case r < 45 && !exists:
					d.add(name, nextSlot)
					want[name] = nextSlot
					nextSlot++
				case r < 75 && exists:
					if got := d.remove(name); got != want[name] {
						t.Fatalf("step %d: remove %q gave slot %d, want %d", step, name, got, want[name])
					}
					delete(want, name)
				case r < 80 && exists:
					d.replace(name, nextSlot)
					want[name] = nextSlot
					nextSlot++
				case r < 81:
					d.pack()
					if err := d.check(); err != nil {
						t.Fatalf("step %d: packed: %v", step, err)
					}
					compareEach(t, step, d, want)
				default:
					if got := d.lookup(name); got != want[name] {
						t.Fatalf("step %d: lookup %q = %d, want %d", step, name, got, want[name])
					}
				}
				if step%211 == 0 && d.packed == nil {
					if err := d.check(); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
					compareListing(t, step, d, want)
				}
			}
			if d.packed != nil {
				d.unpack()
			}
			compareListing(t, -1, d, want)
		})
	}
}

// compareListing checks d's sorted listing and its each against want.
func compareListing(t *testing.T, step int, d *dirents, want map[string]uint32) {
	t.Helper()
	if d.live != len(want) {
		t.Fatalf("step %d: %d live entries, want %d", step, d.live, len(want))
	}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	var got []string
	d.list("", func(off int) bool {
		if d.slotAt(off) != want[d.nameString(off)] {
			t.Fatalf("step %d: listed %q -> %d, want %d", step, d.nameAt(off), d.slotAt(off), want[d.nameString(off)])
		}
		got = append(got, d.nameString(off))
		return true
	})
	if !slices.Equal(got, names) {
		t.Fatalf("step %d: listing has %d entries %.80q, want %d %.80q", step, len(got), got, len(names), names)
	}
	if len(names) > 2 {
		cur := names[len(names)/2]
		var first string
		d.list(cur, func(off int) bool { first = d.nameString(off); return false })
		if want := names[len(names)/2+1]; first != want {
			t.Fatalf("step %d: first after %q is %q, want %q", step, cur, first, want)
		}
	}
	compareEach(t, step, d, want)
}

// compareEach checks that d's each, packed or not, yields exactly want.
func compareEach(t *testing.T, step int, d *dirents, want map[string]uint32) {
	t.Helper()
	seen := 0
	d.each(func(name []byte, slot uint32) bool {
		if want[string(name)] != slot {
			t.Fatalf("step %d: each gave %q -> %d, want %d", step, name, slot, want[string(name)])
		}
		seen++
		return true
	})
	if seen != len(want) {
		t.Fatalf("step %d: each gave %d entries, want %d", step, seen, len(want))
	}
}

// TestCompactIdleSteps checks the sweep's contract: a directory used since
// the sweep last passed is left alone for one more round, every step stays
// within its budget plus one directory, packed directories answer as
// before, and a round with nothing to do ends the sweep until something is
// used again.
func TestCompactIdleSteps(t *testing.T) {
	e := New(0, 1)
	var dirs []Ino
	for k := range 20 {
		a, err := e.Mkdir(Root, e.Root(), fmt.Sprintf("d%d", k), 0o755, 2)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, a.Ino)
		for i := range 300 {
			if _, err := e.Mknod(Root, a.Ino, fmt.Sprintf("f%d", i), 0o644, 0, 3); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first round only clears the marks the creates left.
	packed := func() int {
		k := 0
		for _, ino := range dirs {
			if e.st.extraOf(e.node(ino)).dir.packed != nil {
				k++
			}
		}
		return k
	}
	// One directory visited costs one: a budget of 21 is one round over
	// the root and the 20 directories, all marked by the creates.
	if w := e.CompactIdle(len(dirs) + 1); w != len(dirs)+1 {
		t.Fatalf("first round did %d work, want %d", w, len(dirs)+1)
	}
	if k := packed(); k != 0 {
		t.Fatalf("%d directories packed in the round that cleared their marks", k)
	}
	for {
		w := e.CompactIdle(1000)
		if w == 0 {
			break
		}
		if w > 1000+300 {
			t.Fatalf("step did %d work, budget 1000 plus one directory of 300", w)
		}
	}
	if k := packed(); k != len(dirs) {
		t.Fatalf("%d of %d directories packed after the sweep settled", k, len(dirs))
	}
	if w := e.CompactIdle(1000); w != 0 {
		t.Fatalf("settled sweep did %d work", w)
	}
	// A lookup inflates one directory; the sweep wakes up and packs it
	// again after a round.
	a, err := e.Lookup(Root, dirs[3], "f123")
	if err != nil || a.Ino == 0 {
		t.Fatalf("lookup in a packed directory: %v %v", a, err)
	}
	if k := packed(); k != len(dirs)-1 {
		t.Fatalf("%d directories packed after one lookup, want %d", k, len(dirs)-1)
	}
	if e.CompactIdle(1000) == 0 {
		t.Fatal("sweep stayed asleep after a directory was used")
	}
	for e.CompactIdle(1000) > 0 {
	}
	if k := packed(); k != len(dirs) {
		t.Fatalf("%d of %d directories packed after the second sweep", k, len(dirs))
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
	ents, _, eof, err := e.Readdir(Root, dirs[7], "", 0, false)
	if err != nil || !eof || len(ents) != 300 || ents[0].Name != "f0" || ents[299].Name != "f99" {
		t.Fatalf("listing a packed directory: %d entries, eof %v, err %v", len(ents), eof, err)
	}
}

// A directory used just before a step is not packed by that step, even
// when the step's budget covers more than a round: the round ends it.
func TestCompactIdleLeavesJustUsed(t *testing.T) {
	e := New(0, 1)
	d, err := e.Mkdir(Root, e.Root(), "d", 0o755, 2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := e.Mknod(Root, d.Ino, fmt.Sprint("f", i), 0o644, 0, 3); err != nil {
			t.Fatal(err)
		}
	}
	for e.CompactIdle(1000) > 0 {
	}
	if _, err := e.Lookup(Root, d.Ino, "f1"); err != nil {
		t.Fatal(err)
	}
	e.CompactIdle(1000)
	if e.st.extraOf(e.node(d.Ino)).dir.packed != nil {
		t.Fatal("a directory used just before the step was packed by it")
	}
	for e.CompactIdle(1000) > 0 {
	}
	if e.st.extraOf(e.node(d.Ino)).dir.packed == nil {
		t.Fatal("the sweep settled without packing the directory again")
	}
}

// TestListingKeptAcrossChanges pages through directories while random
// adds, removes and packs change them between pages (rm -r's pattern of
// listing from the start after each removed page included), and checks
// every page against the names a map holds then: the order kept across
// removals, the tail of entries added since it was built, its folding in,
// and its carrying over a rewrite of the buffer.
func TestListingKeptAcrossChanges(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			d := &dirents{}
			want := map[string]uint32{}
			pool := []int{20, 3000, 20000}[seed%3]
			nextSlot := uint32(1)
			cursor := ""
			for step := range 20000 {
				if d.packed != nil {
					d.unpack()
				}
				name := fmt.Sprintf("n%d", rng.Intn(pool))
				if rng.Intn(30) == 0 {
					name = fmt.Sprintf("%c%d", 'a'+rng.Intn(26), rng.Intn(pool))
				}
				_, exists := want[name]
				switch r := rng.Intn(100); {
				case r < 40 && !exists:
					d.add(name, nextSlot)
					want[name] = nextSlot
					nextSlot++
				case r < 70 && exists:
					d.remove(name)
					delete(want, name)
				case r < 71:
					d.pack()
				case r < 73:
					cursor = ""
				case r < 76:
					// rm -r: remove the first page, list from the start.
					var page []string
					d.list("", func(off int) bool {
						page = append(page, d.nameString(off))
						return len(page) < 50
					})
					for _, n := range page {
						d.remove(n)
						delete(want, n)
					}
				default:
					limit := 1 + rng.Intn(200)
					var page []string
					end := d.list(cursor, func(off int) bool {
						if len(page) == limit {
							return false
						}
						if got, w := d.slotAt(off), want[d.nameString(off)]; got != w {
							t.Fatalf("step %d: %q -> %d, want %d", step, d.nameAt(off), got, w)
						}
						page = append(page, d.nameString(off))
						return true
					})
					var names []string
					for n := range want {
						if n > cursor {
							names = append(names, n)
						}
					}
					slices.Sort(names)
					wantEnd := len(names) <= limit
					names = names[:min(limit, len(names))]
					if !slices.Equal(page, names) || end != wantEnd {
						t.Fatalf("step %d: page after %q (limit %d) = %.60q end %v, want %.60q end %v", step, cursor, limit, page, end, names, wantEnd)
					}
					if len(page) > 0 {
						cursor = page[len(page)-1]
					}
					if end {
						cursor = ""
					}
				}
				if step%499 == 0 && d.packed == nil {
					if err := d.check(); err != nil {
						t.Fatalf("step %d: %v", step, err)
					}
				}
			}
		})
	}
}

// A directory's index has 2-byte cells while its buffer is under 64 KiB
// and 4-byte ones past it, whichever way the buffer crosses the mark:
// growing by adds, shrinking by removes and the rewrite, and loading.
func TestDirentsIndexWidths(t *testing.T) {
	d := &dirents{}
	want := map[string]uint32{}
	name := func(i int) string { return fmt.Sprintf("entry.with.a.long.common.prefix.%06d", i) }
	const n = 3000 // 3,000 entries of 42 bytes: the buffer crosses 64 KiB at about 1,560
	crossed := -1
	for i := range n {
		d.add(name(i), uint32(i+1))
		want[name(i)] = uint32(i + 1)
		if d.index16 != nil && !fits16(len(d.buf)) && !fits16(len(d.buf)-entHeader-len(name(i))+1) {
			t.Fatalf("add %d: 2-byte index over an entry at %d", i, len(d.buf)-entHeader-len(name(i)))
		}
		if crossed < 0 && d.index != nil {
			crossed = i
		}
		if i == 100 && d.index16 == nil {
			t.Fatalf("100 entries in %d bytes: no 2-byte index", len(d.buf))
		}
	}
	if crossed < 0 || d.index16 != nil {
		t.Fatalf("%d entries in %d bytes: index widths 4:%d 2:%d", n, len(d.buf), len(d.index), len(d.index16))
	}
	if err := d.check(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if got := d.lookup(name(i)); got != uint32(i+1) {
			t.Fatalf("lookup %d after growing: %d", i, got)
		}
	}
	// Remove all but a few hundred: the rewrites bring the buffer under
	// 64 KiB and the index back to 2-byte cells.
	for i := range n - 300 {
		if got := d.remove(name(i)); got != uint32(i+1) {
			t.Fatalf("remove %d: %d", i, got)
		}
		delete(want, name(i))
	}
	if d.index16 == nil || d.index != nil {
		t.Fatalf("300 entries in %d bytes: index widths 4:%d 2:%d", len(d.buf), len(d.index), len(d.index16))
	}
	if err := d.check(); err != nil {
		t.Fatal(err)
	}
	compareListing(t, -1, d, want)
	// Loading builds the width the buffer calls for.
	for _, count := range []int{300, n} {
		l := &dirents{}
		for i := range count {
			l.loadEntry([]byte(name(i)), uint32(i+1))
		}
		if dup := l.loaded(); dup != nil {
			t.Fatalf("loaded %d: repeated %q", count, dup)
		}
		if wide := l.index != nil; wide != !fits16(len(l.buf)) || l.indexed() == false {
			t.Fatalf("loaded %d entries in %d bytes: index widths 4:%d 2:%d", count, len(l.buf), len(l.index), len(l.index16))
		}
		if err := l.check(); err != nil {
			t.Fatalf("loaded %d: %v", count, err)
		}
		for i := range count {
			if got := l.lookup(name(i)); got != uint32(i+1) {
				t.Fatalf("loaded %d: lookup %d = %d", count, i, got)
			}
		}
	}
}
