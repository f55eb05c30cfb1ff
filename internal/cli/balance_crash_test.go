package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/balance"
	"github.com/canopyfs/canopy/internal/rpc"
)

// balanceLongEnv makes TestBalanceMovesUnderKills run 20 moves instead of 6.
const balanceLongEnv = "CANOPY_BALANCE_LONG"

// TestBalanceMovesUnderKills moves a virtual partition back and forth
// between two groups while a client writes in it, and at a random moment
// of each move SIGKILLs the mover, the source's process or the
// destination's (then starts it again), and runs the move again until it
// finishes. Afterwards every write a client saw acknowledged reads back,
// the files made before keep their inode numbers, the partition runs on
// exactly one group, and no process keeps a replica of it beyond those of
// its group.
func TestBalanceMovesUnderKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills processes")
	}
	moves := 6
	if os.Getenv(balanceLongEnv) != "" {
		moves = 20
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "objects")
	addrs, groups := startGroups(t, dir, store, 2, 1)
	metas := []*proc{groups[0][0], groups[1][0]}
	raddr := startRouterProc(t, addrs[0])

	ctx := context.Background()
	c, err := client.Dial(raddr, client.Options{Cred: &client.Cred{}, CallTimeout: 2 * time.Second, OpTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Mkdir(ctx, "/data", 0o755); err != nil {
		t.Fatal(err)
	}
	var split splitResult
	if err := json.Unmarshal([]byte(mustCanopy(t, raddr, "balance", "split", "/data", "--json")), &split); err != nil {
		t.Fatal(err)
	}
	inos := map[string]client.Ino{}
	for i := range 200 {
		p := fmt.Sprintf("/data/pre-%d", i)
		if err := c.WriteFile(ctx, p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := c.Stat(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		inos[p] = fi.Ino()
	}

	// A client writes on throughout; what it was told is written must be.
	var stop atomic.Bool
	var mu sync.Mutex
	acked := map[string]string{}
	failed := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; !stop.Load(); n++ {
			p := fmt.Sprintf("/data/w-%d", n)
			err := c.WriteFile(ctx, p, []byte(p+" bytes"), 0o644)
			mu.Lock()
			if err == nil {
				acked[p] = p + " bytes"
			} else {
				failed++
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()

	kills := map[string]int{}
	for i := range moves {
		to := 1 - i%2
		args := []string{"--addr", raddr, "--timeout", "60s", "balance", "move", "/data", "--to", fmt.Sprint(to), "--json"}
		mover := mainChild(args...)
		if err := mover.Start(); err != nil {
			t.Fatal(err)
		}
		moverDone := make(chan error, 1)
		go func() { moverDone <- mover.Wait() }()
		victim := rand.IntN(4) // 0, 1: a group's process; 2: the mover; 3: none
		select {
		case err := <-moverDone:
			moverDone <- err
		case <-time.After(time.Duration(rand.IntN(400)) * time.Millisecond):
			switch victim {
			case 0, 1:
				metas[victim].kill()
				kills[metas[victim].name]++
				time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond)
				metas[victim].start()
			case 2:
				mover.Process.Signal(syscall.SIGKILL)
				kills["mover"]++
			}
		}
		<-moverDone
		// Run the move again until it finishes: it takes up where the
		// killed one stopped.
		deadline := time.Now().Add(90 * time.Second)
		for {
			out, err := canopy(t, raddr, "--timeout", "30s", "balance", "move", "/data", "--to", fmt.Sprint(to), "--json")
			if err == nil {
				var res balance.MoveResult
				if err := json.Unmarshal([]byte(out), &res); err != nil || res.To != uint16(to) {
					t.Fatalf("move %d: %q: %v", i, out, err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("move %d to group %d does not finish: %v", i, to, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// One more move whose mover is killed once it has recorded the move,
	// and not run again: the router's recovery pass finishes it.
	final := 1 - moves%2
	{
		mover := mainChild("--addr", raddr, "balance", "move", "/data", "--to", fmt.Sprint(final))
		if err := mover.Start(); err != nil {
			t.Fatal(err)
		}
		recorded := pollUntil(30*time.Second, func() bool {
			_, err := c.GetXattr(ctx, "/data", balance.IntentXattr)
			return err == nil
		})
		mover.Process.Signal(syscall.SIGKILL)
		mover.Wait()
		if !recorded {
			t.Fatal("the move was never recorded on the partition's root")
		}
		kills["mover"]++
		began := time.Now()
		if !pollUntil(60*time.Second, func() bool {
			_, err := c.GetXattr(ctx, "/data", balance.IntentXattr)
			return err != nil && strings.Contains(err.Error(), syscall.ENODATA.Error())
		}) {
			t.Fatal("the routers did not finish a move whose mover was killed, in 60 s")
		}
		t.Logf("a move whose mover was killed was finished by the router %v later", time.Since(began).Round(time.Second))
	}
	stop.Store(true)
	<-done
	t.Logf("%d moves, kills %v; %d writes acknowledged, %d failed", moves+1, kills, len(acked), failed)

	// A group of one process that was just killed and started again
	// answers BUSY (which the client retries a few times) until it is back.
	readFile := func(p string) ([]byte, error) {
		got, err := c.ReadFile(ctx, p)
		for end := time.Now().Add(30 * time.Second); err != nil && errors.Is(err, rpc.ErrBusy) && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
			got, err = c.ReadFile(ctx, p)
		}
		return got, err
	}
	for p, want := range acked {
		if got, err := readFile(p); err != nil || string(got) != want {
			t.Fatalf("%s reads %q (%v), want %q", p, got, err, want)
		}
	}
	for p, ino := range inos {
		fi, err := c.Stat(ctx, p)
		for end := time.Now().Add(30 * time.Second); err != nil && errors.Is(err, rpc.ErrBusy) && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
			fi, err = c.Stat(ctx, p)
		}
		if err != nil || fi.Ino() != ino {
			t.Fatalf("%s: %v (%v), want inode %d", p, fi, err, ino)
		}
	}
	var st struct {
		VParts []balance.Placement `json:"vparts"`
	}
	if err := json.Unmarshal([]byte(mustCanopy(t, raddr, "balance", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	for _, p := range st.VParts {
		if p.VPart == split.VPart && (p.Moving || len(p.Groups) != 1 || p.Groups[0] != uint16(final) || len(p.Replicas) != 1) {
			t.Fatalf("status of the moved partition: %+v", p)
		}
	}
	hosted := func(g int) []string {
		names, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("g%d", g), "r1", "hosted", fmt.Sprintf("p%d-*", split.VPart)))
		return names
	}
	if left := hosted(1 - final); len(left) != 0 {
		t.Fatalf("group %d keeps %v", 1-final, left)
	}
	if here := hosted(final); len(here) != 1 {
		t.Fatalf("group %d holds %v", final, here)
	}
}
