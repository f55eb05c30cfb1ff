package client_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/clientdata"
	"github.com/canopyfs/canopy/internal/data"
	"github.com/canopyfs/canopy/internal/object"
	"github.com/canopyfs/canopy/internal/server"
	"github.com/canopyfs/canopy/internal/server/servertest"
)

// The kill test re-executes this test binary as a writer that commits part
// of a file, uploads more blocks without committing them, says so, and is
// killed with SIGKILL.
const (
	writerAddrEnv  = "CANOPY_TEST_WRITER_ADDR"
	writerStoreEnv = "CANOPY_TEST_WRITER_STORE"
	committedLen   = 6 << 20
)

// killedWriter is the child's side.
func killedWriter(addr, storeDir string) error {
	ctx := context.Background()
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		return err
	}
	f, err := c.OpenFile(ctx, "/victim", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(randomBytes(10, committedLen)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	store, err := object.NewLocal(storeDir)
	if err != nil {
		return err
	}
	before, err := store.List(ctx, "chunks/", "", 0)
	if err != nil {
		return err
	}
	// Three more full blocks, uploaded as they fill, never committed.
	if _, err := f.Write(randomBytes(11, 12<<20)); err != nil {
		return err
	}
	for {
		now, err := store.List(ctx, "chunks/", "", 0)
		if err != nil {
			return err
		}
		if len(now) >= len(before)+3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("uploaded")
	select {} // wait for SIGKILL
}

func TestKilledWriterLeavesNoBrokenFile(t *testing.T) {
	if addr := os.Getenv(writerAddrEnv); addr != "" {
		if err := killedWriter(addr, os.Getenv(writerStoreEnv)); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		return
	}
	dir := t.TempDir()
	_, addr := servertest.Start(t, server.Config{Storage: "file://" + dir})
	store, err := object.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterLeavesNoBrokenFile$")
	cmd.Env = append(os.Environ(), writerAddrEnv+"="+addr, writerStoreEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		if strings.TrimSpace(line) != "uploaded" {
			t.Fatalf("child said %q", line)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("child did not upload in time")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The file claims exactly what was committed, and all of it reads.
	fi, err := c.Stat(ctx, "/victim")
	if err != nil || fi.Size() != committedLen {
		t.Fatalf("size after the kill: %v, %v; want %d", fi.Size(), err, committedLen)
	}
	got, err := c.ReadFile(ctx, "/victim")
	if err != nil || !bytes.Equal(got, randomBytes(10, committedLen)) {
		t.Fatalf("committed data after the kill: %d bytes, %v", len(got), err)
	}
	vol, err := clientdata.Volume(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	admin := clientdata.Admin(c, 0)
	rep, err := data.Fsck(ctx, store, admin, data.FsckOptions{BlockSize: vol.BlockSize})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Orphans) < 3 || len(rep.MissingObjects) != 0 {
		t.Fatalf("fsck after the kill: %d orphans, %d missing; want at least 3 orphans, none missing", len(rep.Orphans), len(rep.MissingObjects))
	}
	// Within the grace period the sweep leaves them: a live writer may
	// still commit them.
	col := data.NewCollector(store, admin, data.CollectorConfig{Grace: time.Hour, BlockSize: vol.BlockSize})
	if n, err := col.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep within the grace period deleted %d (%v)", n, err)
	}
	// Once it has passed, they go.
	col = data.NewCollector(store, admin, data.CollectorConfig{Grace: 50 * time.Millisecond, BlockSize: vol.BlockSize,
		Now: func() time.Time { return time.Now().Add(time.Second) }})
	n, err := col.Sweep(ctx)
	if err != nil || n != len(rep.Orphans) {
		t.Fatalf("sweep deleted %d (%v), want %d", n, err, len(rep.Orphans))
	}
	rep, err = data.Fsck(ctx, store, admin, data.FsckOptions{BlockSize: vol.BlockSize})
	if err != nil || !rep.Clean() {
		t.Fatalf("fsck after the sweep: %+v, %v", rep, err)
	}
	if got, err := c.ReadFile(ctx, "/victim"); err != nil || !bytes.Equal(got, randomBytes(10, committedLen)) {
		t.Fatalf("committed data after the sweep: %v", err)
	}
}
