package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// xfile is what the model knows of one file: which side's directory holds
// its name, and the size that tells its node (every node has its own).
type xfile struct {
	side int // 1 or 2: /p1/d or /p2/d
	size uint64
}

// TestRenameAcrossPartitionsUnderKills runs renames and exchanges of
// files between two partitions from 4 clients through a router, while the
// source partition, the target partition or the router is killed with
// SIGKILL at random moments and started again. Each rename is checked to
// be all or nothing: after one whose outcome the client could not learn,
// the file is found under exactly one of its two names, with its node
// (for an exchange: both nodes swapped or both not); at the end every
// name resolves to exactly one node, none is lost or duplicated, no
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
	addrs := []string{stablePort(t), stablePort(t), stablePort(t)}
	var metas []*proc
	for p := range 3 {
		m := &proc{t: t, name: fmt.Sprintf("partition %d", p), args: []string{"meta", "--dir", filepath.Join(dir, fmt.Sprint(p)),
			"--listen", addrs[p], "--partition", fmt.Sprint(p)}}
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
	const workers, perWorker = 4, 16
	model := make([]map[string]*xfile, workers)
	for _, d := range []string{"/p1/d", "/p2/d"} {
		if err := c.MkdirAll(ctx, d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for w := range workers {
		model[w] = map[string]*xfile{}
		for i := range perWorker {
			name := fmt.Sprintf("w%d-f%d", w, i)
			f := &xfile{side: 1 + i%2, size: uint64(1 + w*perWorker + i)}
			p := sidePath(f.side, name)
			if _, err := c.Create(ctx, p, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Truncate(ctx, p, f.size); err != nil {
				t.Fatal(err)
			}
			model[w][name] = f
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

	var done, unknown atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			names := make([]string, 0, perWorker)
			for i := range perWorker {
				names = append(names, fmt.Sprintf("w%d-f%d", w, i))
			}
			x := &xworker{c: c, rng: rng, model: model[w], names: names, unknown: &unknown, busy: busyNames}
			enough := func() bool {
				if killErr.Load() != nil || time.Now().After(giveUp) {
					return true
				}
				return done.Load() >= int64(renames) &&
					kills[0].Load() >= minKills && kills[1].Load() >= minKills && kills[2].Load() >= minKills
			}
			for !enough() {
				ran, err := x.step(ctx)
				if err != nil {
					errs <- err
					return
				}
				if ran {
					done.Add(1)
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
		t.Fatalf("%d renames and kills %d/%d/%d in the time allowed", done.Load(), kills[0].Load(), kills[1].Load(), kills[2].Load())
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d renames, %d with an outcome the client did not learn; kills: partition 1 %d, partition 2 %d, router %d",
		done.Load(), unknown.Load(), kills[0].Load(), kills[1].Load(), kills[2].Load())

	// Every intent is settled by the router's recovery pass.
	waitFor30(t, "every intent settled", func() bool {
		names, ok := busyNames()
		return ok && len(names) == 0
	})
	// Every name resolves to exactly one node, the one the model says.
	seen := map[string]bool{}
	for side := 1; side <= 2; side++ {
		ents, err := c.ReadDir(ctx, fmt.Sprintf("/p%d/d", side))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if seen[e.Name()] {
				t.Errorf("%s in both directories", e.Name())
			}
			seen[e.Name()] = true
			var w int
			fmt.Sscanf(e.Name(), "w%d-", &w)
			f := model[w][e.Name()]
			if f == nil || f.side != side {
				t.Errorf("%s found in /p%d/d; the model has %+v", e.Name(), side, f)
				continue
			}
			fi, err := c.Stat(ctx, sidePath(side, e.Name()))
			if err != nil || fi.Size() != int64(f.size) || fi.Ino().Partition() != uint16(side) {
				t.Errorf("%s: %v %v, want size %d in partition %d", e.Name(), fi, err, f.size, side)
			}
		}
	}
	if len(seen) != workers*perWorker {
		t.Errorf("%d names found, want %d", len(seen), workers*perWorker)
	}
	// The invariant check, in every partition, from what it left on disk.
	rt.kill()
	for p, m := range metas {
		m.kill()
		if _, err := server.Verify(server.Config{Dir: filepath.Join(dir, fmt.Sprint(p)), Partition: uint16(p),
			Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Errorf("partition %d: %v", p, err)
		}
	}
}

func sidePath(side int, name string) string { return fmt.Sprintf("/p%d/d/%s", side, name) }

// xworker runs one client's renames over its own files. A rename whose
// outcome the client did not learn leaves its files aside until it is
// settled: its attempts at the router are bounded by router.XRenameSpan
// from when the call returned, and what they left half done shows as
// intents until the recovery pass settles it.
type xworker struct {
	c       *client.Client
	rng     *rand.Rand
	model   map[string]*xfile
	names   []string
	unknown *atomic.Int64
	busy    func() (map[string]bool, bool)
	open    []*xopen
}

// xopen is a rename whose outcome is not known yet.
type xopen struct {
	x, y     string // y: the other file of an exchange, "" for a move
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

// step settles what it can, then runs one rename if a file is free; it
// reports whether it ran one.
func (w *xworker) step(ctx context.Context) (bool, error) {
	if err := w.settleAll(ctx, true); err != nil {
		return false, err
	}
	var free []string
	for _, n := range w.names {
		if !w.isOpen(n) {
			free = append(free, n)
		}
	}
	if len(free) == 0 {
		time.Sleep(50 * time.Millisecond)
		return false, nil
	}
	x := free[w.rng.IntN(len(free))]
	fx := w.model[x]
	var y string
	if w.rng.IntN(4) == 0 {
		for _, n := range free {
			if w.model[n].side != fx.side {
				y = n
				break
			}
		}
	}
	if y == "" { // a move to the other side, under the same name
		flags := uint32(0)
		if w.rng.IntN(2) == 0 {
			flags = client.RenameNoReplace
		}
		err := w.c.RenameFlags(ctx, sidePath(fx.side, x), sidePath(3-fx.side, x), flags)
		if err == nil {
			fx.side = 3 - fx.side
		} else {
			w.unknown.Add(1)
			w.open = append(w.open, &xopen{x: x, returned: time.Now(), err: err})
		}
		return true, nil
	}
	fy := w.model[y]
	err := w.c.RenameFlags(ctx, sidePath(fx.side, x), sidePath(fy.side, y), client.RenameExchange)
	if err == nil {
		fx.size, fy.size = fy.size, fx.size
	} else {
		w.unknown.Add(1)
		w.open = append(w.open, &xopen{x: x, y: y, returned: time.Now(), err: err})
	}
	return true, nil
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
			var err error
			if o.y == "" {
				err = settleMove(ctx, w.c, o.x, w.model[o.x], o.err)
			} else {
				err = settleExchange(ctx, w.c, o.x, w.model[o.x], o.y, w.model[o.y], o.err)
			}
			if err != nil {
				return err
			}
		}
		w.open = left
		if onlyReady {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d renames not settled", len(w.open))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// sizeAt returns the size of the node at p, ok false when p does not
// exist, or an error when that could not be learned.
func sizeAt(ctx context.Context, c *client.Client, p string) (uint64, bool, error) {
	fi, err := c.Stat(ctx, p)
	if errors.Is(err, syscall.ENOENT) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return uint64(fi.Size()), true, nil
}

// settleMove waits until the move of name is settled: the file under
// exactly one of its two names, with its node. Both at once is a
// duplicate.
func settleMove(ctx context.Context, c *client.Client, name string, f *xfile, callErr error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a, inA, errA := sizeAt(ctx, c, sidePath(f.side, name))
		b, inB, errB := sizeAt(ctx, c, sidePath(3-f.side, name))
		switch {
		case errA != nil || errB != nil:
		case inA && inB:
			return fmt.Errorf("move of %s (%v): in both directories", name, callErr)
		case inA || inB:
			got := a
			if inB {
				got = b
			}
			if got != f.size {
				return fmt.Errorf("move of %s (%v): size %d, want %d", name, callErr, got, f.size)
			}
			if inB {
				f.side = 3 - f.side
			}
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("move of %s (%v): not settled in 60s", name, callErr)
}

// settleExchange waits until the exchange of x and y is settled: both
// nodes swapped, or neither.
func settleExchange(ctx context.Context, c *client.Client, x string, fx *xfile, y string, fy *xfile, callErr error) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		a, inA, errA := sizeAt(ctx, c, sidePath(fx.side, x))
		b, inB, errB := sizeAt(ctx, c, sidePath(fy.side, y))
		switch {
		case errA != nil || errB != nil || !inA || !inB:
		case a == fx.size && b == fy.size:
			return nil
		case a == fy.size && b == fx.size:
			fx.size, fy.size = fy.size, fx.size
			return nil
		case a == b:
			// Between the two commits the target's node shows at both
			// names; the recovery pass finishes it.
		default:
			return fmt.Errorf("exchange of %s and %s (%v): sizes %d and %d, want %d and %d either way",
				x, y, callErr, a, b, fx.size, fy.size)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("exchange of %s and %s (%v): not settled in 60s", x, y, callErr)
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
