package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
)

// The crash test runs the server in a child process (this test binary,
// re-executed with crashChildEnv set), kills it with SIGKILL under load,
// and checks that every acknowledged operation survived and that nothing
// unacknowledged is half-applied.

const crashChildEnv = "CANOPY_CRASH_CHILD_DIR"

// crashCompactEnv, set in a child's environment, makes it pack every idle
// directory after every batch.
const crashCompactEnv = "CANOPY_CRASH_COMPACT"

// crashStorageEnv, set in a child's environment, is the object store URL
// its VOLUME names.
const crashStorageEnv = "CANOPY_CRASH_STORAGE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		runCrashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// runCrashChild serves dir on a loopback port, prints the address, and
// serves until killed.
func runCrashChild(dir string) {
	every, _ := strconv.Atoi(os.Getenv("CANOPY_CRASH_CHECKPOINT_EVERY"))
	compact := os.Getenv(crashCompactEnv) != ""
	trashDays, _ := strconv.Atoi(os.Getenv(crashTrashEnv))
	s, err := Open(Config{Dir: dir, CheckpointEvery: every, CompactEveryBatch: compact, TrashDays: trashDays, Storage: os.Getenv(crashStorageEnv),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready at", ln.Addr())
	s.Serve(ln)
}

// crashChild is a running child server.
type crashChild struct {
	cmd  *exec.Cmd
	addr string
	env  []string // extra environment, kept for restarts
}

// startCrashChild starts a child server on dir; env is added to its
// environment (and to that of the children that restart it).
func startCrashChild(t *testing.T, dir string, env ...string) *crashChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "CANOPY_CRASH_CHECKPOINT_EVERY=300")
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "ready at ")
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start: %q %v", line, err)
	}
	return &crashChild{cmd: cmd, addr: addr, env: env}
}

func (c *crashChild) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
}

// crashWorker drives one client's share of the namespace, /wN, and keeps a
// model of what it must look like: the paths of its files and directories.
type crashWorker struct {
	id      int
	rng     *rand.Rand
	model   map[string]bool // path -> is a directory
	pending *crashOp        // the operation in flight when the server died
	next    int
	acked   int // operations acknowledged over the whole test
}

// crashOp is one operation and its effect on the model.
type crashOp struct {
	desc  string
	apply func(model map[string]bool)
}

func (w *crashWorker) root() string { return fmt.Sprintf("/w%d", w.id) }

// pick chooses the next operation from the model.
func (w *crashWorker) pick() (crashOp, func(context.Context, *client.Client) error) {
	var files, dirs []string
	for p, isDir := range w.model {
		if isDir {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	sort.Strings(files)
	sort.Strings(dirs)
	w.next++
	name := fmt.Sprintf("n%d", w.next)
	dir := dirs[w.rng.IntN(len(dirs))]
	switch k := w.rng.IntN(10); {
	case k < 4 || len(files) == 0:
		p := path.Join(dir, name)
		return crashOp{"create " + p, func(m map[string]bool) { m[p] = false }},
			func(ctx context.Context, c *client.Client) error { _, err := c.Create(ctx, p, 0o644); return err }
	case k < 5 && len(dirs) < 30:
		p := path.Join(dir, name)
		return crashOp{"mkdir " + p, func(m map[string]bool) { m[p] = true }},
			func(ctx context.Context, c *client.Client) error { _, err := c.Mkdir(ctx, p, 0o755); return err }
	case k < 7:
		from := files[w.rng.IntN(len(files))]
		to := path.Join(dir, name)
		return crashOp{"rename " + from + " " + to, func(m map[string]bool) { delete(m, from); m[to] = false }},
			func(ctx context.Context, c *client.Client) error { return c.Rename(ctx, from, to) }
	case k < 8 && len(dirs) > 1:
		// Move a directory (with its subtree) under another that is not inside it.
		from := dirs[1+w.rng.IntN(len(dirs)-1)]
		if dir == from || strings.HasPrefix(dir, from+"/") {
			dir = w.root()
		}
		to := path.Join(dir, name)
		return crashOp{"rename dir " + from + " " + to, func(m map[string]bool) {
				for p, isDir := range m {
					if p == from || strings.HasPrefix(p, from+"/") {
						delete(m, p)
						m[to+strings.TrimPrefix(p, from)] = isDir
					}
				}
			}},
			func(ctx context.Context, c *client.Client) error { return c.Rename(ctx, from, to) }
	default:
		p := files[w.rng.IntN(len(files))]
		return crashOp{"unlink " + p, func(m map[string]bool) { delete(m, p) }},
			func(ctx context.Context, c *client.Client) error { return c.Unlink(ctx, p) }
	}
}

// run applies operations until one fails (the server died) or stop closes.
func (w *crashWorker) run(addr string, stop <-chan struct{}) error {
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, OpTimeout: 2 * time.Second, CallTimeout: time.Second})
	if err != nil {
		return nil // the server died before we connected: nothing in flight
	}
	defer c.Close()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		op, do := w.pick()
		if err := do(context.Background(), c); err != nil {
			// A status from the server is a PathError around a bare errno;
			// anything else is the transport losing the server.
			var pe *fs.PathError
			if errors.As(err, &pe) && isErrno(pe.Err) {
				return fmt.Errorf("worker %d: %s: %w (model and server disagree)", w.id, op.desc, err)
			}
			w.pending = &op
			return nil
		}
		op.apply(w.model)
		w.acked++
	}
}

