package engine

import (
	"bytes"
	"fmt"
	"math/rand"
	"path"
	"slices"
	"sort"
	"testing"
)

// treeImage lists the subtree at top: for each path below it, its type
// and mode, size and slices, so that a snapshot's image can be compared
// with its directory's at the moment it was taken.
func treeImage(t *testing.T, e *Engine, top Ino) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir Ino, p string)
	walk = func(dir Ino, p string) {
		ents, err := pathReaddirAll(e, credRoot, dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ents {
			a := get(e.GetAttr(d.Ino))
			cp := p + "/" + d.Name
			img := fmt.Sprintf("%o %d", a.Mode, a.Size)
			if !a.IsDir() {
				img += fmt.Sprint(e.chunks(e.st.peek(d.Ino)))
			}
			out[cp] = img
			if a.IsDir() {
				walk(d.Ino, cp)
			}
		}
	}
	walk(top, ".")
	return out
}

// TestSnapshotRandom runs random changes to a tree with snapshots,
// clones and snapshot removals among them: Check holds after every step,
// every snapshot keeps the image its directory had when it was taken, a
// checkpoint loads to the same bytes, and once every snapshot and file is
// gone every slice ever committed is garbage, none twice.
func TestSnapshotRandom(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { snapshotRandom(t, seed, 600) })
	}
}

func snapshotRandom(t *testing.T, seed int64, steps int) {
	rng := rand.New(rand.NewSource(seed))
	e := New(3, 1)
	now := int64(10)
	top := get(e.Mkdir(credRoot, e.Root(), "t", 0o755, now)).Ino
	dirs := []string{"/t"}
	var files []string
	committed := map[uint64]bool{}
	type snap struct {
		dir  string
		name string
		img  map[string]string
	}
	var snaps []snap
	n := 0
	for step := 0; step < steps; step++ {
		now++
		n++
		name := fmt.Sprint("n", n)
		dir := dirs[rng.Intn(len(dirs))]
		d := get(e.Resolve(credRoot, dir, false)).Ino
		switch k := rng.Intn(20); {
		case k < 5:
			f := get(e.Mknod(credRoot, d, name, S_IFREG|0o644, 0, now))
			files = append(files, path.Join(dir, name))
			id := allocOne(t, e)
			get(e.Commit(credRoot, f.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: 100, Len: uint32(1 + rng.Intn(100))}}}, 0, 0, now))
			committed[id] = true
		case k < 7 && len(dirs) < 20:
			get(e.Mkdir(credRoot, d, name, 0o755, now))
			dirs = append(dirs, path.Join(dir, name))
		case k < 10 && len(files) > 0:
			// Overwrite part of a file, or truncate it.
			f := get(e.Resolve(credRoot, files[rng.Intn(len(files))], false))
			if rng.Intn(3) == 0 {
				get(e.SetAttr(credRoot, f.Ino, SetAttr{Valid: SetSize, Size: uint64(rng.Intn(50))}, now))
				break
			}
			id := allocOne(t, e)
			get(e.Commit(credRoot, f.Ino, []SliceWrite{{Slice: Slice{ID: id, Size: 30, Len: 30, Pos: uint32(rng.Intn(60))}}}, 0, 0, now))
			committed[id] = true
		case k < 12 && len(files) > 0:
			i := rng.Intn(len(files))
			p, nm := path.Split(files[i])
			if err := e.Unlink(credRoot, get(e.Resolve(credRoot, p, false)).Ino, nm, now); err != nil {
				t.Fatal(err)
			}
			files = slices.Delete(files, i, i+1)
		case k < 14 && len(files) > 0:
			src := get(e.Resolve(credRoot, files[rng.Intn(len(files))], false))
			get(e.Clone(credRoot, src.Ino, d, name, now))
			files = append(files, path.Join(dir, name))
		case k < 15:
			// A clone of a whole directory: its files join the list.
			src := dirs[rng.Intn(len(dirs))]
			if dir == src || len(dir) > len(src) && dir[:len(src)+1] == src+"/" {
				break // a copy into its own subtree is allowed, but keeps the lists simple to leave out
			}
			get(e.Clone(credRoot, get(e.Resolve(credRoot, src, false)).Ino, d, name, now))
			dst := path.Join(dir, name)
			for _, f := range slices.Clone(files) {
				if len(f) > len(src) && f[:len(src)+1] == src+"/" {
					files = append(files, dst+f[len(src):])
				}
			}
			for _, s := range slices.Clone(dirs) {
				if len(s) > len(src) && s[:len(src)+1] == src+"/" {
					dirs = append(dirs, dst+s[len(src):])
				}
			}
			dirs = append(dirs, dst)
		case k < 18:
			get(e.SnapshotCreate(credRoot, d, name, now))
			snaps = append(snaps, snap{dir, name, treeImage(t, e, d)})
		case len(snaps) > 0:
			i := rng.Intn(len(snaps))
			s := snaps[i]
			if err := e.SnapshotRemove(credRoot, get(e.Resolve(credRoot, s.dir, false)).Ino, s.name, now); err != nil {
				t.Fatal(err)
			}
			snaps = slices.Delete(snaps, i, i+1)
		}
		if err := e.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if step%50 == 0 {
			e.CompactIdle(1 << 20)
		}
	}
	for _, s := range snaps {
		top := get(e.Resolve(credRoot, s.dir+"/"+SnapshotDir+"/"+s.name, false)).Ino
		if got := treeImage(t, e, top); fmt.Sprint(got) != fmt.Sprint(s.img) {
			t.Fatalf("snapshot %s of %s changed:\n got %v\nwant %v", s.name, s.dir, got, s.img)
		}
	}
	var b1, b2 bytes.Buffer
	if err := e.WriteCheckpoint(&b1); err != nil {
		t.Fatal(err)
	}
	l := get(Load(bytes.NewReader(b1.Bytes())))
	if err := l.WriteCheckpoint(&b2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b1.Bytes(), b2.Bytes()) {
		t.Fatal("the loaded engine's checkpoint differs")
	}
	// Everything goes: then every slice committed is garbage, once.
	for _, s := range snaps {
		if err := l.SnapshotRemove(credRoot, get(l.Resolve(credRoot, s.dir, false)).Ino, s.name, now); err != nil {
			t.Fatal(err)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(files)))
	for _, f := range files {
		p, nm := path.Split(f)
		if err := l.Unlink(credRoot, get(l.Resolve(credRoot, p, false)).Ino, nm, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	refs, eof := l.ListGarbage(0, MaxListSlices, 0)
	if !eof || len(refs) != len(committed) || len(l.shared) != 0 {
		t.Fatalf("%d garbage slices, %d committed, %d still shared", len(refs), len(committed), len(l.shared))
	}
	for _, r := range refs {
		if !committed[r.ID] {
			t.Fatalf("garbage slice %d never committed", r.ID)
		}
	}
	_ = top
}
