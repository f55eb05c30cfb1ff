package cli

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/canopyfs/canopy/api/metapb"
	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/protocol"
	"github.com/canopyfs/canopy/internal/router"
	"github.com/canopyfs/canopy/internal/rpc"
	"github.com/canopyfs/canopy/internal/server"
)

// xrenameLongEnv makes TestRenameAcrossPartitionsUnderKills run 1,000
// renames instead of 200.
const xrenameLongEnv = "CANOPY_XRENAME_LONG"

// procLogsEnv names a directory where each proc's log is kept (appended
// to NAME.log); unset, the logs are dropped.
const procLogsEnv = "CANOPY_TEST_PROC_LOGS"

// proc is a canopy child process that can be killed and started again
// with the same arguments.
type proc struct {
	t    *testing.T
	name string
	args []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// start runs the process and waits for its ready line, failing the test
// if it cannot (on the test goroutine only).
func (p *proc) start() {
	p.t.Helper()
	if err := p.tryStart(); err != nil {
		p.t.Fatal(err)
	}
}

// tryStart is start for any goroutine: it returns what went wrong.
func (p *proc) tryStart() error {
	cmd := mainChild(p.args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = io.Discard
	if dir := os.Getenv(procLogsEnv); dir != "" {
		// Keep what the process logs, for a run looked into by hand.
		f, err := os.OpenFile(filepath.Join(dir, strings.ReplaceAll(p.name, " ", "-")+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "ready at ") {
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("%s: ready line %q (%v)", p.name, line, err)
	}
	go io.Copy(io.Discard, br)
	p.mu.Lock()
	p.cmd = cmd
	p.mu.Unlock()
	return nil
}

// kill sends SIGKILL and reaps the process.
func (p *proc) kill() {
	p.mu.Lock()
	cmd := p.cmd
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
}

// xnode is what the model knows of one of a worker's names: which side's
// directory holds it, and the node it names (an exchange swaps the nodes
// of two names). A file is told by its size (every file has its own); a
// directory by the paths below it and its files' bytes, which no rename
// changes. A name holding a directory may have an empty directory under
// it on the other side, for a move to replace.
type xnode struct {
	side  int               // 1 or 2: /p1/d or /p2/d
	size  uint64            // a file's
	tree  map[string][]byte // a directory's: path below it -> bytes; a directory's path ends in "/"
	empty bool              // a directory: an empty directory holds its name on the other side
}

func (n *xnode) isDir() bool { return n.tree != nil }

// swap swaps the nodes of n's name and m's, as an exchange does; each
// name keeps its side.
func (n *xnode) swap(m *xnode) {
	n.size, m.size = m.size, n.size
	n.tree, m.tree = m.tree, n.tree
}

// want returns what entryAt finds under n's name at n's side.
func (n *xnode) want() string {
	if n.isDir() {
		return treeSummary(n.tree)
	}
	return fileSummary(n.size)
}

// wantAt returns what entryAt finds under n's name at side: n itself,
// the empty directory on the other side, or nothing (ok false).
func (n *xnode) wantAt(side int) (string, bool) {
	switch {
	case side == n.side:
		return n.want(), true
	case n.empty:
		return treeSummary(nil), true
	}
	return "", false
}

// String says what the model holds for n, for messages.
func (n *xnode) String() string {
	s := fmt.Sprintf("%s in /p%d/d", n.want(), n.side)
	if n.empty {
		s += fmt.Sprintf(", an empty directory in /p%d/d", 3-n.side)
	}
	return s
}

// fileSummary and treeSummary say what a name holds, as one string that
// the model and what is found compare by: a file's size; a directory's
// paths and, for each file below it, its length and a hash of its bytes.
func fileSummary(size uint64) string { return fmt.Sprintf("file of %d bytes", size) }

func treeSummary(tree map[string][]byte) string {
	var lines []string
	for _, p := range slices.Sorted(maps.Keys(tree)) {
		if strings.HasSuffix(p, "/") {
			lines = append(lines, p)
			continue
		}
		sum := sha256.Sum256(tree[p])
		lines = append(lines, fmt.Sprintf("%s (%d bytes, %x)", p, len(tree[p]), sum[:4]))
	}
	return "directory {" + strings.Join(lines, ", ") + "}"
}

// xstats counts what the workers did.
type xstats struct {
	renames      atomic.Int64 // renames that may happen: moves and exchanges, of files and directories
	dirs         atomic.Int64 // of them, moves and exchanges of directories
	ontoEmpty    atomic.Int64 // of those, moves onto an empty directory
	dirExchanges atomic.Int64 // and exchanges
	refused      atomic.Int64 // renames refused, as they must be
	unknown      atomic.Int64 // renames whose outcome the client did not learn
	unknownD     atomic.Int64 // of them, moves and exchanges of directories
}

// TestRenameAcrossPartitionsUnderKills runs renames of files and of
// directories between two partitions from 4 clients through a router,
// while the source partition, the target partition or the router is
// killed with SIGKILL at random moments and started again. Files are
// moved and exchanged; small directories (one to three files and a
// subdirectory) are moved with their subtree, onto nothing or onto an
// empty directory, and exchanged with a file or a directory; and renames
// that must be refused are tried (a directory onto one that is not empty
// or onto a file, a file onto a directory, RENAME_NOREPLACE onto an
// empty directory). Each rename is checked to be all or nothing: after one
// whose outcome the client could not learn, the node is found under
// exactly one of its two names, whole (for an exchange: both nodes
// swapped or both not; for one that must be refused: nothing changed);
// at the end every name holds exactly what the model says (a directory
// exactly its files, with their bytes), none is lost or duplicated, no
// intent is left, and every partition passes the invariant check.
func TestRenameAcrossPartitionsUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	// At least this many renames, and on until each victim was killed a
	// few times.
	renames, minKills := 200, int64(4)
	if os.Getenv(xrenameLongEnv) != "" {
		renames, minKills = 1000, 15
	}
	dir := t.TempDir()
	// The partitions share an object store, as those of one namespace do:
	// the directories' files hold bytes, inline or in objects.
	store := filepath.Join(dir, "objects")
	// The partitions' trash days, which the invariant check replays their
	// logs with too: a removal replays differently under others.
	const trashDays = 1
	addrs := []string{stablePort(t), stablePort(t), stablePort(t)}
	var metas []*proc
	for p := range 3 {
		m := &proc{t: t, name: fmt.Sprintf("partition %d", p), args: []string{"meta", "--dir", filepath.Join(dir, fmt.Sprint(p)),
			"--listen", addrs[p], "--partition", fmt.Sprint(p), "--storage", store,
			"--trash-days", fmt.Sprint(trashDays)}}
		m.start()
		t.Cleanup(m.kill)
		metas = append(metas, m)
	}
	for p := 1; p <= 2; p++ {
		mustCanopy(t, addrs[0], "routing", "set", fmt.Sprint(p), addrs[p])
		mustCanopy(t, addrs[0], "mounttable", "add", fmt.Sprintf("/p%d", p), fmt.Sprint(p))
	}
	rt := &proc{t: t, name: "router", args: []string{"router", "--listen", stablePort(t), "--root", addrs[0],
		"--xrename-every", "100ms", "--xrename-grace", "1s"}}
	rt.start()
	t.Cleanup(rt.kill)
	raddr := rt.args[2]

	c, err := client.Dial(raddr, client.Options{Cred: &client.Cred{}, CallTimeout: 2 * time.Second, OpTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const workers, perWorker, dirsPerWorker = 4, 16, 4
	model := make([]map[string]*xnode, workers)
	names := make([][]string, workers) // each worker's, in a fixed order
	for _, d := range []string{"/p1/d", "/p2/d"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for w := range workers {
		model[w] = map[string]*xnode{}
		for i := range perWorker {
			name := fmt.Sprintf("w%d-f%d", w, i)
			n := &xnode{side: 1 + i%2, size: uint64(1 + w*perWorker + i)}
			p := sidePath(n.side, name)
			if _, err := c.Create(ctx, p, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Truncate(ctx, p, n.size); err != nil {
				t.Fatal(err)
			}
			model[w][name] = n
			names[w] = append(names[w], name)
		}
		for i := range dirsPerWorker {
			name := fmt.Sprintf("w%d-D%d", w, i)
			n := &xnode{side: 1 + i%2, tree: xdirTree(w, i), empty: i == 1}
			if err := makeTree(ctx, c, sidePath(n.side, name), n.tree); err != nil {
				t.Fatal(err)
			}
			if n.empty {
				if _, err := c.Mkdir(ctx, sidePath(3-n.side, name), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			model[w][name] = n
			names[w] = append(names[w], name)
		}
	}

	// The killer: SIGKILL of partition 1, partition 2 or the router, at
	// random moments, each started again at once.
	stop := make(chan struct{})
	var kills [3]atomic.Int64
	var killErr atomic.Pointer[error] // a victim that did not start again
	giveUp := time.Now().Add(10 * time.Minute)
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		victims := []*proc{metas[1], metas[2], rt}
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+rand.IntN(150)) * time.Millisecond):
			}
			k := rand.IntN(3)
			victims[k].kill()
			kills[k].Add(1)
			if err := victims[k].tryStart(); err != nil {
				killErr.Store(&err)
				return
			}
		}
	}()

	// The intents are asked of the partitions directly: a router refuses
	// the protocol's steps from clients.
	rcs := map[uint16]*rpc.Client{}
	for vp := uint16(1); vp <= 2; vp++ {
		rc, err := rpc.Dial(addrs[vp], rpc.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		rcs[vp] = rc
	}
	// busyNames returns the names of the entries that intents hold.
	busyNames := func() (map[string]bool, bool) {
		names := map[string]bool{}
		for vp := uint16(1); vp <= 2; vp++ {
			req, _ := proto.Marshal(&pb.XIntentRequest{Ino: protocol.RootIno(vp)})
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			st, out, err := rcs[vp].Call(cctx, uint16(pb.Method_XRENAME_LIST), rpc.Cred{}, req)
			cancel()
			var list pb.XIntentListReply
			if err != nil || st != 0 || proto.Unmarshal(out, &list) != nil {
				return nil, false
			}
			for _, in := range list.Intents {
				names[in.Name] = true
			}
		}
		return names, true
	}

	var stats xstats
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			x := &xworker{c: c, rng: rng, model: model[w], names: names[w], stats: &stats, busy: busyNames}
			enough := func() bool {
				if killErr.Load() != nil || time.Now().After(giveUp) {
					return true
				}
				return stats.renames.Load() >= int64(renames) &&
					kills[0].Load() >= minKills && kills[1].Load() >= minKills && kills[2].Load() >= minKills
			}
			for !enough() {
				if err := x.step(ctx); err != nil {
					errs <- err
					return
				}
			}
			if err := x.settleAll(ctx, false); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-killerDone
	if err := killErr.Load(); err != nil {
		t.Fatalf("restart after a kill: %v", *err)
	}
	if time.Now().After(giveUp) {
		t.Fatalf("%d renames and kills %d/%d/%d in the time allowed", stats.renames.Load(), kills[0].Load(), kills[1].Load(), kills[2].Load())
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d renames, %d of them of directories (%d moves onto an empty directory, %d exchanges); %d refused as they must be; "+
		"%d with an outcome the client did not learn (%d of directories); kills: partition 1 %d, partition 2 %d, router %d",
		stats.renames.Load(), stats.dirs.Load(), stats.ontoEmpty.Load(), stats.dirExchanges.Load(), stats.refused.Load(),
		stats.unknown.Load(), stats.unknownD.Load(), kills[0].Load(), kills[1].Load(), kills[2].Load())

	// Every intent is settled by the router's recovery pass.
	waitFor30(t, "every intent settled", func() bool {
		names, ok := busyNames()
		return ok && len(names) == 0
	})
	checkModel(t, c, model)
	// The invariant check, in every partition, from what it left on disk.
	rt.kill()
	for p, m := range metas {
		m.kill()
		if _, err := server.Verify(server.Config{Dir: filepath.Join(dir, fmt.Sprint(p)), Partition: uint16(p),
			TrashDays: trashDays, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Errorf("partition %d: %v", p, err)
		}
	}
}

// checkModel checks that every name in /p1/d and /p2/d holds what the
// model says, each node in its side's partition, and that every name of
// the model is found: no node lost or duplicated, every directory whole.
func checkModel(t *testing.T, c *client.Client, model []map[string]*xnode) {
	t.Helper()
	ctx := context.Background()
	found := 0
	for side := 1; side <= 2; side++ {
		ents, err := c.ReadDir(ctx, fmt.Sprintf("/p%d/d", side))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			var w int
			fmt.Sscanf(e.Name(), "w%d-", &w)
			var n *xnode
			if w >= 0 && w < len(model) {
				n = model[w][e.Name()]
			}
			want, ok := "", false
			if n != nil {
				want, ok = n.wantAt(side)
			}
			if !ok {
				t.Errorf("%s found in /p%d/d; the model has %v", e.Name(), side, n)
				continue
			}
			found++
			got, in, err := entryAt(ctx, c, sidePath(side, e.Name()), side)
			if err != nil || !in || got != want {
				t.Errorf("/p%d/d/%s: %s (%v), want %s", side, e.Name(), show(got, in), err, want)
			}
		}
	}
	want := 0 // every name, and again each empty directory on the other side
	for _, m := range model {
		for _, n := range m {
			want++
			if n.empty {
				want++
			}
		}
	}
	if found != want {
		t.Errorf("%d names found, want %d", found, want)
	}
}

func sidePath(side int, name string) string { return fmt.Sprintf("/p%d/d/%s", side, name) }

// show is what a name holds, for messages.
func show(s string, ok bool) string {
	if !ok {
		return "nothing"
	}
	return s
}

// xdirTree returns the paths below directory i of worker w and their
// bytes: one to three files and a subdirectory, with a file in it in
// every other directory. The first directory's first file is too large
// to be kept inline: its bytes are in the object store.
func xdirTree(w, i int) map[string][]byte {
	tree := map[string][]byte{"sub/": nil}
	for f := range 1 + (w+i)%3 {
		tree[fmt.Sprintf("f%d", f)] = fill(fmt.Sprintf("w%d-D%d/f%d", w, i, f), 1+500*f)
	}
	if i%2 == 0 {
		tree["sub/g"] = fill(fmt.Sprintf("w%d-D%d/sub/g", w, i), 3000)
	}
	if i == 0 {
		tree["f0"] = fill(fmt.Sprintf("w%d-D%d/f0", w, i), 100<<10)
	}
	return tree
}

// fill returns n bytes of tag, over and over.
func fill(tag string, n int) []byte {
	return bytes.Repeat([]byte(tag+" "), n/(len(tag)+1)+1)[:n]
}

// makeTree makes directory p holding tree.
func makeTree(ctx context.Context, c *client.Client, p string, tree map[string][]byte) error {
	if _, err := c.Mkdir(ctx, p, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", p, err)
	}
	for _, rel := range slices.Sorted(maps.Keys(tree)) { // a directory before what is in it
		var err error
		if strings.HasSuffix(rel, "/") {
			_, err = c.Mkdir(ctx, p+"/"+strings.TrimSuffix(rel, "/"), 0o755)
		} else {
			err = c.WriteFile(ctx, p+"/"+rel, tree[rel], 0o644)
		}
		if err != nil {
			return fmt.Errorf("make %s/%s: %w", p, rel, err)
		}
	}
	return nil
}

// xworker runs one client's renames over its own names. A rename whose
// outcome the client did not learn leaves its names aside until it is
// settled: its attempts at the router are bounded by router.XRenameSpan
// from when the call returned, and what they left half done shows as
// intents until the recovery pass settles it.
type xworker struct {
	c     *client.Client
	rng   *rand.Rand
	model map[string]*xnode
	names []string // the model's, in a fixed order
	stats *xstats
	busy  func() (map[string]bool, bool)
	open  []*xopen
}

// xopen is a rename whose outcome is not known yet.
type xopen struct {
	x, y     string // y: the other name of an exchange or of a rename that must be refused, "" for a move
	refused  bool   // a rename that must be refused: nothing may have changed
	returned time.Time
	err      error
}

func (w *xworker) isOpen(name string) bool {
	for _, o := range w.open {
		if o.x == name || o.y == name {
			return true
		}
	}
	return false
}

// free returns the worker's files and directories that no rename of
// unknown outcome holds.
func (w *xworker) free() (files, dirs []string) {
	for _, n := range w.names {
		switch {
		case w.isOpen(n):
		case w.model[n].isDir():
			dirs = append(dirs, n)
		default:
			files = append(files, n)
		}
	}
	return files, dirs
}

// step settles what it can, then runs one rename over free names: a
// file's (six times in ten), a directory's (three: a move, or one time in
// four an exchange), or one that must be refused (one).
func (w *xworker) step(ctx context.Context) error {
	if err := w.settleAll(ctx, true); err != nil {
		return err
	}
	files, dirs := w.free()
	if len(files)+len(dirs) == 0 {
		time.Sleep(50 * time.Millisecond)
		return nil
	}
	switch r := w.rng.IntN(10); {
	case r == 0:
		return w.refuse(ctx, files, dirs)
	case len(dirs) > 0 && (r < 4 || len(files) == 0):
		x := dirs[w.rng.IntN(len(dirs))]
		if w.rng.IntN(4) == 0 {
			w.exchangeAny(ctx, x, append(slices.Clone(files), dirs...))
			return nil
		}
		return w.moveDir(ctx, x)
	}
	w.renameFile(ctx, files)
	return nil
}

// renameFile moves a free file to the other side under its name, or one
// time in four exchanges it with a free file of the other side.
func (w *xworker) renameFile(ctx context.Context, free []string) {
	x := free[w.rng.IntN(len(free))]
	if w.rng.IntN(4) == 0 && w.exchangeAny(ctx, x, free) {
		return
	}
	w.stats.renames.Add(1)
	flags := uint32(0)
	if w.rng.IntN(2) == 0 {
		flags = client.RenameNoReplace
	}
	w.move(ctx, x, flags)
}

// exchangeAny exchanges x with a name of free on the other side (a file
// or a directory with its subtree), and reports whether there was one.
// Names with an empty directory under them on the other side take no
// part: the model keeps that directory with the name, for a directory
// to replace.
func (w *xworker) exchangeAny(ctx context.Context, x string, free []string) bool {
	nx := w.model[x]
	if nx.empty {
		return false
	}
	var ys []string
	for _, n := range free {
		if ny := w.model[n]; ny.side != nx.side && !ny.empty {
			ys = append(ys, n)
		}
	}
	if len(ys) == 0 {
		return false
	}
	y := ys[w.rng.IntN(len(ys))]
	ny := w.model[y]
	dirs := nx.isDir() || ny.isDir()
	w.stats.renames.Add(1)
	if dirs {
		w.stats.dirs.Add(1)
		w.stats.dirExchanges.Add(1)
	}
	if err := w.c.RenameFlags(ctx, sidePath(nx.side, x), sidePath(ny.side, y), client.RenameExchange); err != nil {
		if dirs {
			w.stats.unknownD.Add(1)
		}
		w.unknownOutcome(&xopen{x: x, y: y, err: err})
		return true
	}
	nx.swap(ny)
	return true
}

// moveDir moves directory x with its subtree to the other side under its
// name: onto nothing, or onto an empty directory there, which it makes
// first one time in three. RENAME_NOREPLACE onto the empty directory
// must be refused with EEXIST.
func (w *xworker) moveDir(ctx context.Context, x string) error {
	n := w.model[x]
	if !n.empty && w.rng.IntN(3) == 0 {
		if err := mkdirEmpty(ctx, w.c, sidePath(3-n.side, x)); err != nil {
			return err
		}
		n.empty = true
	}
	flags := uint32(0)
	if w.rng.IntN(3) == 0 {
		flags = client.RenameNoReplace
	}
	if n.empty && flags == client.RenameNoReplace {
		err := w.c.RenameFlags(ctx, sidePath(n.side, x), sidePath(3-n.side, x), flags)
		return w.refused(fmt.Sprintf("RENAME_NOREPLACE of directory %s onto an empty directory", x), x, x, err, syscall.EEXIST)
	}
	w.stats.renames.Add(1)
	w.stats.dirs.Add(1)
	if n.empty {
		w.stats.ontoEmpty.Add(1)
	}
	w.move(ctx, x, flags)
	return nil
}

// move moves x (a file, or a directory with its subtree) to the other
// side under its name, with flags: onto nothing, or onto the empty
// directory there.
func (w *xworker) move(ctx context.Context, x string, flags uint32) {
	n := w.model[x]
	if err := w.c.RenameFlags(ctx, sidePath(n.side, x), sidePath(3-n.side, x), flags); err != nil {
		if n.isDir() {
			w.stats.unknownD.Add(1)
		}
		w.unknownOutcome(&xopen{x: x, err: err})
		return
	}
	n.side, n.empty = 3-n.side, false
}

// refuse runs a rename that must be refused, of a free name onto a free
// name of the other side: a directory onto a directory, which is not
// empty (ENOTEMPTY or EEXIST), or onto a file (ENOTDIR), or a file onto
// a directory (EISDIR).
func (w *xworker) refuse(ctx context.Context, files, dirs []string) error {
	free := append(slices.Clone(files), dirs...)
	x := free[w.rng.IntN(len(free))]
	nx := w.model[x]
	var ys []string
	for _, n := range free {
		if ny := w.model[n]; ny.side != nx.side && (nx.isDir() || ny.isDir()) {
			ys = append(ys, n)
		}
	}
	if len(ys) == 0 {
		return nil
	}
	y := ys[w.rng.IntN(len(ys))]
	ny := w.model[y]
	var want []syscall.Errno
	switch {
	case nx.isDir() && ny.isDir():
		want = []syscall.Errno{syscall.ENOTEMPTY, syscall.EEXIST}
	case nx.isDir():
		want = []syscall.Errno{syscall.ENOTDIR}
	default:
		want = []syscall.Errno{syscall.EISDIR}
	}
	err := w.c.Rename(ctx, sidePath(nx.side, x), sidePath(ny.side, y))
	return w.refused(fmt.Sprintf("rename of %s onto %s", x, y), x, y, err, want...)
}

// refused takes the answer to a rename that must be refused (what, of x
// onto y): one of the errors want, or an error that leaves the outcome
// to be checked once nothing can change it. Success is wrong.
func (w *xworker) refused(what, x, y string, err error, want ...syscall.Errno) error {
	if err == nil {
		return fmt.Errorf("%s: done, want it refused with %v; the model had %s: %v and %s: %v",
			what, want, x, w.model[x], y, w.model[y])
	}
	for _, errno := range want {
		if errors.Is(err, errno) {
			w.stats.refused.Add(1)
			return nil
		}
	}
	w.unknownOutcome(&xopen{x: x, y: y, refused: true, err: err})
	return nil
}

// unknownOutcome leaves o to be settled.
func (w *xworker) unknownOutcome(o *xopen) {
	w.stats.unknown.Add(1)
	o.returned = time.Now()
	w.open = append(w.open, o)
}

// settleAll settles the open renames that can no longer change; with
// onlyReady false it waits for all of them.
func (w *xworker) settleAll(ctx context.Context, onlyReady bool) error {
	deadline := time.Now().Add(router.XRenameSpan + 60*time.Second)
	for len(w.open) > 0 {
		var left []*xopen
		var busy map[string]bool
		for _, o := range w.open {
			if time.Since(o.returned) < router.XRenameSpan+time.Second {
				left = append(left, o)
				continue
			}
			if busy == nil {
				var ok bool
				if busy, ok = w.busy(); !ok {
					left = append(left, o)
					busy = nil
					continue
				}
			}
			if busy[o.x] || o.y != "" && busy[o.y] {
				left = append(left, o)
				continue
			}
			if err := w.settle(ctx, o); err != nil {
				return err
			}
		}
		w.open = left
		if onlyReady {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("renames not settled in %v: %s", router.XRenameSpan+60*time.Second, describeOpen(w.open, busy))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// describeOpen says, for messages, which renames are open and whether
// an intent held their names when busy (nil: not known) was read.
func describeOpen(open []*xopen, busy map[string]bool) string {
	var out []string
	for _, o := range open {
		s := o.x
		if o.y != "" {
			s += " onto " + o.y
		}
		switch {
		case busy == nil:
			s += fmt.Sprintf(" (%v; intents not read)", o.err)
		case busy[o.x] || o.y != "" && busy[o.y]:
			s += fmt.Sprintf(" (%v; an intent holds it still)", o.err)
		default:
			s += fmt.Sprintf(" (%v)", o.err)
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// settle checks the outcome of o, which nothing can change any more, and
// brings the model to it.
func (w *xworker) settle(ctx context.Context, o *xopen) error {
	switch {
	case o.refused:
		return settleRefused(ctx, w.c, o.x, w.model[o.x], o.y, w.model[o.y], o.err)
	case o.y == "":
		return settleMove(ctx, w.c, o.x, w.model[o.x], o.err)
	}
	return settleExchange(ctx, w.c, o.x, w.model[o.x], o.y, w.model[o.y], o.err)
}

// entryAt returns what p holds (ok false: nothing), as fileSummary or
// treeSummary put it, with a note of every node there that is not in the
// partition of side.
func entryAt(ctx context.Context, c *client.Client, p string, side int) (string, bool, error) {
	fi, err := c.Lstat(ctx, p)
	if errors.Is(err, syscall.ENOENT) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var strays []string
	if part := fi.Ino().Partition(); part != uint16(side) {
		strays = append(strays, fmt.Sprintf("itself in partition %d", part))
	}
	s := fileSummary(uint64(fi.Size()))
	if fi.IsDir() {
		tree := map[string][]byte{}
		if err := readTree(ctx, c, p, "", uint16(side), tree, &strays); err != nil {
			return "", false, err
		}
		s = treeSummary(tree)
	}
	if len(strays) > 0 {
		s += " with " + strings.Join(strays, ", ")
	}
	return s, true, nil
}

// readTree adds to tree what is below directory dir, as paths below rel,
// and to strays the nodes there that are not in partition part.
func readTree(ctx context.Context, c *client.Client, dir, rel string, part uint16, tree map[string][]byte, strays *[]string) error {
	ents, err := c.ReadDir(ctx, dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := rel + e.Name()
		if got := e.Ino().Partition(); got != part {
			*strays = append(*strays, fmt.Sprintf("%s in partition %d", p, got))
		}
		if e.IsDir() {
			tree[p+"/"] = nil
			if err := readTree(ctx, c, dir+"/"+e.Name(), p+"/", part, tree, strays); err != nil {
				return err
			}
			continue
		}
		b, err := c.ReadFile(ctx, dir+"/"+e.Name())
		if err != nil {
			return err
		}
		tree[p] = b
	}
	return nil
}

// settleMove waits until the move of name (a file, or a directory with
// its subtree) to the other side is settled: its node under exactly one
// of its two names, whole, and the other name holding what it held
// before (nothing, or the empty directory the move replaces). Both at
// once is a duplicate.
func settleMove(ctx context.Context, c *client.Client, name string, n *xnode, callErr error) error {
	from, to := n.side, 3-n.side
	want := n.want()
	before, had := n.wantAt(to)
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a, inA, errA := entryAt(ctx, c, sidePath(from, name), from)
		b, inB, errB := entryAt(ctx, c, sidePath(to, name), to)
		targetAsBefore := inB == had && b == before
		switch {
		case errA != nil || errB != nil:
			last = errors.Join(errA, errB)
		case inA && a == want && targetAsBefore: // not moved
			return nil
		case !inA && inB && b == want:
			n.side, n.empty = to, false
			return nil
		case !inA && targetAsBefore:
			// Between the two commits the node shows under neither name;
			// the recovery pass finishes it.
		default:
			return fmt.Errorf("move of %s from /p%d/d to /p%d/d (%v): /p%d/d holds %s and /p%d/d %s; want %s under one name only, and %s under the other before the move",
				name, from, to, callErr, from, show(a, inA), to, show(b, inB), want, show(before, had))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("move of %s (%v): not settled in 60s (last error: %v)", name, callErr, last)
}

// settleExchange waits until the exchange of files x and y is settled:
// both nodes swapped, or neither.
func settleExchange(ctx context.Context, c *client.Client, x string, nx *xnode, y string, ny *xnode, callErr error) error {
	wx, wy := nx.want(), ny.want()
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a, inA, errA := entryAt(ctx, c, sidePath(nx.side, x), nx.side)
		b, inB, errB := entryAt(ctx, c, sidePath(ny.side, y), ny.side)
		switch {
		case errA != nil || errB != nil:
			last = errors.Join(errA, errB)
		case !inA || !inB:
		case a == wx && b == wy:
			return nil
		case a == wy && b == wx:
			nx.swap(ny)
			return nil
		case a == b:
			// Between the two commits the target's node shows at both
			// names; the recovery pass finishes it.
		default:
			return fmt.Errorf("exchange of %s and %s (%v): %s and %s, want %s and %s either way",
				x, y, callErr, a, b, wx, wy)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("exchange of %s and %s (%v): not settled in 60s (last error: %v)", x, y, callErr, last)
}

// settleRefused checks that a rename that must be refused, of x onto y
// (y == x: onto the empty directory under x's name on the other side),
// whose outcome the client did not learn, changed nothing.
func settleRefused(ctx context.Context, c *client.Client, x string, nx *xnode, y string, ny *xnode, callErr error) error {
	ySide := ny.side
	if y == x {
		ySide = 3 - nx.side
	}
	wantX := nx.want()
	wantY, hadY := ny.wantAt(ySide)
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a, inA, errA := entryAt(ctx, c, sidePath(nx.side, x), nx.side)
		b, inB, errB := entryAt(ctx, c, sidePath(ySide, y), ySide)
		if errA != nil || errB != nil {
			last = errors.Join(errA, errB)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if !inA || a != wantX || inB != hadY || b != wantY {
			return fmt.Errorf("rename of %s onto %s, which must be refused (%v): /p%d/d/%s holds %s and /p%d/d/%s %s; want %s and %s",
				x, y, callErr, nx.side, x, show(a, inA), ySide, y, show(b, inB), wantX, show(wantY, hadY))
		}
		return nil
	}
	return fmt.Errorf("rename of %s onto %s (%v): not read in 60s (last error: %v)", x, y, callErr, last)
}

// mkdirEmpty makes an empty directory at p, where nothing is, trying
// again while partitions or the router restart. A retry may find the
// directory an earlier attempt made: only this worker uses its names.
func mkdirEmpty(ctx context.Context, c *client.Client, p string) error {
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		_, err := c.Mkdir(ctx, p, 0o755)
		if errors.Is(err, syscall.EEXIST) {
			var fi *client.FileInfo
			if fi, err = c.Lstat(ctx, p); err == nil && !fi.IsDir() {
				return fmt.Errorf("mkdir %s: EEXIST, and it holds %v", p, fi.Mode())
			}
		}
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("mkdir %s: %w", p, last)
}

// waitFor30 is waitFor with room for restarts and the recovery pass.
func waitFor30(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stablePort returns a loopback address free now whose port lies below the
// range the kernel takes ephemeral ports from, so that no connection made
// meanwhile can take it while a killed process is started again on it.
func stablePort(t *testing.T) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(low-10000))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	return freePort(t)
}
