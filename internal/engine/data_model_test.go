package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/canopyfs/canopy/internal/layout"
)

// The data model test drives the engine's data path with random commits,
// overwrites, sparse writes, writes across chunk boundaries, truncations
// down and up, compactions (current and stale), unlinks of open and closed
// files and purges, and after every step compares what a reader would see
// against a byte-array model, and checks the slice accounting: every id
// ever committed is exactly one of {used by a file, garbage, purged}.
//
// Chunks are 64 MiB, so the model keeps bytes only in windows around the
// start of the file and the first chunk boundaries; every offset the test
// picks lies in a window, and writes may span the gaps between them.

const modelWin = 2048

// modelWindows are the file ranges the model keeps bytes for.
var modelWindows = []uint64{0, layout.ChunkSize - modelWin/2, 2*layout.ChunkSize - modelWin/2}

// sliceByte is the content of byte off of a slice id that was written by
// a client (not by compaction): a fixed function of (id, off).
func sliceByte(id uint64, off uint64) byte {
	v := id*0x9E3779B97F4A7C15 ^ (off+1)*0xC2B2AE3D27D4EB4F
	v ^= v >> 29
	v *= 0xBF58476D1CE4E5B9
	return byte(v >> 32)
}

// piece is a run of a compacted slice's data: len bytes at off of the new
// slice are bytes srcOff.. of slice src (0: zeros).
type piece struct {
	off, len uint64
	src      uint64
	srcOff   uint64
}

type dataModel struct {
	t         *testing.T
	e         *Engine
	rng       *rand.Rand
	now       int64
	files     []*mfile
	compacted map[uint64][]piece // content of slices made by compaction
	committed map[uint64]bool    // every id placed by Commit or Compact
	purged    map[uint64]bool
	dir       Ino
	made      int
}

type mfile struct {
	name  string
	ino   Ino
	size  uint64
	win   [][]byte // bytes of each model window
	opens int
	gone  bool // unlinked
}

func (m *dataModel) content(id, off uint64) byte {
	ps, ok := m.compacted[id]
	if !ok {
		return sliceByte(id, off)
	}
	for _, p := range ps {
		if off >= p.off && off < p.off+p.len {
			if p.src == 0 {
				return 0
			}
			return m.content(p.src, p.srcOff+off-p.off)
		}
	}
	m.t.Fatalf("compacted slice %d has no byte %d", id, off)
	return 0
}

// pickOffset returns a random offset inside a model window.
func (m *dataModel) pickOffset() uint64 {
	return modelWindows[m.rng.IntN(len(modelWindows))] + uint64(m.rng.IntN(modelWin))
}

// eachWindowByte calls fn for every model byte in [start, end).
func eachWindowByte(start, end uint64, fn func(w int, i int, x uint64)) {
	for w, base := range modelWindows {
		lo, hi := max(start, base), min(end, base+modelWin)
		for x := lo; x < hi; x++ {
			fn(w, int(x-base), x)
		}
	}
}

func (m *dataModel) newFile() {
	m.made++
	name := fmt.Sprintf("f%d", m.made)
	a, err := m.e.Mknod(credRoot, m.dir, name, S_IFREG|0o644, 0, m.tick())
	if err != nil {
		m.t.Fatal(err)
	}
	f := &mfile{name: name, ino: a.Ino, win: make([][]byte, len(modelWindows))}
	for i := range f.win {
		f.win[i] = make([]byte, modelWin)
	}
	m.files = append(m.files, f)
}

func (m *dataModel) tick() int64 { m.now++; return m.now }

func (m *dataModel) alloc(n uint32) uint64 {
	first, got, err := m.e.AllocSlices(m.e.Root(), n)
	if err != nil || got != n {
		m.t.Fatalf("alloc %d: %d %v", n, got, err)
	}
	return first
}

// split cuts the file range [start, end) of a slice at chunk boundaries
// into slice writes of id, whose byte 0 is at file offset start.
func split(id uint64, start, end uint64) []SliceWrite {
	var ws []SliceWrite
	for x := start; x < end; {
		idx := uint32(x / layout.ChunkSize)
		stop := min(end, chunkStart(idx)+layout.ChunkSize)
		ws = append(ws, SliceWrite{Chunk: idx, Slice: Slice{
			ID: id, Size: uint32(end - start), Off: uint32(x - start), Len: uint32(stop - x),
			Pos: uint32(x - chunkStart(idx)),
		}})
		x = stop
	}
	return ws
}

