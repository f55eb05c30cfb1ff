package mount

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// Names chosen to collide: prefixes of each other ("a", "ab", "abc"), names
// that differ only after a shared start ("b", "b-", "b.c", "bc"), and bytes
// on both sides of '/' in byte order ('-' and '.' sort before it, '0' and
// letters after).
var randomNames = []string{"a", "ab", "abc", "b", "b-", "b.c", "bc", "c", "0", "x-y", "é", ".a", "..."}

func randomPath(r *rand.Rand, depth int) string {
	if depth == 0 {
		return "/"
	}
	var b strings.Builder
	for range depth {
		b.WriteByte('/')
		b.WriteString(randomNames[r.IntN(len(randomNames))])
	}
	return b.String()
}

// randomTable returns a valid table of about n entries over randomNames.
func randomTable(r *rand.Rand, n int) Table {
	t := Table{Version: r.Uint64N(1000)}
	t.Entries = append(t.Entries, Entry{Prefix: "/", VPart: 0, Target: "/"})
	if r.IntN(4) == 0 {
		t.Entries[0].Target = randomPath(r, 1+r.IntN(2))
	}
	seen := map[string]bool{"/": true}
	for len(t.Entries) < n {
		p := randomPath(r, 1+r.IntN(5))
		if seen[p] {
			continue
		}
		seen[p] = true
		e := Entry{Prefix: p, VPart: uint16(r.IntN(VirtualPartitions)), ReadOnly: r.IntN(5) == 0}
		switch r.IntN(3) {
		case 0:
			e.Target = "/"
		case 1:
			e.Target = p
		default:
			e.Target = randomPath(r, 1+r.IntN(3))
		}
		t.Entries = append(t.Entries, e)
	}
	sortEntries(t.Entries)
	return t
}

// randomQuery returns a path that is often at, below or next to a mount.
func randomQuery(r *rand.Rand, t *Table) string {
	p := "/"
	switch r.IntN(4) {
	case 0:
	default:
		p = t.Entries[r.IntN(len(t.Entries))].Prefix
	}
	switch r.IntN(3) {
	case 0: // the prefix itself
	case 1: // below it
		if p == "/" {
			p = ""
		}
		p += randomPath(r, 1+r.IntN(4))
	default: // next to it: one more byte in the last name
		if p != "/" {
			p += randomNames[r.IntN(len(randomNames))]
		}
	}
	return p
}

func TestRandomAgainstLinearScan(t *testing.T) {
	for seed := range uint64(120) {
		r := rand.New(rand.NewPCG(seed, 1))
		tab := randomTable(r, 50+r.IntN(450))
		s, err := Compile(tab)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var buf []byte
		for range 400 {
			p := randomQuery(r, &tab)
			if r.IntN(3) == 0 {
				p = randomPath(r, r.IntN(8))
			}
			e, inner, ok := s.Lookup(p)
			me, minner, mok := bruteLookup(&tab, p)
			if !ok || !mok || *e != me || inner != minner {
				t.Fatalf("seed %d: Lookup(%q) = %+v %q %v, the linear scan says %+v %q %v", seed, p, e, inner, ok, me, minner, mok)
			}
			var out []byte
			_, out, _ = s.LookupAppend(buf[:0], p)
			if string(out) != inner {
				t.Fatalf("seed %d: LookupAppend(%q) = %q, want %q", seed, p, out, inner)
			}
			buf = out
			if got, want := s.Children(p), bruteChildren(&tab, p); !slices.Equal(got, want) {
				t.Fatalf("seed %d: Children(%q) = %q, the linear scan says %q", seed, p, got, want)
			}
			q := randomQuery(r, &tab)
			pa, pb, same := s.SameEntry(p, q)
			ia, ib := bruteOwner(&tab, p), bruteOwner(&tab, q)
			if pa != tab.Entries[ia].Prefix || pb != tab.Entries[ib].Prefix || same != (ia == ib) {
				t.Fatalf("seed %d: SameEntry(%q, %q) = %q %q %v", seed, p, q, pa, pb, same)
			}
		}
	}
}

// TestRandomEdits applies random Set and Remove calls and checks that the
// table stays valid and agrees with a map of what should be mounted.
func TestRandomEdits(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	tab, err := Table{}.Set(Entry{Prefix: "/", Target: "/"})
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]Entry{"/": tab.Entries[0]}
	for i := range 3000 {
		p := randomPath(r, 1+r.IntN(3))
		if r.IntN(3) == 0 {
			p += "/" // Set and Remove normalize
		}
		clean, _ := Normalize(p)
		before, changed := tab.Version, true
		if r.IntN(2) == 0 {
			e := Entry{Prefix: p, VPart: uint16(r.IntN(100)), Target: randomPath(r, r.IntN(3))}
			if tab, err = tab.Set(e); err != nil {
				t.Fatal(err)
			}
			e.Prefix = clean
			model[clean] = e
		} else {
			nt, err := tab.Remove(p)
			if _, mounted := model[clean]; mounted != (err == nil) {
				t.Fatalf("step %d: Remove(%q) = %v, mounted %v", i, p, err, mounted)
			}
			if err == nil {
				tab = nt
				delete(model, clean)
			}
			changed = err == nil
		}
		if changed && tab.Version != before+1 || !changed && tab.Version != before {
			t.Fatalf("step %d: version %d after %d", i, tab.Version, before)
		}
		if err := tab.Validate(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if len(tab.Entries) != len(model) {
			t.Fatalf("step %d: %d entries, want %d", i, len(tab.Entries), len(model))
		}
		for _, e := range tab.Entries {
			if model[e.Prefix] != e {
				t.Fatalf("step %d: entry %+v, want %+v", i, e, model[e.Prefix])
			}
		}
	}
}

// TestWideFanout checks nodes with many children (every possible byte),
// which the lookup searches differently from nodes with a few.
func TestWideFanout(t *testing.T) {
	tab := Table{Entries: []Entry{{Prefix: "/", Target: "/"}}}
	var queries []string
	for c := 1; c < 256; c++ {
		if c == '/' {
			continue
		}
		name := string([]byte{byte(c)})
		tab.Entries = append(tab.Entries,
			Entry{Prefix: "/" + name + "n", VPart: uint16(c), Target: "/"},
			Entry{Prefix: "/w/" + name + "x", VPart: uint16(c), Target: "/t"})
		queries = append(queries, "/"+name+"n", "/"+name+"n/y", "/"+name+"ny", "/"+name, "/w/"+name, "/w/"+name+"x", "/w/"+name+"x/z", "/w/"+name+"xy")
	}
	sortEntries(tab.Entries)
	s := mustCompile(tab)
	for _, p := range queries {
		if !isNormal(p) { // "/." and "/.."
			continue
		}
		e, inner, ok := s.Lookup(p)
		me, minner, mok := bruteLookup(&tab, p)
		if !ok || !mok || *e != me || inner != minner {
			t.Fatalf("Lookup(%q) = %+v %q, the linear scan says %+v %q", p, e, inner, me, minner)
		}
	}
	if got := s.Children("/w"); len(got) != 254 {
		t.Errorf("Children(/w) has %d names, want 254", len(got))
	}
}
