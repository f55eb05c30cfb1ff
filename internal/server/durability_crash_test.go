package server

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/crashcheck"
)

// durabilityCyclesEnv sets the number of kill cycles of
// TestCrashDurabilityModes (default 5; the full run is 20).
const durabilityCyclesEnv = "CANOPY_DURABILITY_CYCLES"

// fileWriter writes files f0, f1, ... of its own directory, each with
// contents that name it, one after the other (create, write, close),
// calling File.Sync before the close of every fourth. It remembers the
// last file whose close returned (acked) and the last whose Sync did
// (synced).
type fileWriter struct {
	id             int
	mode           client.Durability
	next           int // the next file to write
	acked, synced  int // -1: none
	ackedTotal     int
	lost, lostEver int // files acknowledged but missing after the last crash, and in all
}

func (w *fileWriter) dir() string { return fmt.Sprintf("/d%d", w.id) }

func fileData(w, i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("writer %d file %d\n", w, i)), 50+i%200)
}

func (w *fileWriter) run(addr string, stop <-chan struct{}) error {
	c, err := client.Dial(addr, client.Options{Cred: &client.Cred{}, Durability: w.mode, OpTimeout: 2 * time.Second, CallTimeout: time.Second})
	if err != nil {
		return nil // the server is already gone
	}
	defer c.Close()
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		i := w.next
		f, err := c.OpenFile(ctx, fmt.Sprintf("%s/f%d", w.dir(), i), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return nil
		}
		w.next++ // from here on the file may exist
		if _, err := f.Write(fileData(w.id, i)); err != nil {
			f.Close()
			return nil
		}
		if i%4 == 3 {
			if err := f.Sync(); err != nil {
				f.Close()
				return nil
			}
			w.synced = i
		}
		if err := f.Close(); err != nil {
			return nil
		}
		w.acked = i
		w.ackedTotal++
	}
}

// check reads the writer's directory after a restart: the files there are
// f0 to fN for some N (a crash loses a suffix), every one whole (no file
// names data that is not there), none that was synced is missing, and in
// the strict mode none that was acknowledged. The next file written is
// f(N+1).
func (w *fileWriter) check(ctx context.Context, c *client.Client) error {
	n, err := crashcheck.Files(ctx, c, w.dir(), w.acked, func(i int) []byte { return fileData(w.id, i) })
	if err != nil {
		return err
	}
	if n-1 < w.synced {
		return fmt.Errorf("%s: f%d was synced, but only %d files are left", w.dir(), w.synced, n)
	}
	if w.mode == client.DurabilityStrict && n-1 < w.acked {
		return fmt.Errorf("%s: strict mode: f%d was acknowledged, but only %d files are left", w.dir(), w.acked, n)
	}
	w.lost = max(0, w.acked-(n-1))
	w.lostEver += w.lost
	w.next, w.acked, w.synced = n, n-1, min(w.synced, n-1)
	return nil
}

// TestCrashDurabilityModes: writers in the strict and the POSIX mode
// write files while the server is killed with SIGKILL at random moments.
// In both, what a crash loses is a suffix of each writer's files and no
// file names data that is missing; nothing synced is lost, and in the
// strict mode nothing acknowledged. (A kill of the process alone keeps
// what the log wrote to the file system, so the POSIX mode loses nothing
// here either; a crash of the machine can lose the last moments of
// early changes: the log's own crash tests cover that, TestSyncFlushed*.)
func TestCrashDurabilityModes(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts a server")
	}
	cycles := 5
	if n, err := strconv.Atoi(os.Getenv(durabilityCyclesEnv)); err == nil && n > 0 {
		cycles = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d cycles", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	child := startCrashChild(t, dir, crashStorageEnv+"=file://"+t.TempDir())
	setup, err := client.Dial(child.addr, client.Options{Cred: &client.Cred{}})
	if err != nil {
		t.Fatal(err)
	}
	var ws []*fileWriter
	for i, mode := range []client.Durability{client.DurabilityStrict, client.DurabilityStrict, client.DurabilityPOSIX, client.DurabilityPOSIX} {
		w := &fileWriter{id: i, mode: mode, acked: -1, synced: -1}
		if _, err := setup.Mkdir(context.Background(), w.dir(), 0o755); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	setup.Close()
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
				t.Fatalf("cycle %d, %s writer %d: %v", cycle, w.mode, w.id, err)
			}
		}
		c.Close()
	}
	child.kill()
	for _, w := range ws {
		t.Logf("writer %d (%s): %d files acknowledged, %d lost", w.id, w.mode, w.ackedTotal, w.lostEver)
		if w.ackedTotal == 0 {
			t.Errorf("writer %d acknowledged no file: the load did not run", w.id)
		}
	}
}
