package engine

import (
	"strings"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/model"
)

// fuzzTree builds the same small tree in fs (the engine or the model):
// directories with various permissions, files, and symlinks that are
// relative, absolute, dangling, looping, and a chain of 42.
func fuzzTree(tb testing.TB, fs namespace) {
	tb.Helper()
	now := int64(10)
	must := func(_ Attr, err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("building the fuzz tree: %v", err)
		}
	}
	must(pathSetAttr(fs, credRoot, "/", true, SetAttr{Valid: SetMode, Mode: 0o755}, now))
	must(pathMkdir(fs, credRoot, "/d", 0o755, now))
	must(pathMknod(fs, credRoot, "/d/f", 0o644, 0, now))
	must(pathMkdir(fs, credRoot, "/d/../tmp", 0o1777, now))
	must(pathMkdir(fs, credU1, "/tmp/sub", 0o700, now))
	must(pathMknod(fs, credU1, "/tmp/sub/g", S_IFIFO|0o600, 0, now))
	must(pathMkdir(fs, credRoot, "/nx", 0o600, now))
	must(pathMknod(fs, credRoot, "/nx/z", 0o644, 0, now))
	must(pathMkdir(fs, credRoot, "/"+strings.Repeat("n", 255), 0o755, now))
	for _, l := range [][2]string{
		{"d", "/l1"}, {"/d/f", "/l2"}, {"loop", "/loop"}, {"../..", "/d/up"}, {"d/", "/dl"},
		{"f/", "/d/fs"}, {"missing", "/dang"}, {"/nx/z", "/tonx"}, {"tmp/sub", "/tosub"},
		{"a", "/b"}, {"b", "/a"}, {".", "/dot"}, {"/", "/slash"}, {strings.Repeat("o", 256), "/long"},
		{"d", "/c0"},
	} {
		must(pathSymlink(fs, credRoot, l[0], l[1], now))
	}
	for i := 1; i <= 41; i++ {
		must(pathSymlink(fs, credRoot, "c"+decimalString(i-1), "/c"+decimalString(i), now))
	}
}

var fuzzCreds = []Cred{credRoot, credU1, credU2}

var fuzzPaths = []string{
	"/", "/d/f", "/l1/f", "/l2", "/loop", "/d/up/d", "/dl/", "/d/fs", "/dang/", "/tonx", "/tosub/g",
	"/a/x", "/dot/dot/d", "/slash/..", "/long", "/c40", "/c41/f", "//d//./../d/f/", "/nx/z", "",
	"d", "/d/\x00", "/" + strings.Repeat("n", 255) + "/..", "/" + strings.Repeat("x", 256),
	strings.Repeat("/", 4096), "/missing/" + strings.Repeat("y", 256),
}

// FuzzResolve sends arbitrary paths through Resolve and ResolveParent on a
// fixed tree with symlinks. Neither may panic; errors are bare errnos; a
// success names a node that exists (a directory for ResolveParent, with a
// plain name); a path longer than 4096 bytes is ENAMETOOLONG; and the two
// agree with each other and with Lookup.
func FuzzResolve(f *testing.F) {
	for _, p := range fuzzPaths {
		f.Add(p, true, uint8(0))
	}
	e := New(0, 1)
	fuzzTree(f, e)
	if err := e.Check(); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, follow bool, who uint8) {
		c := fuzzCreds[int(who)%len(fuzzCreds)]
		a, err := e.Resolve(c, path, follow)
		checkErrno(t, "Resolve", err)
		if len(path) > MaxPathLen && errName(err) != "ENAMETOOLONG" {
			t.Errorf("Resolve of a %d-byte path: %s, want ENAMETOOLONG", len(path), errName(err))
		}
		if err == nil {
			if got, gerr := e.GetAttr(a.Ino); gerr != nil || got != a {
				t.Errorf("Resolve(%q) returned %s, but GetAttr gives %s", abbrev(path), fmtAttr(a), attrOrErr(got, gerr))
			}
			if follow && a.Mode&S_IFMT == S_IFLNK {
				t.Errorf("Resolve(%q, follow) returned a symlink", abbrev(path))
			}
			if strings.HasSuffix(path, "/") && !a.IsDir() {
				t.Errorf("Resolve(%q) with a trailing slash returned a %s", abbrev(path), typeName(a.Mode))
			}
		}
		pino, name, perr := e.ResolveParent(c, path)
		checkErrno(t, "ResolveParent", perr)
		if len(path) > MaxPathLen && errName(perr) != "ENAMETOOLONG" {
			t.Errorf("ResolveParent of a %d-byte path: %s, want ENAMETOOLONG", len(path), errName(perr))
		}
		if perr != nil {
			// The parent's walk is a prefix of the whole path's walk.
			if err == nil && !isDotName(lastComponent(path)) {
				t.Errorf("Resolve(%q) succeeded but ResolveParent failed: %s", abbrev(path), errName(perr))
			}
			return
		}
		d, gerr := e.GetAttr(pino)
		if gerr != nil || !d.IsDir() {
			t.Errorf("ResolveParent(%q) returned %d, which is not a directory (%s)", abbrev(path), pino, attrOrErr(d, gerr))
		}
		if name == "" || strings.ContainsAny(name, "/\x00") {
			t.Errorf("ResolveParent(%q) returned the name %q", abbrev(path), abbrev(name))
		}
		// Looking the name up in the parent finds what Resolve found,
		// when no symlink is followed at the end.
		if !follow && !strings.HasSuffix(path, "/") {
			l, lerr := e.Lookup(c, pino, name)
			if errName(lerr) != errName(err) || err == nil && l != a {
				t.Errorf("Resolve(%q, nofollow) gives %s, Lookup(%d, %q) gives %s",
					abbrev(path), attrOrErr(a, err), pino, abbrev(name), attrOrErr(l, lerr))
			}
		}
	})
}