// write commits one to three slices (each possibly across chunks) to f
// in one commit, and applies them to the model in order.
func (m *dataModel) write(f *mfile) {
	k := 1 + m.rng.IntN(3)
	first := m.alloc(uint32(k))
	var ws []SliceWrite
	type span struct{ id, start, end uint64 }
	var spans []span
	for i := range k {
		a, b := m.pickOffset(), m.pickOffset()
		if a > b {
			a, b = b, a
		}
		if a == b {
			b++
		}
		if m.rng.IntN(4) == 0 { // a short write
			b = min(b, a+1+uint64(m.rng.IntN(64)))
		}
		id := first + uint64(i)
		ws = append(ws, split(id, a, b)...)
		spans = append(spans, span{id, a, b})
	}
	size := uint64(0)
	if m.rng.IntN(5) == 0 { // extend the file beyond the data
		size = m.pickOffset()
	}
	a, err := m.e.Commit(credRoot, f.ino, ws, size, 0, m.tick())
	if err != nil {
		m.t.Fatalf("commit %v to %s: %v", ws, f.name, err)
	}
	for _, s := range spans {
		m.committed[s.id] = true
		eachWindowByte(s.start, s.end, func(w, i int, x uint64) {
			f.win[w][i] = m.content(s.id, x-s.start)
		})
		f.size = max(f.size, s.end)
	}
	f.size = max(f.size, size)
	if a.Size != f.size {
		m.t.Fatalf("%s: size %d after commit, model %d", f.name, a.Size, f.size)
	}
}

func (m *dataModel) truncate(f *mfile) {
	size := m.pickOffset()
	if m.rng.IntN(4) == 0 {
		size = 0
	}
	if _, err := m.e.SetAttr(credRoot, f.ino, SetAttr{Valid: SetSize, Size: size}, m.tick()); err != nil {
		m.t.Fatal(err)
	}
	if size < f.size {
		eachWindowByte(size, f.size, func(w, i int, x uint64) { f.win[w][i] = 0 })
	}
	f.size = size
}

// compact replaces all stored slices of a fragmented chunk of f by one,
// built from the chunk's current view; with stale set, the file is
// truncated down and up in between, which the engine must notice (EAGAIN
// or a compacted slice cut short) so that no old byte comes back.
func (m *dataModel) compact(f *mfile, stale bool) {
	n := m.e.node(f.ino)
	var ch *chunk
	for i := range m.e.chunks(n) {
		if len(m.e.chunks(n)[i].slices) > 1 {
			ch = &m.e.chunks(n)[i]
			break
		}
	}
	if ch == nil {
		return
	}
	idx := ch.idx
	var old []uint64
	var end uint32
	for _, s := range ch.slices {
		old = append(old, s.ID)
		end = max(end, s.Pos+s.Len)
	}
	view := withHoles(resolve(ch.slices, end), end)
	id := m.alloc(1)
	var ps []piece
	for _, v := range view {
		ps = append(ps, piece{off: uint64(v.Pos), len: uint64(v.Len), src: v.ID, srcOff: uint64(v.Off)})
	}
	m.compacted[id] = ps
	if stale {
		m.truncate(f)
		m.truncate(f)
	}
	err := m.e.Compact(f.ino, idx, old, Slice{ID: id, Size: end, Len: end}, m.tick())
	switch {
	case err == nil:
		m.committed[id] = true
	case stale && errors.Is(err, syscall.EAGAIN):
	default:
		m.t.Fatalf("compact %s chunk %d of %v: %v\nstored %v", f.name, idx, old, err, m.e.chunks(m.e.node(f.ino)))
	}
}

func (m *dataModel) unlink(f *mfile) {
	if err := m.e.Unlink(credRoot, m.dir, f.name, m.tick()); err != nil {
		m.t.Fatal(err)
	}
	f.gone = true
}

func (m *dataModel) open(f *mfile) {
	if _, err := m.e.Open(credRoot, f.ino, OpenReadWrite); err != nil {
		m.t.Fatal(err)
	}
	f.opens++
}

