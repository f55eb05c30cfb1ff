package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

	"golang.org/x/sys/unix"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/balance"
	"github.com/canopyfs/canopy/internal/data"
)

// balanceReplicasEnv sets how many replicas each group of
// TestBalanceMoveUnderLoad has (default 1).
const balanceReplicasEnv = "CANOPY_BALANCE_REPLICAS"

// balanceFilesEnv sets how many files the moved subtree of
// TestBalanceMoveUnderLoad holds before the moves.
const balanceFilesEnv = "CANOPY_BALANCE_FILES"

// TestBalanceMoveUnderLoad runs two metadata server processes (groups 0
// and 1, sharing an object store) and a router, splits /data off into a
// virtual partition of its own, and moves it from group to group three
// times while four clients write files in it and elsewhere and one keeps
// a file open (through the SDK, and through a FUSE mount with the
// directory held open as a working directory is). No client sees an error; every file reads back what was
// written, under the inode number it had; the open file keeps reading and
// writing across the moves; the groups left hold nothing of it; and a
// process of the group it ends on, killed and started again, serves it
// again.
func TestBalanceMoveUnderLoad(t *testing.T) {
	replicas := 1
	if s := os.Getenv(balanceReplicasEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q", balanceReplicasEnv, s)
		}
		replicas = n
	}
	testBalanceMove(t, replicas)
}

// TestBalanceMoveReplicated is TestBalanceMoveUnderLoad with groups of
// three replicas: six processes.
func TestBalanceMoveReplicated(t *testing.T) { testBalanceMove(t, 3) }