func lastComponent(path string) string {
	path = strings.TrimRight(path, "/")
	return path[strings.LastIndexByte(path, '/')+1:]
}

// FuzzPathModel compares Resolve and ResolveParent with the model (Linux's
// path resolution) on the same tree, for arbitrary paths and callers. Its
// seeds are in testdata/fuzz/FuzzPathModel.
func FuzzPathModel(f *testing.F) {
	f.Add("/d/up/d/f", true, uint8(1))
	e := New(0, 1)
	m := newModel(0, 1)
	fuzzTree(f, e)
	fuzzTree(f, m)
	f.Fuzz(func(t *testing.T, path string, follow bool, who uint8) {
		c := fuzzCreds[int(who)%len(fuzzCreds)]
		a, err := e.Resolve(c, path, follow)
		ma, merr := m.Resolve(c, path, follow)
		if errName(err) != errName(merr) || err == nil && a != ma {
			t.Errorf("Resolve(%q, follow=%v) as %s: engine %s, Linux (model) %s",
				abbrev(path), follow, credName(c), attrOrErr(a, err), attrOrErr(ma, merr))
		}
		pino, name, err := e.ResolveParent(c, path)
		mino, mname, merr := m.ResolveParent(c, path)
		// The parent walk is Linux's. A last component that is too long
		// is for the operation receiving it to refuse, after searching
		// the directory; ResolveParent may also refuse it with the same
		// error the operation would give.
		if merr == nil && len(mname) > MaxNameLen && err != nil {
			if !m.o.Searchable(fromCred(c), model.Ino(mino)) {
				merr = syscall.EACCES
			} else {
				merr = syscall.ENAMETOOLONG
			}
		}
		if errName(err) != errName(merr) || err == nil && (pino != mino || name != mname) {
			t.Errorf("ResolveParent(%q) as %s: engine %d %q %s, Linux (model) %d %q %s",
				abbrev(path), credName(c), pino, abbrev(name), errName(err), mino, abbrev(mname), errName(merr))
		}
	})
}

func attrOrErr(a Attr, err error) string {
	if err != nil {
		return errName(err)
	}
	return fmtAttr(a)
}

func checkErrno(t *testing.T, op string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if _, ok := err.(syscall.Errno); !ok {
		t.Errorf("%s: error %v (%T) is not a bare syscall.Errno", op, err, err)
	}
}

// FuzzNames sends arbitrary names through Mkdir, Mknod, Lookup, Rename,
// Unlink and Rmdir. Nothing may panic, errors are bare errnos, a created
// node can be looked up under its name, and Check holds after every call.
func FuzzNames(f *testing.F) {
	for _, n := range fuzzNames {
		f.Add(n[0], n[1], uint8(0), uint8(0))
	}
	f.Fuzz(func(t *testing.T, a, b string, flags, who uint8) {
		c := fuzzCreds[int(who)%len(fuzzCreds)]
		e := New(0, 1)
		if _, err := e.SetAttr(credRoot, e.Root(), SetAttr{Valid: SetMode, Mode: 0o1777}, 1); err != nil {
			t.Fatal(err)
		}
		dir, err := pathMkdir(e, credU1, "/dir", 0o755, 1)
		if err != nil {
			t.Fatal(err)
		}
		root := e.Root()
		var now int64 = 1
		step := func(op string, err error) {
			t.Helper()
			now++
			checkErrno(t, op, err)
			if cerr := e.Check(); cerr != nil {
				t.Fatalf("Check after %s as %s (%s): %v", op, credName(c), errName(err), cerr)
			}
		}
		created := func(op string, parent Ino, name string, at Attr, err error) {
			t.Helper()
			step(op, err)
			if err != nil {
				return
			}
			if name == "" || len(name) > MaxNameLen || strings.ContainsAny(name, "/\x00") || isDotName(name) {
				t.Errorf("%s: created an entry with the invalid name %q", op, abbrev(name))
			}
			if l, lerr := e.Lookup(credRoot, parent, name); lerr != nil || l != at {
				t.Errorf("%s returned %s, but Lookup gives %s", op, fmtAttr(at), attrOrErr(l, lerr))
			}
		}
		qa, qb := abbrev(a), abbrev(b)
		at, err := e.Mkdir(c, root, a, 0o755, now)
		created("mkdir "+qa, root, a, at, err)
		at, err = e.Mknod(c, dir.Ino, b, 0o644, 0, now)
		created("mknod dir/"+qb, dir.Ino, b, at, err)
		_, err = e.Lookup(c, root, a)
		step("lookup "+qa, err)
		step("rename "+qa+" dir/"+qb, e.Rename(c, root, a, dir.Ino, b, uint32(flags%4), now))
		step("rename dir/"+qb+" "+qa, e.Rename(c, dir.Ino, b, root, a, uint32(flags/4%4), now))
		at, err = e.Symlink(c, root, b, a, now)
		created("symlink "+qb+" -> "+qa, root, b, at, err)
		at, err = e.Link(c, at.Ino, dir.Ino, a, now)
		created("link dir/"+qa, dir.Ino, a, at, err)
		step("unlink dir/"+qb, e.Unlink(c, dir.Ino, b, now))
		step("unlink "+qb, e.Unlink(c, root, b, now))
		step("rmdir dir/"+qb, e.Rmdir(c, dir.Ino, b, now))
		step("rmdir "+qa, e.Rmdir(c, root, a, now))
		_, err = e.Lookup(c, root, a)
		step("lookup "+qa, err)
	})
}