// check compares the server's tree under the worker's root with the model,
// allowing the operation in flight at the crash to have happened or not.
func (w *crashWorker) check(ctx context.Context, c *client.Client) error {
	got := map[string]bool{}
	var walk func(p string) error
	walk = func(p string) error {
		ents, err := c.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			child := path.Join(p, e.Name())
			got[child] = e.IsDir()
			if e.IsDir() {
				if err := walk(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	got[w.root()] = true
	if err := walk(w.root()); err != nil {
		return err
	}
	if sameTree(got, w.model) {
		w.pending = nil
		return nil
	}
	if w.pending != nil {
		applied := map[string]bool{}
		for p, d := range w.model {
			applied[p] = d
		}
		w.pending.apply(applied)
		if sameTree(got, applied) {
			w.model, w.pending = applied, nil
			return nil
		}
	}
	pending := "none"
	if w.pending != nil {
		pending = w.pending.desc
	}
	return fmt.Errorf("worker %d: tree differs from the model (operation in flight: %s)\n got: %v\nwant: %v", w.id, pending, keys(got), keys(w.model))
}

func isErrno(err error) bool {
	_, ok := err.(syscall.Errno)
	return ok
}

func sameTree(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for p, d := range a {
		if bd, ok := b[p]; !ok || bd != d {
			return false
		}
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func TestCrashRecoversAcknowledgedOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server 20 times")
	}
	t.Run("plain", func(t *testing.T) { testCrash(t, 20) })
	// Every operation meets packed directories, and checkpoints are taken
	// of packed directories.
	t.Run("compact", func(t *testing.T) { testCrash(t, 10, crashCompactEnv+"=1") })
}

func testCrash(t *testing.T, cycles int, env ...string) { testCrashWith(t, cycles, false, env...) }

// testCrashWith is testCrash, with directory quotas on / and on every
// worker's root when quotas is set.
func testCrashWith(t *testing.T, cycles int, quotas bool, env ...string) {
	const workers = 4
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()

	child := startCrashChild(t, dir, env...)
	setup, err := client.Dial(child.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]*crashWorker, workers)
	for i := range ws {
		ws[i] = &crashWorker{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i+2)))}
		ws[i].model = map[string]bool{ws[i].root(): true}
		if _, err := setup.Mkdir(context.Background(), ws[i].root(), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if quotas {
		setCrashQuotas(t, setup, ws)
	}
	setup.Close()

	trash := newCrashTrash(env)
	for cycle := range cycles {
		child = loadAndKill(t, cycle, child, dir, ws, rng)
		c, err := client.Dial(child.addr, client.Options{Cred: &client.Cred{}})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if err := w.check(context.Background(), c); err != nil {
				c.Close()
				child.kill()
				t.Fatalf("cycle %d: %v", cycle, err)
			}
		}
		if quotas {
			if err := checkCrashQuotas(c, ws); err != nil {
				c.Close()
				child.kill()
				t.Fatalf("cycle %d: %v", cycle, err)
			}
		}
		if err := trash.check(c); err != nil {
			c.Close()
			child.kill()
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		c.Close()
	}
	child.kill()
	acked := 0
	for _, w := range ws {
		acked += w.acked
	}
	t.Logf("%d operations acknowledged over %d crashes", acked, cycles)
	if acked < cycles {
		t.Fatalf("only %d operations acknowledged: the load did not run", acked)
	}
	if trash != nil && trash.seen == 0 {
		t.Fatal("the trash stayed empty: the load removed nothing")
	}
}

// crashLoad is a worker of a crash test: it runs operations against addr
// until stop closes or the server dies, and reports only unexpected
// failures.
type crashLoad interface {
	run(addr string, stop <-chan struct{}) error
}

// loadAndKill runs every worker against the child, kills the child with
// SIGKILL at a random moment, checks that the workers ended cleanly and
// that the state on disk keeps its invariants, and returns a child
// restarted on dir.
func loadAndKill[W crashLoad](t *testing.T, cycle int, child *crashChild, dir string, ws []W, rng *rand.Rand) *crashChild {
	t.Helper()
	stop := make(chan struct{})
	errs := make(chan error, len(ws))
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() { errs <- w.run(child.addr, stop) })
	}
	time.Sleep(time.Duration(20+rng.IntN(200)) * time.Millisecond)
	child.kill()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
	}
	if _, err := Verify(Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatalf("cycle %d: invariants after crash: %v", cycle, err)
	}
	return startCrashChild(t, dir, child.env...)
}