func (m *dataModel) close(f *mfile) {
	if err := m.e.Close(f.ino, m.tick()); err != nil {
		m.t.Fatal(err)
	}
	f.opens--
}

// verify compares every live file's view with the model and checks the
// slice accounting and the engine's invariants.
func (m *dataModel) verify(step int, what string) {
	m.t.Helper()
	for _, f := range m.files {
		if f.gone && f.opens == 0 {
			if _, err := m.e.GetAttr(f.ino); err == nil {
				m.t.Fatalf("step %d (%s): %s unlinked and closed but still there", step, what, f.name)
			}
			continue
		}
		got := m.readWindows(f)
		for w := range modelWindows {
			if !bytes.Equal(got[w], f.win[w]) {
				i := 0
				for got[w][i] == f.win[w][i] {
					i++
				}
				m.t.Fatalf("step %d (%s): %s window %d byte %d (offset %d): engine %d, model %d\nstored %v",
					step, what, f.name, w, i, modelWindows[w]+uint64(i), got[w][i], f.win[w][i], m.e.chunks(m.e.node(f.ino)))
			}
		}
	}
	used, _ := m.e.ListSlices(0, MaxListSlices)
	garbage, _ := m.e.ListGarbage(0, MaxListSlices, 0)
	where := map[uint64]string{}
	for _, s := range used {
		where[s.ID] = "used"
	}
	for _, s := range garbage {
		if where[s.ID] != "" {
			m.t.Fatalf("step %d (%s): slice %d both used and garbage", step, what, s.ID)
		}
		where[s.ID] = "garbage"
	}
	for id := range m.committed {
		n := 0
		if where[id] != "" {
			n++
		}
		if m.purged[id] {
			n++
		}
		if n != 1 {
			m.t.Fatalf("step %d (%s): committed slice %d is %q, purged %v", step, what, id, where[id], m.purged[id])
		}
	}
	for id := range where {
		if !m.committed[id] {
			m.t.Fatalf("step %d (%s): slice %d listed but never committed", step, what, id)
		}
	}
	if err := m.e.Check(); err != nil {
		m.t.Fatalf("step %d (%s): %v", step, what, err)
	}
}

// readWindows materializes the model windows of f from ReadChunks views,
// as a reader would: holes and bytes past the end of the file are zeros.
func (m *dataModel) readWindows(f *mfile) [][]byte {
	a, views, err := m.e.ReadChunks(f.ino, 0, 4)
	if err != nil {
		m.t.Fatal(err)
	}
	if a.Size != f.size {
		m.t.Fatalf("%s: size %d, model %d", f.name, a.Size, f.size)
	}
	out := make([][]byte, len(modelWindows))
	for i := range out {
		out[i] = make([]byte, modelWin)
	}
	for _, v := range views {
		pos := uint32(0)
		for _, s := range v.Slices {
			if s.Pos != pos || s.Len == 0 {
				m.t.Fatalf("%s chunk %d: view not contiguous at %d: %v", f.name, v.Chunk, pos, v.Slices)
			}
			pos += s.Len
			start := chunkStart(v.Chunk) + uint64(s.Pos)
			if s.ID == 0 {
				continue
			}
			eachWindowByte(start, start+uint64(s.Len), func(w, i int, x uint64) {
				out[w][i] = m.content(s.ID, uint64(s.Off)+x-start)
			})
		}
		if want := min(f.size-chunkStart(v.Chunk), layout.ChunkSize); uint64(pos) != want {
			m.t.Fatalf("%s chunk %d: view ends at %d, want %d", f.name, v.Chunk, pos, want)
		}
	}
	return out
}

func (m *dataModel) purge() {
	garbage, _ := m.e.ListGarbage(0, MaxListSlices, 0)
	var ids []uint64
	for _, s := range garbage {
		if m.rng.IntN(2) == 0 {
			ids = append(ids, s.ID)
			m.purged[s.ID] = true
		}
	}
	m.e.Purge(ids)
}

