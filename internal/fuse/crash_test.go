package fuse

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/crashcheck"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/server"
)

// The crash test of the mount's durability modes runs the metadata
// server and each mount in a process of its own (this test binary run
// again), so that either can be killed with SIGKILL while a writer works
// on the mount.
const (
	crashServerEnv     = "CANOPY_FUSE_CRASH_SERVER"  // the server's directory
	crashStorageEnv    = "CANOPY_FUSE_CRASH_STORAGE" // its object store URL
	crashMountEnv      = "CANOPY_FUSE_CRASH_MOUNT"   // the mount point
	crashAddrEnv       = "CANOPY_FUSE_CRASH_ADDR"    // the server a mount dials
	crashDurabilityEnv = "CANOPY_FUSE_CRASH_DURABILITY"
	// crashCyclesEnv sets the number of kill cycles (default 20).
	crashCyclesEnv = "CANOPY_FUSE_CRASH_CYCLES"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(crashServerEnv) != "":
		runCrashServer(os.Getenv(crashServerEnv), os.Getenv(crashStorageEnv))
	case os.Getenv(crashMountEnv) != "":
		runCrashMount(os.Getenv(crashMountEnv), os.Getenv(crashAddrEnv), os.Getenv(crashDurabilityEnv))
	default:
		os.Exit(m.Run())
	}
}

// runCrashServer serves dir on a loopback port, prints its address, and
// serves until killed, with the flusher that stores small files' inline
// bytes as objects running beside it (killed with it).
func runCrashServer(dir, storage string) {
	s, err := server.Open(server.Config{Dir: dir, Storage: storage, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	go s.Serve(ln)
	store, err := object.Open(context.Background(), storage)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	c, err := client.Dial(ln.Addr().String(), client.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("ready at", ln.Addr())
	data.NewFlusher(store, clientdata.InlineAdmin(c, 0), data.FlusherConfig{Logger: slog.New(slog.DiscardHandler)}).Run(context.Background())
}

// runCrashMount mounts the server at addr on mnt with the durability
// mode named, prints "mounted", and serves until killed or unmounted.
func runCrashMount(mnt, addr, mode string) {
	d, err := client.ParseDurability(mode)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, Durability: d, OpTimeout: 3 * time.Second, CallTimeout: time.Second})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	m, err := MountAt(c, mnt, DefaultOptions())
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("mounted")
	<-m.Done()
}

// crashProc is a child process of the crash test.
type crashProc struct {
	cmd  *exec.Cmd
	line string // the first line it printed, without its prefix
}

func startCrashProc(t *testing.T, want string, env ...string) *crashProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), want)
	if err != nil || !ok {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start: %q %v", line, err)
	}
	return &crashProc{cmd: cmd, line: strings.TrimSpace(rest)}
}

func (p *crashProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// mountWriter writes files f0, f1, ... of its directory on a mount (open
// with O_CREAT|O_EXCL, write, close), with an fsync before the close of
// every fourth, and remembers the last file whose close returned (acked)
// and the last whose fsync did (synced).
type mountWriter struct {
	id            int
	mode          string
	next          int
	acked, synced int // -1: none
	ackedTotal    int
	syncedTotal   int
	lostEver      int
}

func (w *mountWriter) dir() string { return fmt.Sprintf("/w%d", w.id) }

func mountFileData(w, i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("writer %d file %d\n", w, i)), 50+i%200)
}

