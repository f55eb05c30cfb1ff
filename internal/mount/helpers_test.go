package mount

import (
	"path"
	"sort"
	"strings"
)

// The reference model: plain linear scans over a Table, written for
// obviousness, that the compiled Snapshot must agree with.

// under reports whether p is prefix or lies below it.
func under(p, prefix string) bool {
	if prefix == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// bruteOwner returns the index of the entry with the longest prefix that p
// is under, or -1.
func bruteOwner(t *Table, p string) int {
	best := -1
	for i, e := range t.Entries {
		if under(p, e.Prefix) && (best < 0 || len(e.Prefix) > len(t.Entries[best].Prefix)) {
			best = i
		}
	}
	return best
}

// bruteLookup is Lookup by linear scan; the rewritten path comes from
// path.Join, which is correct for normalized input.
func bruteLookup(t *Table, p string) (Entry, string, bool) {
	i := bruteOwner(t, p)
	if i < 0 {
		return Entry{}, "", false
	}
	e := t.Entries[i]
	rest := p
	if e.Prefix != "/" {
		rest = p[len(e.Prefix):]
	}
	return e, path.Join(e.Target, rest), true
}

// bruteChildren is Children by linear scan.
func bruteChildren(t *Table, dir string) []string {
	set := map[string]bool{}
	for _, e := range t.Entries {
		if e.Prefix == dir || !under(e.Prefix, dir) {
			continue
		}
		rest := strings.TrimPrefix(e.Prefix[len(dir):], "/")
		name, _, _ := strings.Cut(rest, "/")
		set[name] = true
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// mustCompile compiles t or panics.
func mustCompile(t Table) *Snapshot {
	s, err := Compile(t)
	if err != nil {
		panic(err)
	}
	return s
}

// sortEntries puts entries in Table order.
func sortEntries(es []Entry) {
	sort.Slice(es, func(i, j int) bool { return es[i].Prefix < es[j].Prefix })
}
