package server

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/canopyfs/canopy/client"
	"github.com/canopyfs/canopy/internal/engine"
)

// TestDumpOffTheApplyLoop holds a dump's encoding until the server has
// applied a hundred creates made after the dump was asked for: the
// server goes on applying while the dump is encoded (the first call
// answers at once), and the dump holds the namespace as it was at the
// first call, none of the later creates.
func TestDumpOffTheApplyLoop(t *testing.T) {
	s, addr := openAndServe(t, Config{Dir: t.TempDir()})
	c := dial(t, addr, client.Cred{})
	ctx := t.Context()
	for i := range 10 {
		if _, err := c.Create(ctx, fmt.Sprintf("/a%d", i), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	entered, hold := make(chan struct{}), make(chan struct{})
	s.intake.dumps.beforeEncode = func() {
		close(entered)
		<-hold
	}
	type result struct {
		info client.DumpInfo
		err  error
	}
	var buf bytes.Buffer
	done := make(chan result, 1)
	go func() {
		info, err := dial(t, addr, client.Cred{}).Dump(ctx, 0, &buf, nil, nil)
		done <- result{info, err}
	}()
	<-entered
	for i := range 100 {
		if _, err := c.Create(ctx, fmt.Sprintf("/b%d", i), 0o644); err != nil {
			t.Fatalf("create while a dump is encoded: %v", err)
		}
	}
	close(hold)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.info.Nodes != 11 || r.info.Total != uint64(buf.Len()) {
		t.Fatalf("dump info %+v, %d bytes read", r.info, buf.Len())
	}
	e, err := engine.Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if e.Len() != 11 {
		t.Fatalf("dump holds %d nodes, want the root and /a0../a9", e.Len())
	}
	root := engine.RootIno(0)
	if _, err := e.Lookup(engine.Cred{}, root, "a9"); err != nil {
		t.Errorf("a9 not in the dump: %v", err)
	}
	if _, err := e.Lookup(engine.Cred{}, root, "b0"); err == nil {
		t.Errorf("b0, created after the dump started, is in it")
	}
}