// run writes on the mount at mnt until a call fails (the mount or the
// server was killed).
func (w *mountWriter) run(mnt string) {
	for {
		i := w.next
		f, err := os.OpenFile(filepath.Join(mnt, w.dir(), fmt.Sprintf("f%d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return
		}
		w.next++ // from here on the file may exist
		if _, err := f.Write(mountFileData(w.id, i)); err != nil {
			f.Close()
			return
		}
		if i%4 == 3 {
			if err := f.Sync(); err != nil {
				f.Close()
				return
			}
			w.synced = i
			w.syncedTotal++
		}
		if err := f.Close(); err != nil {
			return
		}
		w.acked = i
		w.ackedTotal++
	}
}

// check reads the writer's directory through the SDK after a crash: the
// files there are f0 to fN for some N (what is lost is a suffix), every
// one whole (no file names data that is not there), none that was synced
// is missing, and in the strict mode none that was acknowledged.
func (w *mountWriter) check(ctx context.Context, c *client.Client) error {
	n, err := crashcheck.Files(ctx, c, w.dir(), w.acked, func(i int) []byte { return mountFileData(w.id, i) })
	if err != nil {
		return err
	}
	if n-1 < w.synced {
		return fmt.Errorf("%s: f%d was fsync'd, but only %d files are left", w.dir(), w.synced, n)
	}
	if w.mode == "strict" && n-1 < w.acked {
		return fmt.Errorf("%s: strict mode: f%d was acknowledged, but only %d files are left", w.dir(), w.acked, n)
	}
	w.lostEver += max(0, w.acked-(n-1))
	w.next, w.acked, w.synced = n, n-1, min(w.synced, n-1)
	return nil
}

// TestMountCrashDurabilityModes: a writer on a strict mount and one on a
// POSIX mount write files while, at random moments, the server, the
// mounts, or both are killed with SIGKILL, for 20 cycles
// (CANOPY_FUSE_CRASH_CYCLES). After each: what was lost is a suffix of
// each writer's files, no file names missing data, nothing fsync'd is
// lost, and on the strict mount nothing acknowledged. (A kill of the
// server's process keeps what its log wrote to the file system, so the
// POSIX mount loses nothing acknowledged here either; the log's own crash
// tests cover a crash of the machine.)
func TestMountCrashDurabilityModes(t *testing.T) {
	requireFUSE(t)
	if testing.Short() {
		t.Skip("kills and restarts a server and mounts")
	}
	cycles := 20
	if n, err := strconv.Atoi(os.Getenv(crashCyclesEnv)); err == nil && n > 0 {
		cycles = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d cycles", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 20))
	dir, storage := t.TempDir(), "file://"+t.TempDir()
	startServer := func() *crashProc {
		return startCrashProc(t, "ready at ", crashServerEnv+"="+dir, crashStorageEnv+"="+storage)
	}
	srv := startServer()
	defer func() { srv.kill() }()
	dial := func() *client.Client {
		// Generous time limits: a server just restarted on a loaded
		// machine may take a while to answer.
		c, err := client.Dial(srv.line, client.Options{Cred: &client.Cred{}, OpTimeout: 2 * time.Minute, CallTimeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ws := []*mountWriter{{id: 0, mode: "strict", acked: -1, synced: -1}, {id: 1, mode: "posix", acked: -1, synced: -1}}
	setup := dial()
	for _, w := range ws {
		if _, err := setup.Mkdir(t.Context(), w.dir(), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	setup.Close()
	kills := map[string]int{}
	for cycle := range cycles {
		var mounts []*crashProc
		var mnts []string
		for _, w := range ws {
			mnt := filepath.Join(t.TempDir(), "mnt")
			must(t, os.Mkdir(mnt, 0o755))
			mounts = append(mounts, startCrashProc(t, "mounted", crashMountEnv+"="+mnt, crashAddrEnv+"="+srv.line, crashDurabilityEnv+"="+w.mode))
			mnts = append(mnts, mnt)
		}
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Go(func() { w.run(mnts[i]) })
		}
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		victim := [...]string{"server", "mounts", "both"}[rng.IntN(3)]
		kills[victim]++
		if victim != "mounts" {
			srv.kill()
		}
		for _, m := range mounts { // killed in every cycle: with the server gone they could only fail
			m.kill()
		}
		for _, mnt := range mnts {
			// The kernel aborted the connections; detach the dead mounts.
			if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				t.Logf("detach %s: %v", mnt, err)
			}
		}
		wg.Wait()
		if victim != "mounts" {
			srv = startServer()
		}
		c := dial()
		for _, w := range ws {
			if err := w.check(t.Context(), c); err != nil {
				c.Close()
				t.Fatalf("cycle %d (killed: %s), %s writer: %v", cycle, victim, w.mode, err)
			}
		}
		c.Close()
	}
	t.Logf("kills: %v", kills)
	for _, w := range ws {
		t.Logf("%s mount: %d files acknowledged (%d fsync'd), %d acknowledged and lost", w.mode, w.ackedTotal, w.syncedTotal, w.lostEver)
		if w.ackedTotal == 0 || w.syncedTotal == 0 {
			t.Errorf("%s writer: %d files acknowledged, %d fsync'd: the load did not run", w.mode, w.ackedTotal, w.syncedTotal)
		}
	}
	// The writers' small files went inline with their commits; the
	// flusher beside the server stored them as objects meanwhile, and the
	// checks above read them, from the server's memory or from objects.
	objects := 0
	filepath.WalkDir(strings.TrimPrefix(storage, "file://"), func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects++
		}
		return nil
	})
	if objects == 0 {
		t.Error("the flusher stored no object")
	}
}