var fuzzNames = [][2]string{
	{"a", "b"}, {".", ".."}, {"", "x"}, {"a/b", "c"}, {"nul\x00", "z"},
	{strings.Repeat("n", 255), strings.Repeat("o", 256)}, {"\xff\xfe", "a"}, {"a", "a"},
	{" ", "\t"}, {"...", ".a"},
}

// FuzzNameModel runs the calls of FuzzNames on the engine and on the
// model, and compares every result. Its seeds are in
// testdata/fuzz/FuzzNameModel.
func FuzzNameModel(f *testing.F) {
	f.Add("a", "b", uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, a, b string, flags, who uint8) {
		c := fuzzCreds[int(who)%len(fuzzCreds)]
		e, m := New(0, 1), newModel(0, 1)
		var now int64 = 1
		// A sticky root that everyone may write in, and a directory of
		// 1000's.
		for _, fs := range []namespace{e, m} {
			if _, err := fs.SetAttr(credRoot, fs.Root(), SetAttr{Valid: SetMode, Mode: 0o1777}, now); err != nil {
				t.Fatal(err)
			}
			if _, err := pathMkdir(fs, credU1, "/dir", 0o755, now); err != nil {
				t.Fatal(err)
			}
		}
		root := e.Root()
		dir, _ := e.Resolve(credRoot, "/dir", false)
		step := func(op string, run func(fs namespace) (Attr, error)) {
			t.Helper()
			now++
			ea, eerr := run(e)
			ma, merr := run(m)
			checkErrno(t, op, eerr)
			if errName(eerr) != errName(merr) || eerr == nil && ea != ma {
				t.Fatalf("%s as %s: engine %s, Linux (model) %s", op, credName(c), attrOrErr(ea, eerr), attrOrErr(ma, merr))
			}
			if err := e.Check(); err != nil {
				t.Fatalf("Check after %s: %v", op, err)
			}
		}
		noAttr := func(err error) (Attr, error) { return Attr{}, err }
		qa, qb := abbrev(a), abbrev(b)
		step("mkdir "+qa, func(fs namespace) (Attr, error) { return fs.Mkdir(c, root, a, 0o755, now) })
		step("mknod dir/"+qb, func(fs namespace) (Attr, error) { return fs.Mknod(c, dir.Ino, b, 0o644, 0, now) })
		step("lookup "+qa, func(fs namespace) (Attr, error) { return fs.Lookup(c, root, a) })
		step("lookup dir/"+qb, func(fs namespace) (Attr, error) { return fs.Lookup(c, dir.Ino, b) })
		step("rename "+qa+" dir/"+qb, func(fs namespace) (Attr, error) {
			return noAttr(fs.Rename(c, root, a, dir.Ino, b, uint32(flags%4), now))
		})
		step("rename dir/"+qb+" "+qa, func(fs namespace) (Attr, error) {
			return noAttr(fs.Rename(c, dir.Ino, b, root, a, uint32(flags/4%4), now))
		})
		step("symlink "+qb+" -> "+qa, func(fs namespace) (Attr, error) { return fs.Symlink(c, root, b, a, now) })
		step("unlink dir/"+qb, func(fs namespace) (Attr, error) { return noAttr(fs.Unlink(c, dir.Ino, b, now)) })
		step("unlink "+qb, func(fs namespace) (Attr, error) { return noAttr(fs.Unlink(c, root, b, now)) })
		step("rmdir dir/"+qb, func(fs namespace) (Attr, error) { return noAttr(fs.Rmdir(c, dir.Ino, b, now)) })
		step("rmdir "+qa, func(fs namespace) (Attr, error) { return noAttr(fs.Rmdir(c, root, a, now)) })
		step("lookup "+qa, func(fs namespace) (Attr, error) { return fs.Lookup(c, root, a) })
	})
}