func newDataModel(t *testing.T, seed uint64) *dataModel {
	m := &dataModel{
		t: t, e: New(3, 1), rng: rand.New(rand.NewPCG(seed, 7)), now: 1,
		compacted: map[uint64][]piece{}, committed: map[uint64]bool{}, purged: map[uint64]bool{},
	}
	d, err := m.e.Mkdir(credRoot, m.e.Root(), "d", 0o755, m.tick())
	if err != nil {
		t.Fatal(err)
	}
	m.dir = d.Ino
	for range 3 {
		m.newFile()
	}
	return m
}

// step does one random operation and returns its name.
func (m *dataModel) step() string {
	var live []*mfile
	for _, f := range m.files {
		if !f.gone || f.opens > 0 {
			live = append(live, f)
		}
	}
	if len(live) == 0 {
		m.newFile()
		return "create"
	}
	f := live[m.rng.IntN(len(live))]
	switch r := m.rng.IntN(100); {
	case r < 45:
		m.write(f)
		return "write " + f.name
	case r < 60:
		m.truncate(f)
		return "truncate " + f.name
	case r < 70:
		m.compact(f, false)
		return "compact " + f.name
	case r < 74:
		m.compact(f, true)
		return "stale compact " + f.name
	case r < 80:
		if f.gone {
			return "nothing"
		}
		m.open(f)
		return "open " + f.name
	case r < 86:
		if f.opens == 0 {
			return "nothing"
		}
		m.close(f)
		return "close " + f.name
	case r < 90:
		if f.gone {
			return "nothing"
		}
		m.unlink(f)
		m.newFile()
		return "unlink " + f.name
	case r < 95:
		m.purge()
		return "purge"
	default:
		m.checkpoint()
		return "checkpoint"
	}
}

// checkpoint replaces the engine by one loaded from its checkpoint, which
// must hold the same data state. Open counts are not in checkpoints, so
// the model's opens are carried over by reopening.
func (m *dataModel) checkpoint() {
	before := dumpData(m.e)
	var buf bytes.Buffer
	if err := m.e.WriteCheckpoint(&buf); err != nil {
		m.t.Fatal(err)
	}
	e, err := Load(&buf)
	if err != nil {
		m.t.Fatal(err)
	}
	if after := dumpData(e); after != before {
		m.t.Fatalf("checkpoint changed the data state:\nbefore %s\nafter  %s", before, after)
	}
	for ino, k := range m.e.opens {
		e.opens[ino] = k
	}
	m.e = e
}

func TestDataModel(t *testing.T) {
	seeds, steps := 12, 300
	if testing.Short() {
		seeds, steps = 4, 200
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newDataModel(t, uint64(seed))
			for i := range steps {
				what := m.step()
				m.verify(i, what)
			}
		})
	}
}

// dumpData renders the data state canonically: files' chunks by inode,
// garbage, pending batches, the allocator, orphans.
func dumpData(e *Engine) string {
	var b strings.Builder
	inos := make([]Ino, 0, e.Len())
	for ino := range e.st.all() {
		inos = append(inos, ino)
	}
	slices.Sort(inos)
	for _, ino := range inos {
		n := e.node(ino)
		fmt.Fprintf(&b, "%d:%d:%d", ino, n.Size, n.Nlink)
		for _, ch := range e.chunks(n) {
			fmt.Fprintf(&b, " [%d %v]", ch.idx, ch.slices)
		}
		b.WriteString("\n")
	}
	ids := e.sortedGarbage()
	for _, id := range ids {
		fmt.Fprintf(&b, "g%d:%v ", id, e.garbage[id])
	}
	for _, p := range e.pending {
		fmt.Fprintf(&b, "p%d+%d:%d:%v ", p.first, p.count, p.left, p.used)
	}
	orphans := make([]Ino, 0, len(e.orphans))
	for ino := range e.orphans {
		orphans = append(orphans, ino)
	}
	sort.Slice(orphans, func(i, j int) bool { return orphans[i] < orphans[j] })
	fmt.Fprintf(&b, "\nnext %d used %d orphans %v shared %v", e.nextSlice, e.used, orphans, e.shared)
	return b.String()
}

// FuzzDataModel runs the data model from a fuzzed seed.
func FuzzDataModel(f *testing.F) {
	for _, seed := range []uint64{0, 1, 42, 1 << 40} {
		f.Add(seed, uint8(60))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		m := newDataModel(t, seed)
		for i := range int(steps) {
			m.verify(i, m.step())
		}
	})
}
