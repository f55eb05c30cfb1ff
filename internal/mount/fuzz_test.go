package mount

import (
	"errors"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// expectedErrno is the error Normalize must give for p, from the rules
// written out plainly: length, emptiness, absoluteness and NUL, then the
// length of every component.
func expectedErrno(p string) error {
	switch {
	case len(p) >= MaxPathLen:
		return syscall.ENAMETOOLONG
	case p == "":
		return syscall.ENOENT
	case p[0] != '/' || strings.Contains(p, "\x00"):
		return syscall.EINVAL
	}
	for _, c := range strings.Split(p, "/") {
		if len(c) > MaxNameLen {
			return syscall.ENAMETOOLONG
		}
	}
	return nil
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"/", "//a/./b/", "/a/../..", "a", "", "/a\x00", "/.../..a", "/" + strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Normalize(p)
		want := expectedErrno(p)
		if want != nil {
			if !errors.Is(err, want) {
				t.Fatalf("Normalize(%q) = %q, %v; want %v", p, got, err, want)
			}
			return
		}
		if err != nil {
			t.Fatalf("Normalize(%q): %v", p, err)
		}
		if clean := path.Clean(p); got != clean {
			t.Fatalf("Normalize(%q) = %q, path.Clean gives %q", p, got, clean)
		}
		if again, err := Normalize(got); err != nil || again != got {
			t.Fatalf("Normalize(%q) = %q, not a fixed point: %q %v", p, got, again, err)
		}
		if len(got) > len(p) || !isNormal(got) {
			t.Fatalf("Normalize(%q) = %q", p, got)
		}
	})
}

// fuzzTable builds a valid table from a spec: prefixes separated by ';',
// each normalized after a "/" is put in front (those that fail are
// skipped); the i-th gets vpart i and a target chosen by i.
func fuzzTable(spec string) Table {
	t := Table{Version: 1, Entries: []Entry{{Prefix: "/", Target: "/"}}}
	seen := map[string]bool{"/": true}
	for i, raw := range strings.Split(spec, ";") {
		p, err := Normalize("/" + raw)
		if err != nil || seen[p] {
			continue
		}
		seen[p] = true
		e := Entry{Prefix: p, VPart: uint16(i % VirtualPartitions), ReadOnly: i%3 == 0}
		switch i % 3 {
		case 0:
			e.Target = "/"
		case 1:
			e.Target = p
		default:
			e.Target = "/t" + p
		}
		t.Entries = append(t.Entries, e)
	}
	sortEntries(t.Entries)
	return t
}

// atBoundary reports whether prefix ends at a component boundary of p.
func atBoundary(p, prefix string) bool {
	if prefix == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

func FuzzLookup(f *testing.F) {
	f.Add("a/b;a/c/d;ab", "/a/b/c")
	f.Add("a;a/b;a/b/c", "/a/bc")
	f.Add("x", "x")
	f.Add("a/b", "/a/b/")
	f.Add("a//b;../c", "//a/b")
	f.Fuzz(func(t *testing.T, spec, p string) {
		tab := fuzzTable(spec)
		s, err := Compile(tab)
		if err != nil {
			t.Fatalf("Compile(%q): %v", spec, err)
		}
		// Any string: no panic, and an owner only at a component boundary.
		e, inner, ok := s.Lookup(p)
		if ok != strings.HasPrefix(p, "/") {
			t.Fatalf("Lookup(%q) ok = %v", p, ok)
		}
		if ok && !atBoundary(p, e.Prefix) {
			t.Fatalf("Lookup(%q) = %q, not at a component boundary", p, e.Prefix)
		}
		_, buf, _ := s.LookupAppend(nil, p)
		if string(buf) != inner {
			t.Fatalf("LookupAppend(%q) = %q, Lookup gives %q", p, buf, inner)
		}
		s.Children(p)
		s.SameEntry(p, "/"+spec)

		// A normalized path: exactly the linear scan's answer.
		n, err := Normalize(p)
		if err != nil {
			return
		}
		e, inner, ok = s.Lookup(n)
		me, minner, mok := bruteLookup(&tab, n)
		if !ok || !mok || *e != me || inner != minner {
			t.Fatalf("Lookup(%q) = %+v %q %v, the linear scan says %+v %q", n, e, inner, ok, me, minner)
		}
		if got, want := s.Children(n), bruteChildren(&tab, n); !slices.Equal(got, want) {
			t.Fatalf("Children(%q) = %q, the linear scan says %q", n, got, want)
		}
	})
}