func testBalanceMove(t *testing.T, replicas int) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	files := 300
	if s := os.Getenv(balanceFilesEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		files = n
	}
	dir := t.TempDir()
	store := filepath.Join(dir, "objects")
	addrs, metas := startGroups(t, dir, store, 2, replicas)
	raddr := startRouterProc(t, addrs[0])

	ctx := context.Background()
	c, err := client.Dial(raddr, client.Options{Cred: &client.Cred{}, CallTimeout: 2 * time.Second, OpTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, d := range []string{"/data", "/other"} {
		if _, err := c.Mkdir(ctx, d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Chown(ctx, "/data", 1000, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := canopy(t, raddr, "balance", "move", "/data", "--to", "1"); err == nil {
		t.Fatal("a directory that is not split moved")
	}
	var split splitResult
	if err := json.Unmarshal([]byte(mustCanopy(t, raddr, "balance", "split", "/data", "--json")), &split); err != nil {
		t.Fatal(err)
	}
	if split.VPart == 0 || split.Group != 0 || len(split.Replicas) != replicas {
		t.Fatalf("split: %+v", split)
	}
	if fi, err := c.Stat(ctx, "/data"); err != nil || fi.Attr().UID != 1000 || fi.Mode().Perm() != 0o750 ||
		uint16(fi.Ino()>>48) != split.VPart {
		t.Fatalf("/data after the split: %+v, %v", fi, err)
	}
	if _, err := canopy(t, raddr, "balance", "split", "/data"); err == nil {
		t.Fatal("split twice")
	}

	// What the moves must keep: files and their inode numbers. Files
	// beyond the first 300 are empty (made by eight clients at once), so
	// that a large subtree fills quickly.
	inos := make(map[string]client.Ino, files)
	var inosMu sync.Mutex
	fillErr := make(chan error, 8)
	for w := range 8 {
		go func() {
			fc, err := client.Dial(raddr, client.Options{Cred: &client.Cred{}, CallTimeout: 2 * time.Second, OpTimeout: 30 * time.Second})
			if err != nil {
				fillErr <- err
				return
			}
			defer fc.Close()
			for i := w; i < files; i += 8 {
				p := fmt.Sprintf("/data/pre-%d", i)
				var fi *client.FileInfo
				if i < 300 {
					if err = fc.WriteFile(ctx, p, []byte(p), 0o644); err == nil {
						fi, err = fc.Stat(ctx, p)
					}
				} else {
					fi, err = fc.Create(ctx, p, 0o644)
				}
				if err != nil {
					fillErr <- fmt.Errorf("%s: %w", p, err)
					return
				}
				inosMu.Lock()
				inos[p] = fi.Ino()
				inosMu.Unlock()
			}
			fillErr <- nil
		}()
	}
	for range 8 {
		if err := <-fillErr; err != nil {
			t.Fatal(err)
		}
	}
	open, err := c.OpenFile(ctx, "/data/open", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var openWant bytes.Buffer
	writeOpen := func(what string) {
		t.Helper()
		if _, err := open.WriteAt([]byte(what), int64(openWant.Len())); err != nil {
			t.Fatalf("write the open file %s: %v", what, err)
		}
		openWant.WriteString(what)
		if err := open.Sync(); err != nil {
			t.Fatalf("sync the open file %s: %v", what, err)
		}
		got := make([]byte, openWant.Len())
		if n, err := open.ReadAt(got, 0); n != len(got) || !bytes.Equal(got, openWant.Bytes()) {
			t.Fatalf("the open file %s: read %q (%v), want %q", what, got[:n], err, openWant.Bytes())
		}
	}
	writeOpen("before the moves;")

	// Through a FUSE mount too: a directory held open as a shell's working
	// directory is, and a file open for writing.
	fuse := startBalanceMount(t, raddr)
	if fuse != nil {
		defer fuse.close()
		fuse.write(t, "before the moves;")
	}

	// Four clients write in the moving subtree and elsewhere.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	written := map[string]string{}
	var errs []error
	var lat []time.Duration // writes in the moving subtree
	var moving atomic.Bool  // a move command runs
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc, err := client.Dial(raddr, client.Options{Cred: &client.Cred{}, CallTimeout: 2 * time.Second, OpTimeout: 30 * time.Second})
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer wc.Close()
			for n := 0; !stop.Load(); n++ {
				top := "/data"
				if n%4 == 3 {
					top = "/other"
				}
				p := fmt.Sprintf("%s/w%d-%d", top, w, n)
				began := time.Now()
				err := wc.WriteFile(ctx, p, []byte(p+" content"), 0o644)
				took := time.Since(began)
				if err == nil {
					_, err = wc.Stat(ctx, fmt.Sprintf("/data/pre-%d", n%files))
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("worker %d: %s: %w", w, p, err))
				} else {
					written[p] = p + " content"
					if top == "/data" && moving.Load() {
						lat = append(lat, took)
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}

	var freezes []float64
	for i, to := range []int{1, 0, 1} {
		time.Sleep(300 * time.Millisecond)
		var res balance.MoveResult
		moving.Store(true)
		out := mustCanopy(t, raddr, "balance", "move", "/data", "--to", fmt.Sprint(to), "--json")
		moving.Store(false)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("move %d: %q: %v", i, out, err)
		}
		if res.VPart != split.VPart || res.To != uint16(to) || res.Files < uint64(files) || len(res.Replicas) != replicas {
			t.Fatalf("move %d: %+v", i, res)
		}
		freezes = append(freezes, res.FreezeMS)
		t.Logf("move %d to group %d: %d files in %.2f s (%.0f files/s), freeze %.1f ms", i, to, res.Files, res.Seconds,
			float64(res.Files)/res.Seconds, res.FreezeMS)
		writeOpen(fmt.Sprintf("after move %d;", i))
		if fuse != nil {
			fuse.write(t, fmt.Sprintf("after move %d;", i))
			name := fmt.Sprintf("made-in-cwd-%d", i)
			fuse.makeInCwd(t, name, inos["/data/pre-0"])
			mu.Lock()
			written["/data/"+name] = name
			mu.Unlock()
		}
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("clients saw errors during the moves: %v", errs)
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		t.Fatal("no write in the moving subtree while a move ran")
	}
	t.Logf("%d files written; %d in the moving subtree during the moves: p50 %v, p99 %v, max %v; freezes %v ms",
		len(written), len(lat), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], freezes)

	check := func(when string) {
		t.Helper()
		for p, want := range written {
			if got, err := c.ReadFile(ctx, p); err != nil || string(got) != want {
				t.Fatalf("%s: %s reads %q (%v), want %q", when, p, got, err, want)
			}
		}
		seen := 0
		for cursor, done := "", false; !done; {
			var ents []*client.DirEntry
			var err error
			ents, cursor, done, err = c.ReadDirPage(ctx, "/data", cursor, 4096, false)
			if err != nil {
				t.Fatalf("%s: list /data: %v", when, err)
			}
			for _, e := range ents {
				p := "/data/" + e.Name()
				if ino, ok := inos[p]; ok {
					seen++
					if e.Ino() != ino {
						t.Fatalf("%s: %s has inode %d, want %d", when, p, e.Ino(), ino)
					}
				} else if _, ok := written[p]; !ok && p != "/data/open" && p != "/data/fuse-open" {
					t.Fatalf("%s: %s was never made", when, p)
				}
			}
		}
		if seen != len(inos) {
			t.Fatalf("%s: %d of the %d files made before the moves are listed", when, seen, len(inos))
		}
		for i := range min(files, 300) {
			p := fmt.Sprintf("/data/pre-%d", i)
			if got, err := c.ReadFile(ctx, p); err != nil || string(got) != p {
				t.Fatalf("%s: %s reads %q (%v)", when, p, got, err)
			}
		}
	}
	check("after the moves")
	writeOpen("at the end;")
	if err := open.Close(); err != nil {
		t.Fatal(err)
	}

	// Placed on group 1 alone; group 0 keeps nothing of it.
	var st struct {
		VParts []balance.Placement `json:"vparts"`
	}
	if err := json.Unmarshal([]byte(mustCanopy(t, raddr, "balance", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range st.VParts {
		if p.VPart == split.VPart {
			found = true
			if p.Moving || len(p.Groups) != 1 || p.Groups[0] != 1 || len(p.Replicas) != replicas {
				t.Fatalf("status of the moved partition: %+v", p)
			}
		}
	}
	if !found {
		t.Fatalf("status lists no virtual partition %d: %+v", split.VPart, st)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "g0", "*", "hosted", "*")); len(left) != 0 {
		t.Fatalf("group 0 keeps %v", left)
	}

	// The collector of the group the partition runs on collects its
	// objects: a file's go once it is removed.
	big := bytes.Repeat([]byte("canopy!!"), 9<<17) // 9 MiB
	if err := c.WriteFile(ctx, "/data/big", big, 0o644); err != nil {
		t.Fatal(err)
	}
	objs := objectsOf(t, c, store, "/data/big")
	if err := c.Remove(ctx, "/data/big"); err != nil {
		t.Fatal(err)
	}
	if !pollUntil(30*time.Second, func() bool {
		for _, o := range objs {
			if _, err := os.Stat(o); err == nil {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the objects of a removed file of the moved partition are still there after 30 s: %v", objs)
	}

	// The process of group 1 starts its hosted replica again after a kill.
	for _, m := range metas[1] {
		m.kill()
	}
	for _, m := range metas[1] {
		m.start()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.Stat(ctx, "/data/pre-0")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/data after group 1 restarted: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	check("after group 1 restarted")
	if _, err := c.Stat(ctx, "/data/missing"); err == nil || !strings.Contains(err.Error(), syscall.ENOENT.Error()) {
		t.Fatalf("a missing file: %v", err)
	}
}

// balanceMount is a FUSE mount of the namespace with a directory of it
// held open (as a shell's working directory is) and a file open in it.
type balanceMount struct {
	cmd   *exec.Cmd
	dir   int      // /data, opened through the mount
	file  *os.File // /data/fuse-open, opened through the mount
	wrote bytes.Buffer
}

// startBalanceMount mounts the namespace at raddr, or returns nil where
// there can be no mount.
func startBalanceMount(t *testing.T, raddr string) *balanceMount {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil || os.Geteuid() != 0 {
		t.Log("no FUSE mount here: the moves are not tried through one")
		return nil
	}
	mnt := mountDir(t)
	cmd := mainChild("--addr", raddr, "mount", mnt)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "canopy: mounted ") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("mount: ready line %q (%v)", line, err)
	}
	m := &balanceMount{cmd: cmd, dir: -1}
	if m.dir, err = unix.Open(filepath.Join(mnt, "data"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		m.close()
		t.Fatal(err)
	}
	if m.file, err = os.OpenFile(filepath.Join(mnt, "data", "fuse-open"), os.O_RDWR|os.O_CREATE, 0o644); err != nil {
		m.close()
		t.Fatal(err)
	}
	return m
}

// write appends to the open file, syncs it and reads it all back.
func (m *balanceMount) write(t *testing.T, what string) {
	t.Helper()
	if _, err := m.file.WriteAt([]byte(what), int64(m.wrote.Len())); err != nil {
		t.Fatalf("write the file open through the mount %s: %v", what, err)
	}
	m.wrote.WriteString(what)
	if err := m.file.Sync(); err != nil {
		t.Fatalf("fsync the file open through the mount %s: %v", what, err)
	}
	got := make([]byte, m.wrote.Len())
	if n, err := m.file.ReadAt(got, 0); n != len(got) || !bytes.Equal(got, m.wrote.Bytes()) {
		t.Fatalf("the file open through the mount %s: read %q (%v), want %q", what, got[:n], err, m.wrote.Bytes())
	}
}

// makeInCwd makes a file named name, holding its name, in the directory
// held open, and checks that pre-0 there still has inode number ino.
func (m *balanceMount) makeInCwd(t *testing.T, name string, ino client.Ino) {
	t.Helper()
	fd, err := unix.Openat(m.dir, name, unix.O_CREAT|unix.O_WRONLY|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatalf("make %s in the directory held open: %v", name, err)
	}
	_, err = unix.Write(fd, []byte(name))
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("write %s in the directory held open: %v", name, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(m.dir, "pre-0", &st, 0); err != nil || st.Ino != uint64(ino) {
		t.Fatalf("pre-0 in the directory held open: inode %d (%v), want %d", st.Ino, err, ino)
	}
}

func (m *balanceMount) close() {
	if m.file != nil {
		m.file.Close()
	}
	if m.dir >= 0 {
		unix.Close(m.dir)
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		m.cmd.Process.Kill()
		<-done
	}
}

// startGroups starts n groups of metadata server processes (replicas
// each; a Raft group when more than one) sharing the object store, routes
// partition K to group K, mounts partition 1 at /p1, and returns each
// group's addresses and processes. Group K's replica I lives in
// dir/gK/rI.
func startGroups(t *testing.T, dir, store string, n, replicas int) ([][]string, [][]*proc) {
	t.Helper()
	addrs := make([][]string, n)
	procs := make([][]*proc, n)
	for k := range n {
		var raft []string // ports of their own, not the client port + 1000 another test may hold
		for range replicas {
			addrs[k] = append(addrs[k], stablePort(t))
			raft = append(raft, stablePort(t))
		}
		for i, a := range addrs[k] {
			args := []string{"meta", "--dir", filepath.Join(dir, fmt.Sprintf("g%d", k), fmt.Sprintf("r%d", i+1)),
				"--listen", a, "--partition", fmt.Sprint(k), "--storage", store,
				"--trash-days", "0", "--gc-delay", "1ms", "--gc-interval", "50ms"}
			if replicas > 1 {
				args = append(args, "--peers", strings.Join(addrs[k], ","), "--raft-peers", strings.Join(raft, ","))
			}
			m := &proc{t: t, name: fmt.Sprintf("group %d replica %d", k, i+1), args: args}
			procs[k] = append(procs[k], m)
		}
	}
	// The replicas of a group start together: each waits for a quorum.
	for k := range n {
		var wg sync.WaitGroup
		errs := make([]error, len(procs[k]))
		for i, m := range procs[k] {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = m.tryStart() }()
		}
		wg.Wait()
		for i, m := range procs[k] {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			t.Cleanup(m.kill)
		}
	}
	root := strings.Join(addrs[0], ",")
	for k := range n {
		mustCanopy(t, root, "routing", "set", fmt.Sprint(k), strings.Join(addrs[k], ","))
	}
	if n > 1 {
		mustCanopy(t, root, "mounttable", "add", "/p1", "1")
	}
	return addrs, procs
}

// objectsOf returns the paths, in the local object store at store, of the
// objects holding file p's data, after checking they exist.
func objectsOf(t *testing.T, c *client.Client, store, p string) []string {
	t.Helper()
	ctx := context.Background()
	fi, err := c.Stat(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	vol, err := c.Volume(ctx, fi.Ino())
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := c.Chunks(ctx, fi.Ino(), 0, 16)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, ch := range chunks {
		for _, sl := range ch.Slices {
			for _, k := range data.SliceKeys(sl.ID, int(sl.Size), vol.BlockSize) {
				path := filepath.Join(store, filepath.FromSlash(k))
				if _, err := os.Stat(path); err != nil {
					t.Fatalf("object of %s: %v", p, err)
				}
				paths = append(paths, path)
			}
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s has no objects", p)
	}
	return paths
}

// startRouterProc runs `canopy router` in front of the root group at root
// and returns its address.
func startRouterProc(t *testing.T, root []string) string {
	t.Helper()
	rt := &proc{t: t, name: "router", args: []string{"router", "--listen", stablePort(t), "--root", strings.Join(root, ",")}}
	rt.start()
	t.Cleanup(rt.kill)
	return rt.args[2]
}
